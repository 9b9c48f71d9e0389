"""A stage's wall-clock deadline, enforced from outside the stage: it runs in a thread of its own,
and when the deadline passes its `Abort` fires (its server is stopped and removed, its event loop
cancelled) and the runner moves on, whatever the stage was stuck on."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from hub_service.catalog.stage_runs import StageName
from hub_service.catalog.states import BuilderKind
from hub_service.pipeline.stage_kit import Abort, StageFailed, StageLog
from hub_service.queue.errors import Transient, WaitCode
from hub_service.settings import HubSettings

__all__ = ["within"]

log = logging.getLogger("hub_service.pipeline")

_ABORT_GRACE_S = 30.0  # how long an aborted stage gets to stop its server before the runner moves on


_ON_THE_ENGINE = frozenset({StageName.BUILD, StageName.SMOKE, StageName.PUBLISH})


def _engine_at_deadline(settings: HubSettings, elapsed_s: float) -> Transient | None:
    """Why a stage past its deadline is the engine's doing: it does not answer a new connection
    within `engine_answer_s`, or it started less than `elapsed_s` ago (it restarted during the
    stage); None when it answers as before, or when the Hub runs no engine."""
    from openenv.images._engine_trouble import engine_change

    if settings.builder != BuilderKind.CONTAINER:
        return None
    change = engine_change(None, started_within_s=elapsed_s, answer_s=settings.engine_answer_s)
    if change is None:
        return None
    setting = " (OPENENV_HUB_ENGINE_ANSWER_S): it hangs" if change.startswith("did not answer") else ""
    return Transient(
        f"the container engine {change} when the stage ran past its deadline{setting}", code=Transient.ENGINE_LOST
    )


def _deadline(settings: HubSettings, name: str) -> tuple[float, str]:
    if name == StageName.SMOKE:
        return settings.smoke_deadline_s, "OPENENV_HUB_SMOKE_DEADLINE_S"
    return settings.stage_deadline_s, "OPENENV_HUB_STAGE_DEADLINE_S"


def within(
    settings: HubSettings, name: str, fn: Callable[[StageLog, Abort], Any], stage_log: StageLog, *, job_id: int
) -> Any:
    """`fn(stage_log, abort)` in a thread of its own, stopped from here at stage `name`'s deadline.

    Raises:
        StageFailed: the deadline passed (the env's doing: its server was stopped).
        Transient: the deadline passed on a stage that runs on the container engine, and the engine
            does not answer or restarted meanwhile (`engine_lost`).
        Transient: the fetch's deadline passed (the source's doing).
        Whatever `fn` raised.
    """
    limit, setting = _deadline(settings, name)
    abort = Abort()
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = fn(stage_log, abort)
        except BaseException as exc:  # handed to the runner's thread, which decides what it means
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"stage-{name}-job-{job_id}", daemon=True)
    began = time.monotonic()
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        stage_log(f"the {name} stage ran past its deadline of {limit:g}s ({setting}); stopping it")
        # The engine first, as for every other failure: a hung or restarted engine is not the env's doing.
        engine = _engine_at_deadline(settings, time.monotonic() - began) if name in _ON_THE_ENGINE else None
        abort.abort()
        thread.join(_ABORT_GRACE_S)
        if thread.is_alive():
            log.warning("stage %s of job %s is still winding down after its abort; moving on", name, job_id)
        if engine is not None:
            stage_log(f"not the env's failure: {engine}")
            raise engine
        if name == StageName.FETCH:
            raise Transient(f"fetching the revision took longer than {limit:g}s ({setting})", code=WaitCode.SOURCE)
        if name == StageName.SMOKE:
            raise StageFailed(
                f"the smoke stage did not finish within {limit:g}s ({setting}); its server was stopped. "
                "Does the server answer every request promptly, with a complete reply?"
            )
        raise StageFailed(f"the {name} stage did not finish within {limit:g}s ({setting})")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
