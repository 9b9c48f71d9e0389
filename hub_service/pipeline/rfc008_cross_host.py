"""RFC 008's `hub.cross_host_determinism`: the revision's plan, played from the same seed on its
smoke container and on a container of the same image on a second engine, on another machine
(`HubSettings.cross_host_engine`), gives the same observations, rewards and dones; and
`semantic.verifier_portability`: the verifier rewards the oracle and each canary the same there.

The image goes to the second engine through the engines' own API (saved here, loaded there: no
registry needed) and runs there as confined as here (the same user, limits and isolated network;
its bridge has a name of its own, so that a second engine on this very machine, as in the tests,
never meets the first one's). A second engine that does not answer, lacks the sandbox's runtime or
is the first one again is the host's trouble: the check says skip and why, never the env's failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hub_service.settings import HubSettings
from openenv.validation.report import Report
from openenv.validation.rfc008 import Level, ResultV2, load_policy
from openenv.validation.rfc008.manifest import NormalizedManifest
from openenv.validation.rfc008.policy import ResultStatus

__all__ = ["CHECKS", "Revision", "cross_host_results"]

CHECK = "hub.cross_host_determinism"
PORTABILITY = "semantic.verifier_portability"
CHECKS = (CHECK, PORTABILITY)
SECOND_BRIDGE = "oe-hub-smoke2"  # the second engine's smoke bridge (never the first one's name)


@dataclass(frozen=True)
class Revision:
    """The revision whose smoke container (image `image`, its server on `port` inside, run with
    `overrides` of the sandbox's limits) answers at `url`; its package is `folder`."""

    image: str
    port: int
    overrides: dict[str, Any]
    folder: Path
    url: str
    manifest: NormalizedManifest | None
    declared: Any  # openenv.declared.Declared


def cross_host_results(settings: HubSettings, revision: Revision) -> list[ResultV2]:
    """`hub.cross_host_determinism` and `semantic.verifier_portability` of `revision`."""
    started = time.perf_counter()
    try:
        graded = _grade(settings, revision)
    except Exception as exc:  # a fault of the Hub's own: never a pass, never the env's failure
        graded = dict.fromkeys(CHECKS, _skip(f"the check failed: {type(exc).__name__}: {exc}"))
    spent = round(time.perf_counter() - started, 4)
    return [
        ResultV2(check_id=c, status=st, evidence=ev, measured=me, remediation=re_, duration_s=spent)
        for c, (st, ev, me, re_) in graded.items()
    ]


_Graded = tuple[ResultStatus, list[str], dict[str, Any], str | None]


def _skip(why: str, measured: dict[str, Any] | None = None) -> _Graded:
    return "skip", [why], dict(measured or {}), None


def _grade(settings: HubSettings, revision: Revision) -> dict[str, _Graded]:
    from openenv.validation.rfc008.runtime import RuntimeSubject, declared_plans

    image, port, overrides, declared = revision.image, revision.port, revision.overrides, revision.declared

    def both(why: str, measured: dict[str, Any] | None = None) -> dict[str, _Graded]:
        return dict.fromkeys(CHECKS, _skip(why, measured))

    if not settings.cross_host_engine:
        return both("this Hub has one engine host (its setting cross_host_engine is unset)")
    if getattr(declared, "stochastic", False):
        return both("the env declares stochastic outcomes (validation.stochastic: true)")
    subject = RuntimeSubject(
        url=revision.url.rstrip("/"),
        root=revision.folder,
        manifest=revision.manifest,
        legacy=Report(),
        policy=load_policy(None),
        level=Level.SEMANTIC,
        timeout_s=settings.step_timeout_s,
        varying_fields=list(getattr(declared, "varying_fields", None) or []),
    )
    plans = declared_plans(subject)
    if plans.plan is None and plans.oracle is None:
        return both(plans.problem or "the env declares no plan to replay (an oracle script, or schema 2's probe_path)")
    from openenv.engines import engine

    here = engine().client()
    second = engine(host=settings.cross_host_engine)
    try:
        there = second.new_client(timeout=max(60, settings.step_timeout_s))
        ids = (_identity(here.info()), _identity(there.info()))
    except Exception as exc:
        return both(f"the second engine ({settings.cross_host_engine}) does not answer ({exc}): the host's trouble")
    measured: dict[str, Any] = {"engines": list(ids)}
    if ids[0] == ids[1]:
        return both("cross_host_engine names the Hub's own engine: there is no second host to compare", measured)
    # Each plan once on both machines: the runtime level's plan, then the oracle (when it is not
    # that plan already) and each canary, whose rewards the verifier gives.
    played: list[tuple[str, Any]] = [(plans.source, plans.plan)] if plans.plan is not None else []
    if plans.oracle is not None and plans.oracle is not plans.plan:
        played.append(("the oracle", plans.oracle))
    played += [(f"canary {i + 1}", c) for i, c in enumerate(plans.canaries)]
    try:
        copied = _copy_image(here, there, image)
        try:
            pairs = asyncio.run(
                _play_there(settings, second, there, port, overrides, subject, image, [p for _, p in played])
            )
        finally:
            if copied:
                _forget(there, image)
    except _Unavailable as exc:
        return both(str(exc), measured)
    outcomes = dict(zip([name for name, _ in played], pairs, strict=True))
    failed = next(((n, a.failure or b.failure) for n, (a, b) in outcomes.items() if a.failure or b.failure), None)
    if failed:
        return both(f"{failed[0]} could not be played on both engines: {failed[1]}", measured)
    return {
        CHECK: _determinism(plans, outcomes, subject.varying_fields, measured),
        PORTABILITY: _portability(plans, outcomes, played, measured),
    }


def _determinism(plans: Any, outcomes: dict[str, Any], varying: list[str], measured: dict[str, Any]) -> _Graded:
    if plans.plan is None:
        return _skip(plans.problem or "the env declares no runtime plan", measured)
    first, second = outcomes[plans.source]
    a, b = first.outcome(varying), second.outcome(varying)
    measured = {**measured, "plan": plans.source, "seed": plans.plan.reset.seed, "observations": len(a)}
    differ = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if differ is None and len(a) != len(b):
        differ = min(len(a), len(b))
    if differ is None:
        return (
            "pass",
            [
                f"the plan ({plans.source}) from seed {plans.plan.reset.seed} gave the same {len(a)} observations, "
                "rewards and dones on both engines"
            ],
            measured,
            None,
        )
    return (
        "fail",
        [
            f"the two engines differ at observation {differ}: {str(a[differ] if differ < len(a) else None)[:200]} vs "
            f"{str(b[differ] if differ < len(b) else None)[:200]}"
        ],
        measured,
        "derive every outcome from reset's seed and the actions, never from the machine (host or container "
        "names, addresses, clocks, CPU count); or declare the fields that vary (validation.varying_fields)",
    )


def _portability(
    plans: Any, outcomes: dict[str, Any], played: list[tuple[str, Any]], measured: dict[str, Any]
) -> _Graded:
    if plans.oracle is None:
        return _skip(plans.problem or "the env declares no oracle to reward (validation.capabilities.oracle)", measured)
    oracle = next(n for n, p in played if p is plans.oracle)
    names = [oracle] + [n for n, _ in played if n.startswith("canary ")]
    rewards = {("the oracle" if n == oracle else n): [r.last_reward() for r in outcomes[n]] for n in names}
    measured = {**measured, "rewards": rewards}
    differ = [f"{n}: {r[0]} here, {r[1]} on the second engine" for n, r in rewards.items() if r[0] != r[1]]
    if differ:
        return (
            "fail",
            [f"the verifier rewards differently on the second machine: {'; '.join(differ[:5])}"],
            measured,
            "make the verifier depend on the episode alone (not on the machine's libraries, locale, clock or CPU)",
        )
    return (
        "pass",
        [f"the verifier gave the same reward on both machines to the oracle and {len(rewards) - 1} canaries"],
        measured,
        None,
    )


def _identity(info: dict[str, Any]) -> str:
    """Which engine this is: its host, its ID and its data root (two engines of one machine may share
    an ID, read from the same key file, but never a data root)."""
    return f"{info.get('Name')}:{str(info.get('ID'))[:14]}:{info.get('DockerRootDir')}"


class _Unavailable(Exception):
    """The second engine cannot run the image (the host's trouble): the check skips with this."""


def _copy_image(here: Any, there: Any, image: str) -> bool:
    """Give the second engine `image` (the same image id), saved here and loaded there; returns
    whether it had to be copied (and so is removed again after the check)."""
    import docker

    wanted = here.images.get(image).id
    try:
        if there.images.get(image).id == wanted:
            return False
    except docker.errors.ImageNotFound:
        pass
    try:
        for _ in there.api.load_image(here.api.get_image(image, chunk_size=1 << 20)):
            pass
        loaded = there.images.get(image).id
    except Exception as exc:
        raise _Unavailable(f"the image could not be copied to the second engine: {exc}") from exc
    if loaded != wanted:
        raise _Unavailable(f"the second engine holds {loaded} under {image}, not {wanted}")
    return True


def _forget(there: Any, image: str) -> None:
    import contextlib

    with contextlib.suppress(Exception):  # what it keeps is the second engine's image GC's business
        there.images.remove(image, force=True)


async def _play_there(
    settings: HubSettings,
    second: Any,
    there: Any,
    port: int,
    overrides: dict[str, Any],
    subject: Any,
    image: str,
    plans: list[Any],
) -> list[tuple[Any, Any]]:
    """Each plan played on the smoke container and, at the same time, on a container of `image` on
    the second engine (started, confined, for these plays and stopped)."""
    from hub_service.sandbox import confined_provider
    from openenv.errors import OpenEnvError
    from openenv.validation.rfc008.runtime import play_plan

    try:
        provider = confined_provider(
            settings,
            image,
            startup_timeout_s=settings.smoke_timeout_s,
            labels={"org.openenv.hub.cross-host": "1"},
            port=port,
            overrides=overrides,
            on=second,
            client=there,
            bridge=SECOND_BRIDGE,
        )
        url = await provider.astart()
    except OpenEnvError as exc:
        raise _Unavailable(f"the second engine could not start the image: {exc}") from exc
    try:
        other = dataclasses.replace(subject, url=url.rstrip("/"))
        return [await asyncio.gather(play_plan(subject, p), play_plan(other, p)) for p in plans]
    finally:
        await provider.astop()
