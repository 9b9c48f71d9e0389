"""One RFC 008 validation run: parse the manifest, grade level by level, weigh by the policy, report.

    report, legacy = validate_package("envs/echo_env", level=Level.SEMANTIC)
    report.verdict, report.result("static.manifest")

The runtime and semantic levels serve the folder here as a process (`validate --run`'s server)
or check the server at `url`; the checks only a container lets anyone see say so and skip.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from openenv.manifest import MANIFEST_FILE
from openenv.validation.local import LocalServerError, failed_to_start, serve_folder, started_result
from openenv.validation.report import Report
from openenv.validation.rfc008.manifest import ManifestBlockError, NormalizedManifest, normalize
from openenv.validation.rfc008.policy import Level, PolicyError, load_policy
from openenv.validation.rfc008.report import ResultV2, ValidationReportV2, source_digest
from openenv.validation.rfc008.runtime import RuntimeSubject, runtime_results
from openenv.validation.rfc008.static import StaticSubject, static_results
from openenv.validation.runtime import validate_url
from openenv.validation.static import FolderContext, validate_folder

__all__ = ["UnsupportedTarget", "validate_package"]


class UnsupportedTarget(Exception):
    """Not a package this validator reads (no folder, no openenv.yaml): exit code 2."""


def _read_manifest(root: Path) -> tuple[NormalizedManifest | None, ManifestBlockError | None]:
    try:
        data = yaml.safe_load((root / MANIFEST_FILE).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        return None, ManifestBlockError([f"openenv.yaml is not valid YAML: {exc}"])
    except (OSError, UnicodeError) as exc:
        return None, ManifestBlockError([f"openenv.yaml cannot be read: {exc}"])
    try:
        return normalize(data), None
    except ManifestBlockError as exc:
        return None, exc


def validate_package(
    path: str | Path | None = None,
    *,
    url: str | None = None,
    level: Level = Level.STATIC,
    policy: str | None = None,
    skip_build: bool = False,
    space_id: str | None = None,
    import_app: bool = True,
    python: str | None = None,
    token: str | None = None,
    startup_timeout_s: float = 60.0,
    request_timeout_s: float = 30.0,
    sbom_path: Path | None = None,
    folder_report: Report | None = None,
    url_report: Report | None = None,
) -> tuple[ValidationReportV2, Report]:
    """Validate a package folder (and/or a running server) up to `level`, in the local lane.

    Args:
        path: the package folder. Without it, `url` alone is checked (no static level).
        url: a running server for the runtime levels; without it the folder is served here.
        level: the highest level to run.
        policy: severity policy version ("v1" covers the static level only; default "v2").
        skip_build: leave out what needs an image build (this validator runs no build of its own
            in the local lane: `static.reproducible_build` always waits for the Hub's lane).
        sbom_path: where `static.sbom` writes its CycloneDX document.
        folder_report: this SDK's static report of the folder, when the caller has it already
            (the Hub's validate stage); it is made here otherwise.
        url_report: this SDK's runtime report of the server at `url`, when the caller has it
            already (the Hub's smoke stage); it is made here otherwise.
        startup_timeout_s: seconds for the app's import and the local server's start-up.
        request_timeout_s: seconds for each request of the runtime checks (`--timeout`, as upstream's).
        Others: as for `openenv.validation.validate`.

    Returns:
        The RFC 008 report, and this SDK's own report of the same run (its details).

    Raises:
        UnsupportedTarget: `path` is not a folder with an openenv.yaml.
        PolicyError: an unknown policy, or a level the policy does not cover.
    """
    del skip_build  # every check that would need a build skips with its reason already
    chosen = load_policy(policy)
    if level >= Level.RUNTIME and "runtime.startup" not in chosen.entries:
        raise PolicyError(
            f"policy {chosen.version} covers the static level only: use --policy v2 for --level {level.name.lower()}"
        )
    if path is None and url is None:
        raise ValueError("give a folder, a url, or both")
    results: list[ResultV2] = []
    levels = [Level.STATIC] if path is not None else []
    manifest: NormalizedManifest | None = None
    digest = ""
    legacy = Report()
    root: Path | None = None
    declared_extra: dict[str, object] = {}
    if path is not None:
        root = Path(path).expanduser()
        if not root.is_dir():
            raise UnsupportedTarget(f"{root} is not a folder")
        if not (root / MANIFEST_FILE).is_file():
            raise UnsupportedTarget(f"{root} has no {MANIFEST_FILE}: it is not an OpenEnv package")
        started = time.perf_counter()
        try:
            digest = source_digest(root)
        except (ValueError, OSError) as exc:
            results.append(
                ResultV2(
                    check_id="static.manifest",
                    status="error",
                    evidence=[f"the package's source could not be read whole: {exc}"],
                    duration_s=round(time.perf_counter() - started, 4),
                )
            )
        legacy = folder_report or validate_folder(
            root, space_id=space_id, import_app=import_app, python=python, timeout_s=startup_timeout_s
        )
        manifest, error = _read_manifest(root)
        ctx = FolderContext(root, space_id=space_id, import_app=False, python=python, timeout_s=startup_timeout_s)
        subject = StaticSubject(root, ctx, manifest, error, legacy, chosen, sbom_path=sbom_path)
        graded = static_results(subject)
        if results:  # an unreadable source: static.manifest is already an error
            graded = [r for r in graded if r.check_id != "static.manifest"]
        results += graded
        if ctx.inspection is not None and isinstance(ctx.inspection.data, dict):
            from openenv.declared import read_declared

            declared = read_declared(ctx.inspection.data)
            declared_extra = {"stochastic": declared.stochastic, "varying_fields": declared.varying_fields}
    if level >= Level.RUNTIME:
        levels += [lv for lv in (Level.RUNTIME, Level.SEMANTIC) if lv <= level]
        results += _runtime(
            root,
            url,
            manifest,
            legacy,
            level,
            chosen.version,
            token,
            python,
            (startup_timeout_s, request_timeout_s),
            declared_extra,
            url_report,
        )
    report = ValidationReportV2(
        target=str(root) if root is not None else str(url),
        source_digest=digest,
        manifest=manifest,
        policy_version=chosen.version,
        lane="local",
        levels_run=levels,
        results=results,
        verdict=chosen.verdict(((r.check_id, r.status) for r in results), "local"),
    )
    return report, legacy


def _runtime(
    root: Path | None,
    url: str | None,
    manifest: NormalizedManifest | None,
    folder: Report,
    level: Level,
    policy: str,
    token: str | None,
    python: str | None,
    timeouts: tuple[float, float],
    declared: dict[str, object],
    url_report: Report | None,
) -> list[ResultV2]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    startup_s, request_s = timeouts

    def grade(at: str, remote: Report, local: bool) -> list[ResultV2]:
        subject = RuntimeSubject(
            url=at.rstrip("/"),
            root=root,
            manifest=manifest,
            legacy=remote,
            policy=load_policy(policy),
            level=level,
            timeout_s=request_s,
            headers=headers,
            varying_fields=list(declared.get("varying_fields") or []),  # type: ignore[call-overload]
            stochastic=bool(declared.get("stochastic")),
            local_process=local,
        )
        return runtime_results(subject)

    if url is not None:
        return grade(url, url_report or validate_url(url, token=token, timeout_s=request_s), False)
    assert root is not None
    started = time.perf_counter()
    if folder.manifest is None:
        remote = Report(checks=[]).finish()
        return grade("http://127.0.0.1:0", remote, True)
    try:
        with serve_folder(root, folder, python=python, timeout_s=startup_s) as served:
            ok = started_result(started, served)
            remote = validate_url(served, timeout_s=request_s)
            remote.checks.insert(0, ok)
            return grade(served, remote, True)
    except LocalServerError as exc:
        return grade("http://127.0.0.1:0", failed_to_start(exc, False), True)
