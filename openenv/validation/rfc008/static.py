"""The static level of RFC 008: ten checks of a package's files, none of which runs its code.

`static.layout` and `static.image_hygiene` carry what this SDK's own folder checks found
(openenv/validation/static.py: manifest, app, README, dependencies, package; the Dockerfile);
the others read the normalized manifest, the Dockerfile and the requirement files it names.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv.dockerfile import base_images, dockerfile_instructions
from openenv.validation._context import FolderContext
from openenv.validation.report import CheckResult, Report
from openenv.validation.rfc008._deps import Installed, installed_requirements
from openenv.validation.rfc008.manifest import ManifestBlockError, NormalizedManifest
from openenv.validation.rfc008.policy import Policy
from openenv.validation.rfc008.report import ResultV2

__all__ = ["OCI_LABELS", "StaticSubject", "build_sbom", "static_results"]

# The OCI annotations an env image must carry, and what each must equal when the manifest says it.
OCI_LABELS = (
    "org.opencontainers.image.title",
    "org.opencontainers.image.description",
    "org.opencontainers.image.version",
)


@dataclass
class StaticSubject:
    root: Path
    ctx: FolderContext
    manifest: NormalizedManifest | None
    manifest_error: ManifestBlockError | None
    legacy: Report
    policy: Policy
    sbom_path: Path | None = None  # where static.sbom writes the bill of materials, when asked


def _result(
    check_id: str, status: str, evidence: list[str], *, remediation: str | None = None, **measured: Any
) -> ResultV2:
    return ResultV2.model_validate(
        {"check_id": check_id, "status": status, "evidence": evidence, "remediation": remediation, "measured": measured}
    )


def _needs_manifest(check_id: str) -> ResultV2:
    return _result(check_id, "skip", ["unmet dependency: static.manifest (the `validation:` block did not parse)"])


def _manifest(s: StaticSubject) -> ResultV2:
    cid = "static.manifest"
    if s.manifest is None:
        assert s.manifest_error is not None
        err = s.manifest_error
        return _result(cid, "fail", err.errors, remediation=err.remediation, schema_errors=len(err.errors))
    reward, bounds = s.manifest.reward, s.policy.bounds
    timeout = s.manifest.resources.episode_timeout_s
    beyond: list[str] = []
    if reward.oracle_tolerance > bounds.max_oracle_tolerance:
        beyond.append(
            f"reward.oracle_tolerance {reward.oracle_tolerance:g} is over the policy's {bounds.max_oracle_tolerance:g}"
        )
    if reward.floor_margin < bounds.min_floor_margin:
        beyond.append(f"reward.floor_margin {reward.floor_margin:g} is under the policy's {bounds.min_floor_margin:g}")
    if reward.variance_tolerance is not None and reward.variance_tolerance > bounds.max_variance_tolerance:
        beyond.append(
            f"reward.variance_tolerance {reward.variance_tolerance:g} is over the policy's "
            f"{bounds.max_variance_tolerance:g}"
        )
    if timeout > bounds.max_episode_timeout_s:
        beyond.append(f"resources.episode_timeout_s {timeout:g} is over the policy's {bounds.max_episode_timeout_s:g}")
    return _result(
        cid,
        "fail" if beyond else "pass",
        beyond or [f"the `validation:` block follows manifest schema {s.manifest.manifest_schema_version}"],
        remediation="declare tolerances and timeouts within the policy's bounds" if beyond else None,
        manifest_schema_version=s.manifest.manifest_schema_version,
    )


def _legacy(
    s: StaticSubject, cid: str, areas: tuple[str, ...], what: str, *, leave_out: tuple[str, ...] = ()
) -> ResultV2:
    """A check made of this SDK's own folder checks of `areas`: it fails on any problem they found."""
    mine = [c for c in s.legacy.checks if c.id.split(".")[0] in areas and c.id not in leave_out]
    problems = [c for c in mine if c.status in ("warn", "fail")]
    worst = ("pass", "skip", "warn", "fail")
    checks: dict[str, str] = {}
    for c in mine:  # a check may give several results: its worst stands for it
        checks[c.id] = max(checks.get(c.id, "pass"), c.status, key=worst.index)
    if not mine or all(c.status == "skip" for c in mine):
        return _result(cid, "skip", [f"the {what} checks could not run"], checks=checks)
    if problems:
        return _result(
            cid,
            "fail",
            [_line(c) for c in problems],
            remediation="; ".join(dict.fromkeys(c.remediation for c in problems if c.remediation)) or None,
            checks=checks,
            problems=[
                {
                    "check": c.id,
                    "severity": c.severity,
                    "message": c.message,
                    "file": c.file,
                    "line": c.line,
                    "remediation": c.remediation,
                }
                for c in problems
            ],
        )
    return _result(cid, "pass", [f"{len(mine)} {what} checks hold: {', '.join(checks)}"], checks=checks)


def _line(c: CheckResult) -> str:
    return f"{c.id}: {c.one_line().split(': ', 1)[1]}" + (" (fix: " + c.remediation + ")" if c.remediation else "")


def _layout(s: StaticSubject) -> ResultV2:
    return _legacy(
        s,
        "static.layout",
        ("manifest", "app", "readme", "deps", "package"),
        "layout",
        leave_out=("manifest.validation",),  # the block is static.manifest's
    )


def _image_hygiene(s: StaticSubject) -> ResultV2:
    result = _legacy(s, "static.image_hygiene", ("dockerfile",), "Dockerfile")
    dockerfile = s.ctx.dockerfile
    if dockerfile is None or result.status == "skip":
        return result
    floating = [img for img, _ in base_images(dockerfile.read_text(encoding="utf-8", errors="replace"))]
    floating = [
        img
        for img in floating
        if "@sha256:" not in img and (":" not in img.rsplit("/", 1)[-1] or img.endswith(":latest"))
    ]
    if floating:
        lines = [f"FROM {img}: no tag, or `latest`, so each build may get another base" for img in floating]
        result.evidence = (result.evidence if result.status == "fail" else []) + lines
        result.status = "fail"
        result.remediation = "; ".join(filter(None, (result.remediation, "name the base image's tag or digest")))
    return result


def _labels(dockerfile: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for ins in dockerfile_instructions(dockerfile.read_text(encoding="utf-8", errors="replace")):
        if ins.keyword != "LABEL":
            continue
        try:
            words = shlex.split(ins.args)
        except ValueError:
            words = ins.args.split()
        for word in words:
            key, eq, value = word.partition("=")
            if eq:
                found[key] = value
    return found


def _oci_labels(s: StaticSubject) -> ResultV2:
    cid = "static.oci_labels"
    dockerfile = s.ctx.dockerfile
    if dockerfile is None:
        return _result(
            cid, "fail", ["no Dockerfile, so no image labels"], remediation="add a Dockerfile (static.layout)"
        )
    labels = _labels(dockerfile)
    manifest = s.ctx.manifest
    expected = {
        OCI_LABELS[0]: manifest.name if manifest else None,
        OCI_LABELS[2]: manifest.version if manifest else None,
    }
    problems = [f"no LABEL {key}" for key in OCI_LABELS if not labels.get(key)]
    problems += [
        f"LABEL {key}={labels[key]!r}, but openenv.yaml says {want!r}"
        for key, want in expected.items()
        if want and labels.get(key) and labels[key] != want
    ]
    name = dockerfile.relative_to(s.root).as_posix()
    return _result(
        cid,
        "fail" if problems else "pass",
        problems or [f"{name} labels the image with its title, description and version"],
        remediation=(
            f"add to {name}, after FROM: LABEL "
            + " ".join(f'{k}="..."' for k in OCI_LABELS)
            + " (title and version as "
            "in openenv.yaml)"
        )
        if problems
        else None,
        labels={k: v for k, v in labels.items() if k.startswith("org.opencontainers.")},
    )


def _requirements(s: StaticSubject) -> list[Installed] | None:
    dockerfile = s.ctx.dockerfile
    return None if dockerfile is None else installed_requirements(s.root, dockerfile)


def _dependency_pinning(s: StaticSubject) -> ResultV2:
    cid = "static.dependency_pinning"
    found = _requirements(s)
    if found is None:
        return _result(
            cid, "fail", ["no Dockerfile: nothing says what the image installs"], remediation="add a Dockerfile"
        )
    loose = [r for r in found if not r.pinned]
    return _result(
        cid,
        "fail" if loose else "pass",
        [f"{r.where}: {r.spec} does not name one exact version" for r in loose]
        or [f"every one of {len(found)} requirements the image installs is pinned"],
        remediation="pin each requirement to one version (name==1.2.3), or install from a lock file (uv.lock)"
        if loose
        else None,
        requirements=len(found),
        unpinned=len(loose),
    )


def build_sbom(name: str, version: str | None, requirements: list[Installed]) -> str:
    """A CycloneDX 1.6 bill of materials (JSON) of the env and the pinned requirements of its image."""
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    bom = Bom()
    env = Component(name=name, version=version or "", type=ComponentType.APPLICATION, bom_ref=f"env:{name}")
    bom.metadata.component = env
    parts = []
    for r in requirements:
        if r.name is None or r.version is None:
            continue
        purl = PackageURL("pypi", name=re.sub(r"[-_.]+", "-", r.name).lower(), version=r.version)
        part = Component(
            name=r.name, version=r.version, type=ComponentType.LIBRARY, purl=purl, bom_ref=purl.to_string()
        )
        if part not in bom.components:
            bom.components.add(part)
            parts.append(part)
    bom.register_dependency(env, parts)
    return JsonV1Dot6(bom).output_as_string(indent=2)


def _sbom(s: StaticSubject) -> ResultV2:
    """The image's components, each named with one version, as a CycloneDX document lists them; the
    document itself is written (by the maintained library) when a path is given for it."""
    cid = "static.sbom"
    found = _requirements(s)
    if found is None:
        return _result(cid, "fail", ["no Dockerfile: no image to list"], remediation="add a Dockerfile")
    unnamed = [r for r in found if not r.local and (r.name is None or r.version is None)]
    components = sum(1 for r in found if r.name and r.version)
    written = None
    if s.sbom_path is not None and not unnamed:
        try:
            import cyclonedx  # noqa: F401
        except ImportError:
            return _result(cid, "skip", ["writing it needs cyclonedx-python-lib: pip install 'openenv-hub[cli]'"])
        name = s.ctx.manifest.name if s.ctx.manifest else s.root.name
        version = s.ctx.manifest.version if s.ctx.manifest else None
        s.sbom_path.write_text(build_sbom(name, version, found) + "\n", encoding="utf-8")
        written = str(s.sbom_path)
    return _result(
        cid,
        "fail" if unnamed else "pass",
        [
            f"{r.where}: {r.spec} has no one version, so a bill of materials cannot name what the image holds"
            for r in unnamed
        ]
        or [
            f"CycloneDX 1.6 bill of materials: {components} component{'' if components == 1 else 's'}"
            + (f", written to {written}" if written else "")
        ],
        remediation="pin every requirement (static.dependency_pinning)" if unnamed else None,
        format="CycloneDX",
        spec_version="1.6",
        components=components,
        path=written,
    )


def _resource_declaration(s: StaticSubject) -> ResultV2:
    if s.manifest is None:
        return _needs_manifest("static.resource_declaration")
    r = s.manifest.resources
    return _result(
        "static.resource_declaration",
        "pass",
        [f"declares {r.cpu:g} CPU, {r.memory_mb} MB memory, {r.disk_mb} MB disk, {r.gpus} GPUs"],
        **r.model_dump(),
    )


def _timeout_ceiling(s: StaticSubject) -> ResultV2:
    cid = "static.timeout_ceiling"
    if s.manifest is None:
        return _needs_manifest(cid)
    timeout, ceiling = s.manifest.resources.episode_timeout_s, s.policy.bounds.max_episode_timeout_s
    over = timeout > ceiling
    return _result(
        cid,
        "fail" if over else "pass",
        [f"episode_timeout_s {timeout:g} {'is over' if over else 'is within'} the ceiling of {ceiling:g} s"],
        remediation=f"declare resources.episode_timeout_s of at most {ceiling:g}" if over else None,
        episode_timeout_s=timeout,
        ceiling_s=ceiling,
    )


def _task_distribution_pinning(s: StaticSubject) -> ResultV2:
    cid = "static.task_distribution_pinning"
    if s.manifest is None:
        return _needs_manifest(cid)
    caps, pin = s.manifest.capabilities, s.manifest.task_distribution
    if not (caps.task_api or caps.declared_task_count):
        return _result(cid, "pass", ["the env declares no task distribution (no task_api, no declared_task_count)"])
    if pin is not None and pin.pinned():
        return _result(cid, "pass", ["the task distribution is pinned"], **pin.model_dump(exclude_none=True))
    return _result(
        cid,
        "fail",
        ["the env serves tasks but pins neither a generator seed, a dataset version nor a generator model"],
        remediation="add validation.task_distribution with generator_seed, dataset_version or generator_model",
    )


def _reproducible_build(s: StaticSubject) -> ResultV2:
    return _result(
        "static.reproducible_build",
        "skip",
        [
            "needs two builds of the image to compare, which the static level does not make (it runs no "
            "code); the Hub makes them with its setting reproducible_build_check"
        ],
    )


_GRADERS: dict[str, Callable[[StaticSubject], ResultV2]] = {
    "static.manifest": _manifest,
    "static.reproducible_build": _reproducible_build,
    "static.image_hygiene": _image_hygiene,
    "static.layout": _layout,
    "static.sbom": _sbom,
    "static.oci_labels": _oci_labels,
    "static.resource_declaration": _resource_declaration,
    "static.timeout_ceiling": _timeout_ceiling,
    "static.dependency_pinning": _dependency_pinning,
    "static.task_distribution_pinning": _task_distribution_pinning,
}


def static_results(subject: StaticSubject) -> list[ResultV2]:
    """The static level's results, in the policy's order. A grader that crashes gives `error`."""
    out: list[ResultV2] = []
    for check_id in subject.policy.lane("local"):
        grader = _GRADERS.get(check_id)
        if grader is None:
            continue
        started = time.perf_counter()
        try:
            result = grader(subject)
        except Exception as exc:  # a bug in a grader: fail closed and say so
            result = _result(check_id, "error", [f"the check crashed: {type(exc).__name__}: {exc}"])
        result.duration_s = round(time.perf_counter() - started, 4)
        out.append(result)
    return out
