"""The Hub's RFC 008 report of a revision: the local lane's checks, run as `openenv validate` runs
them, and the hub lane's, which only a hub can run (RFC 008 leaves that lane to hub operators).

The validate stage writes the static level; the smoke stage writes the whole report once the
revision's container answers: the runtime and semantic levels are checked against it (the
declared plans replayed there), and the hub lane adds what the Hub measured. A hub-lane check
the Hub does not run yet says so (`skip`), never `pass`. The report decides the revision's fate
as the setting `rfc008_gate` says (`gate_failure`): by default, for an env that declares a
`validation:` block, a failed check of severity `fail` fails the stage that ran it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hub_service.catalog.states import RFC008_FAILURE, BuilderKind
from hub_service.pipeline.rfc008_container import ContainerMeasures
from hub_service.settings import HubSettings
from openenv.validation.report import Report
from openenv.validation.rfc008 import Level, ResultV2, ValidationReportV2, load_policy, validate_package
from openenv.validation.rfc008.policy import POLICY_VERSIONS
from openenv.validation.rfc008.runtime import RuntimeSubject

__all__ = ["build_results", "gate_failure", "hub_report", "static_report", "with_hub_results"]

_NOT_YET = "not run by this Hub yet"
# Decided by the publish stage (hub_service/pipeline/publish.py), after the report is first kept.
_AT_PUBLISH = {"hub.immutable_versioning", "hub.cosign_signature"}


def static_report(folder: Path, legacy: dict[str, Any], repo_id: str, *, run_code: bool) -> dict[str, Any]:
    """The static level of `folder`, from the validate stage's own report of it (no second import)."""
    report, _ = validate_package(
        folder, space_id=repo_id, import_app=run_code, folder_report=Report.model_validate(legacy)
    )
    return _in_hub_lane(report, {}).model_dump(mode="json")


def hub_report(
    folder: Path,
    legacy: dict[str, Any],
    runtime: dict[str, Any] | None,
    repo_id: str,
    url: str,
    *,
    first_work_s: float,
    settings: HubSettings,
    action_schema: dict[str, Any],
    container: ContainerMeasures | None = None,
) -> dict[str, Any]:
    """Every level of the revision whose container answers at `url`, in the hub lane, from the
    validate stage's report (`legacy`) and the smoke stage's runtime checks (`runtime`), with
    the statistical level played on it (hub_service/pipeline/rfc008_stats.py) and, given the
    `container`, the checks only a measurement of it decides (rfc008_container.py)."""
    budget_s = settings.first_work_budget_s
    if container is not None:
        container.begin_episodes()
    report, _ = validate_package(
        folder,
        url=url,
        level=Level.SEMANTIC,
        space_id=repo_id,
        import_app=False,
        folder_report=Report.model_validate(legacy),
        url_report=Report.model_validate(runtime) if runtime is not None else None,
    )
    on_time = first_work_s <= budget_s
    measured: dict[str, ResultV2] = {
        "hub.time_to_first_work": ResultV2(
            check_id="hub.time_to_first_work",
            status="pass" if on_time else "fail",
            measured={"seconds": round(first_work_s, 3), "budget_s": budget_s},
            evidence=[
                f"{first_work_s:.2f} s from the container's start to its first reset's reply "
                f"({'within' if on_time else 'over'} the Hub's {budget_s:g} s)"
            ],
            remediation=None
            if on_time
            else "make start-up and the first reset cheaper (load data lazily, or at build time)",
        )
    }
    if container is not None:
        container.end_episodes()
        measured.update((r.check_id, r) for r in container.results(report.manifest, folder))
    if Level.SEMANTIC in report.levels_run:
        if settings.statistical_episodes:
            results = _statistical(report, folder, url, settings, action_schema)
        else:
            off = "the Hub's statistical level is off (its setting statistical_episodes is 0)"
            results = [ResultV2(check_id=i, status="skip", evidence=[off]) for i in _level_ids(Level.STATISTICAL)]
        measured.update((r.check_id, r) for r in results)
        report = report.model_copy(update={"levels_run": [*report.levels_run, Level.STATISTICAL]})
    return _in_hub_lane(report, measured).model_dump(mode="json")


def with_hub_results(report: dict[str, Any], results: list[ResultV2]) -> dict[str, Any]:
    """The kept report with `results` in place of those of the same ids (the publish stage's), and
    its verdict weighed again."""
    kept = ValidationReportV2.model_validate(report)
    new = {r.check_id: r for r in results}
    merged = [new.pop(r.check_id, r) for r in kept.results] + list(new.values())
    policy = load_policy(kept.policy_version)
    verdict = policy.verdict(((r.check_id, r.status) for r in merged), "hub")
    return kept.model_copy(update={"results": merged, "verdict": verdict}).model_dump(mode="json")


def gate_failure(report: dict[str, Any] | None, declared: bool, gate: str) -> str | None:
    """Why the RFC 008 `report` fails the revision under the setting `rfc008_gate` (`gate`), or None.

    Each result `fail` of a check whose severity is `fail` counts, named by its id and first
    evidence. An `error` does not: it says the check could not judge, which may be the Hub's
    trouble, never evidence against the env. Under `declared`, only an env whose openenv.yaml
    has a `validation:` block (`declared`) is held to its report.
    """
    if gate == "off" or not report or (gate == "declared" and not declared):
        return None
    if report.get("policy_version") not in POLICY_VERSIONS:  # a report kept by an older Hub: it decides nothing
        return None
    policy = load_policy(str(report["policy_version"]))
    failed = [
        r
        for r in report.get("results") or []
        if r.get("status") == "fail"
        and (e := policy.entries.get(str(r.get("check_id")))) is not None
        and e.severity == "fail"
    ]
    if not failed:
        return None
    named = "; ".join(f"{r['check_id']}: {(r.get('evidence') or ['failed'])[0]}"[:300] for r in failed[:5])
    more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
    checks = "check" if len(failed) == 1 else "checks"
    return f"{RFC008_FAILURE}{len(failed)} {checks} of severity fail failed: {named}{more}"


def build_results(built: Any) -> list[ResultV2]:
    """What the build stage decided of the revision (`BuildOutput`): `hub.layer_isolation` and
    `static.reproducible_build`."""
    return [_layer_isolation(built), _reproducible(built)]


def _reproducible(built: Any) -> ResultV2:
    check = "static.reproducible_build"
    if built.builder != BuilderKind.CONTAINER:
        return ResultV2(check_id=check, status="skip", evidence=["built as a process here: there is no image"])
    found = built.rebuilt
    if found is None:
        why = "this Hub does not build revisions twice (its setting reproducible_build_check is off)"
        return ResultV2(check_id=check, status="skip", evidence=[why])
    if isinstance(found, str):
        return ResultV2(check_id=check, status="skip", evidence=[found])
    measured = {"layers": found.layers, "bitwise": found.bitwise}
    if found.same_files:
        how = "bit for bit" if found.bitwise else "the same files in every layer, timestamps aside"
        return ResultV2(
            check_id=check,
            status="pass",
            measured=measured,
            evidence=[f"built twice, the second time with no cache: {found.layers} layers, {how}"],
        )
    return ResultV2(
        check_id=check,
        status="fail",
        measured={**measured, "differing_layer": found.differing_layer, "step": found.step, "paths": found.paths},
        evidence=[
            f"built twice, the second time with no cache, layer {found.differing_layer} differs ({found.step}): "
            + ", ".join(found.paths[:5])
        ],
        remediation="pin what the build downloads, and declare ARG SOURCE_DATE_EPOCH=0 before pip installs "
        "(Python then writes hash-checked .pyc files, the same bytes on every build)",
    )


def _layer_isolation(built: Any) -> ResultV2:
    """`hub.layer_isolation` of a revision the build stage built (`BuildOutput`): its RUN cache
    mounts were given ids of its own env (a Dockerfile whose cache mounts the Hub cannot reach is
    refused at the build, openenv.dockerfile.scope_cache_mounts), so that no build reads what another
    env's left in a shared cache; its layers BuildKit reuses only by content."""
    check = "hub.layer_isolation"
    if built.builder != BuilderKind.CONTAINER or built.cache_scope is None:
        return ResultV2(check_id=check, status="skip", evidence=["built as a process here: there are no image layers"])
    mounts, dropped = built.cache_mounts or [], built.cache_mounts_dropped or []
    evidence = [
        f"its {len(mounts)} RUN cache mounts were kept to the env's own cache (ids under {built.cache_scope})"
        if mounts
        else "its Dockerfile mounts no build cache: its build shares only layers, which BuildKit reuses by content"
    ]
    if dropped:
        evidence.append(f"{len(dropped)} cache mounts with a variable in their options were left out: {dropped[0]}")
    measured = {"cache_scope": built.cache_scope, "cache_mounts": mounts, "dropped": dropped}
    return ResultV2(check_id=check, status="pass", evidence=evidence, measured=measured)


def _level_ids(level: Level) -> list[str]:
    return [i for i, e in load_policy(None).entries.items() if e.level == level]


def _statistical(
    report: ValidationReportV2, folder: Path, url: str, settings: HubSettings, action_schema: dict[str, Any]
) -> list[ResultV2]:
    from hub_service.pipeline.rfc008_stats import gather, statistical_results

    policy = load_policy(report.policy_version)
    subject = RuntimeSubject(
        url=url.rstrip("/"),
        root=folder,
        manifest=report.manifest,
        legacy=Report(),
        policy=policy,
        level=Level.STATISTICAL,
        timeout_s=settings.step_timeout_s,
    )
    run = asyncio.run(
        gather(
            subject,
            action_schema,
            episodes=settings.statistical_episodes,
            episode_steps=settings.statistical_episode_steps,
            budget_s=settings.statistical_budget_s,
        )
    )
    return statistical_results(run, report.manifest, policy.bounds)


def _in_hub_lane(report: ValidationReportV2, measured: dict[str, ResultV2]) -> ValidationReportV2:
    policy = load_policy(report.policy_version)
    ran = set(report.levels_run)
    # The local lane's checks the Hub measured replace the validator's skips (where their level ran).
    results = [measured.get(r.check_id, r) for r in report.results]
    for check_id, entry in policy.lane("hub").items():
        if entry.lane != "hub":
            continue
        if check_id in measured:
            results.append(measured[check_id])
        elif entry.level in ran:
            why = (
                "decided when the revision is published, after its smoke test" if check_id in _AT_PUBLISH else _NOT_YET
            )
            results.append(ResultV2(check_id=check_id, status="skip", evidence=[why]))
    return report.model_copy(
        update={
            "lane": "hub",
            "results": results,
            "verdict": policy.verdict(((r.check_id, r.status) for r in results), "hub"),
        }
    )
