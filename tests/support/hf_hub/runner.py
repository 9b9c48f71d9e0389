"""Running the stand-in Hub's Spaces, as the Hub runs a Docker Space after each push.

The Hub builds a Space's Dockerfile on every commit to `main` and serves the container at the
Space's URL; its runtime goes BUILDING → RUNNING (or BUILD_ERROR / RUNTIME_ERROR). `SpaceRunner`
does the same for an OpenEnv Space of the stand-in (one with an `openenv.yaml`), as a local
process on 127.0.0.1 started by `ProcessProvider` instead of a container: the runtime's domain and
the Space's `host` then point at that process, so clients (`from_hub`, the Hub service) reach it
exactly as they would reach a Space on huggingface.co. A new commit restarts it.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openenv.client.providers import ProcessProvider
    from tests.support.hf_hub import HubStandIn

__all__ = ["SpaceRunner"]

log = logging.getLogger("hf_hub.runner")


class SpaceRunner:
    """Keeps every OpenEnv Space of `hub` running its `main` as a local process.

    Args:
        hub: the stand-in (its commits no longer set RUNNING by themselves while this runs).
        workdir: where each revision's files are written before they run.
        poll_s: how often the Spaces are looked at.
    """

    def __init__(self, hub: HubStandIn, workdir: Path, *, poll_s: float = 0.2) -> None:
        self.hub = hub
        self.workdir = workdir
        self.poll_s = poll_s
        self.running: dict[str, tuple[str, ProcessProvider]] = {}  # repo id -> (commit, provider)
        self.failed: dict[str, str] = {}  # repo id -> the commit that did not start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hf-hub-space-runner", daemon=True)

    def start(self) -> None:
        self.hub.auto_run = False
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and every Space it started."""
        self._stop.set()
        self._thread.join(30)
        for _, provider in self.running.values():
            provider.stop()
        self.running.clear()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            for repo_id, head in self._wanted().items():
                if self._stop.is_set():
                    return
                current = self.running.get(repo_id)
                if (current is None or current[0] != head) and self.failed.get(repo_id) != head:
                    self._run(repo_id, head)

    def _wanted(self) -> dict[str, str]:
        store = self.hub.store
        with store.lock:
            found = {}
            for (kind, repo_id), repo in store.repos.items():
                head = repo.head()
                if kind == "space" and head is not None and {"Dockerfile", "openenv.yaml"} <= set(head.tree):
                    found[repo_id] = head.oid
            return found

    def _run(self, repo_id: str, sha: str) -> None:
        from openenv.client.providers import ProcessProvider
        from openenv.errors import OpenEnvError

        old = self.running.pop(repo_id, None)
        if old is not None:
            old[1].stop()
        self.hub.space(repo_id).runtime.pop("errorMessage", None)
        self.hub.set_runtime(repo_id, stage="BUILDING")
        folder = self.workdir / repo_id / sha
        for path, content in self.hub.files(repo_id, sha).items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        try:
            provider = ProcessProvider(folder, startup_timeout_s=300)
            url = provider.start()
        except OpenEnvError as exc:
            log.warning("Space %s@%s did not start: %s", repo_id, sha[:8], exc)
            self.failed[repo_id] = sha
            self.hub.set_runtime(repo_id, stage="RUNTIME_ERROR", errorMessage=str(exc).splitlines()[0])
            return
        host = url.removeprefix("http://")
        self.running[repo_id] = (sha, provider)
        repo = self.hub.space(repo_id)
        repo.host = url
        self.hub.set_runtime(repo_id, stage="RUNNING", hardware="cpu-basic", domains=[host])
        log.info("Space %s@%s runs at %s", repo_id, sha[:8], url)
