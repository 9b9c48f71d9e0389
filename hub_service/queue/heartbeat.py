"""Keeping a claimed job's heartbeat fresh while it runs, so that it is not reclaimed."""

from __future__ import annotations

import logging
import threading

from sqlalchemy.orm import Session, sessionmaker

from hub_service.queue import jobs

__all__ = ["Heartbeat"]

log = logging.getLogger("hub_service.queue")


class Heartbeat(threading.Thread):
    """Keeps the job's heartbeat fresh while stages run; notices when the job is taken away."""

    def __init__(self, factory: sessionmaker[Session], job_id: int, worker_id: str, every_s: float) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.factory, self.job_id, self.worker_id, self.every_s = factory, job_id, worker_id, every_s
        self.stop_event = threading.Event()
        self.lost = False

    def run(self) -> None:
        while not self.stop_event.wait(self.every_s):
            try:
                if not jobs.heartbeat(self.factory, self.job_id, self.worker_id):
                    self.lost = True
                    return
            except Exception:  # the database may be restarting: keep trying, the job is still ours
                log.warning("heartbeat of job %s failed; retrying", self.job_id, exc_info=True)
