"""Waking a sleeping Space of the Hugging Face Hub before a visitor plays it.

cpu-basic Spaces sleep after idle time and take a while to wake. A visitor's start wakes the Space
(a visit to its URL, and a restart request with the Hub's token) the way `EnvClient.from_hub` does
(openenv/client/_space.py), waits at most `play_space_wake_timeout_s` for it to run, and tells the
visitor each stage the Hub reports on the way. A Space that answers 402 Payment Required, or is not
running when the wait ends, is not waited for again: the visitor plays the env's image on this Hub
instead (`Target.fallback`) and is told so, or is told why it cannot be played now.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from hub_service.play.errors import NotPlayable
from hub_service.play.instances import Target
from hub_service.settings import HubSettings

__all__ = ["woken"]

log = logging.getLogger("hub_service.play")


async def woken(
    target: Target,
    settings: HubSettings,
    say: Callable[[str], None] | None = None,
    record: Callable[[str], object] | None = None,
) -> Target:
    """The target to play once the Space of `target` (one with `waking_from`) was woken: the Space when it
    runs, else `target.fallback`. `say` hears, for the visitor, that the Space is waited for and each of
    its stages; `record` gets each stage (the health record's `record_stage`). Both may be called from a
    worker thread.

    Raises:
        NotPlayable: the Space did not wake (402, or not in time) and there is nothing else to play.
    """
    from openenv.client import _space
    from openenv.client.providers._health import PaymentRequiredError

    assert target.url is not None and target.waking_from is not None
    repo_id = target.key.split("@", 1)[0]
    bound = settings.play_space_wake_timeout_s
    tell = say or (lambda _: None)

    def heard(stage: str, waited_s: float) -> None:
        log.info("play: the Space %s is %s (%.1fs of at most %gs)", repo_id, stage, waited_s, bound)
        tell(f"{repo_id} is {stage} on the Hugging Face Hub ({waited_s:.0f}s of at most {bound:g}s)")
        if record is not None:
            try:
                record(stage)
            except SQLAlchemyError:  # the wake goes on; the next health poll records the stage all the same
                log.warning("play: could not record the stage %s of %s", stage, repo_id, exc_info=True)

    tell(
        f"{repo_id} is {target.waking_from} on the Hugging Face Hub: waking it, and waiting up to {bound:g}s "
        "(play_space_wake_timeout_s)"
    )
    api = _hf_api(settings)
    try:
        if target.waking_from in _space.ASLEEP:
            note = await _space.rouse(api, repo_id, target.url)
            log.info("play: woke the Space %s (%s)", repo_id, note)
        stage = await asyncio.to_thread(_space.wait_for_stage, api, repo_id, bound, heard)
    except PaymentRequiredError:
        why = f"answers 402 Payment Required at {target.url}"
    except Exception as exc:  # the Hub API's HTTP or connection errors: logged in full, and said
        log.warning("play: asking the Hugging Face Hub about %s failed", repo_id, exc_info=True)
        why = f"could not be woken: the Hugging Face Hub did not answer ({type(exc).__name__})"
    else:
        if stage in _space.RUNNING:
            return Target(key=target.key, how="space", url=target.url)
        why = f"was {target.waking_from} and is {stage} after {bound:g}s (play_space_wake_timeout_s)"
    if target.fallback is None:
        raise NotPlayable(
            f"the Space {repo_id} {why}, and this Hub has no image of it to run; try again later",
            public_urls=[target.url],  # the Space's own address: public, and worth saying
        )
    log.warning("play: the Space %s %s; playing it on this Hub instead (%s)", repo_id, why, target.fallback.how)
    tell(f"the Space {repo_id} {why}: playing it on this Hub instead ({target.fallback.how})")
    return target.fallback


def _hf_api(settings: HubSettings) -> Any:
    from huggingface_hub import HfApi

    token = settings.hf_token.get_secret_value() if settings.hf_token is not None else None
    return HfApi(endpoint=settings.hf_endpoint, token=token)
