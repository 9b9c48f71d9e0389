"""Static checks of the manifest and of the app it names (manifest.*, app.*)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from openenv.manifest import MANIFEST_FILE
from openenv.validation._context import FolderContext, need_manifest
from openenv.validation.registry import Finding, ok, problem, register, skipped

__all__: list[str] = []


# -- manifest ---------------------------------------------------------------------------------------


@register(
    "manifest.present",
    "openenv.yaml exists",
    severity="error",
    stage="static",
    gate=True,
    remediation="add an openenv.yaml (`openenv init NAME` makes a complete env), or point at the env's folder",
)
def _manifest_present(ctx: FolderContext) -> Finding:
    if not ctx.root.is_dir():
        return problem(f"{ctx.root} is not a folder")
    if ctx.manifest_path.is_file():
        return ok(f"{MANIFEST_FILE} found", file=MANIFEST_FILE)
    if (ctx.root / "openenv.yml").is_file():
        return problem(
            "found openenv.yml, but the manifest must be named openenv.yaml",
            remediation="rename openenv.yml to openenv.yaml",
            file="openenv.yml",
        )
    return problem(f"no {MANIFEST_FILE} in {ctx.root}: this is not an OpenEnv environment folder")


def _problems(ctx: FolderContext, codes: set[str], *, warnings: bool = False) -> list[Finding]:
    assert ctx.inspection is not None
    found = ctx.inspection.warnings if warnings else ctx.inspection.errors
    return [
        problem(
            f"{p.field}: {p.message}" if p.field else p.message,
            remediation=p.hint or None,
            file=MANIFEST_FILE,
            line=p.line,
            rule=p.code,
            field=p.field,
        )
        for p in found
        if p.code in codes
    ]


@register(
    "manifest.syntax",
    "openenv.yaml is a YAML mapping",
    severity="error",
    stage="static",
    remediation="fix the YAML: indentation with spaces, a colon after each key, quotes around odd values",
)
def _manifest_syntax(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None:
        return skipped(f"no readable {MANIFEST_FILE}")
    found = _problems(ctx, {"syntax", "not_mapping", "too_large"})
    return found or ok("valid YAML mapping", file=MANIFEST_FILE)


@register(
    "manifest.duplicate_key",
    "No key is set twice",
    severity="error",
    stage="static",
    remediation="remove the repeated key: YAML silently keeps only the last one",
)
def _manifest_duplicates(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None or ctx.inspection.data is None:
        return skipped(f"{MANIFEST_FILE} did not parse")
    return _problems(ctx, {"duplicate_key"}) or ok("no duplicate keys", file=MANIFEST_FILE)


@register(
    "manifest.spec_version",
    "spec_version is one this SDK reads",
    severity="error",
    stage="static",
    gate=True,
    remediation="upgrade openenv-hub, or set spec_version: 1",
)
def _manifest_spec_version(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None or not isinstance(ctx.inspection.data, dict):
        return skipped(f"{MANIFEST_FILE} did not parse")
    unsupported = _problems(ctx, {"unsupported_version"})
    if unsupported:
        return unsupported
    legacy = _problems(ctx, {"no_spec_version"}, warnings=True)
    if legacy:
        return [Finding("problem", f.message, f.remediation, f.file, f.line, "warning", f.details) for f in legacy]
    return ok(f"spec_version {ctx.inspection.data.get('spec_version')}", file=MANIFEST_FILE)


@register(
    "manifest.schema",
    "openenv.yaml follows the manifest schema",
    severity="error",
    stage="static",
    remediation="fix the value as the message says; docs/manifest.md lists every key",
)
def _manifest_schema(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None or not isinstance(ctx.inspection.data, dict) or ctx.inspection.unsupported:
        return skipped(f"{MANIFEST_FILE} did not parse or its version is not supported")
    found = _problems(ctx, {"invalid", "missing"})
    if found:
        return found
    if ctx.manifest is None:  # duplicate keys only: the values themselves are fine
        return ok("values are valid (see manifest.duplicate_key)", file=MANIFEST_FILE)
    return ok(
        f"name {ctx.manifest.name!r}, app {ctx.manifest.app}, port {ctx.manifest.port}",
        file=MANIFEST_FILE,
        extensions=sorted(ctx.manifest.extensions),
    )


@register(
    "manifest.keys",
    "No misspelled keys",
    severity="warning",
    stage="static",
    remediation="rename the key as suggested; unknown keys are kept but not used",
)
def _manifest_keys(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None or not isinstance(ctx.inspection.data, dict):
        return skipped(f"{MANIFEST_FILE} did not parse")
    return _problems(ctx, {"unknown_key"}, warnings=True) or ok(
        "all keys are known or extension blocks", file=MANIFEST_FILE
    )


@register(
    "manifest.validation",
    "The `validation:` block (reward range, resources, network) is well formed",
    severity="warning",
    stage="static",
    remediation="fix the values shown; the block is optional (upstream 0.10.0's template writes one)",
)
def _manifest_validation(ctx: FolderContext) -> Finding | list[Finding]:
    from openenv.declared import read_declared

    if ctx.inspection is None or not isinstance(ctx.inspection.data, dict):
        return skipped(f"{MANIFEST_FILE} did not parse")
    declared = read_declared(ctx.inspection.data)
    if not declared.present:
        return ok("no validation block (it is optional)")
    line = key_line(ctx.manifest_path, "validation")
    if declared.problems:
        return [problem(f"{where}: {message}", file=MANIFEST_FILE, line=line) for where, message in declared.problems]
    parts = [
        f"reward range {list(declared.reward.range)}" if declared.reward else None,
        f"{declared.resources.cpu:g} cpu, {declared.resources.memory_mb} MB" if declared.resources else None,
        f"network {declared.network.mode}" if declared.network else None,
    ]
    return ok(
        "validation block: " + (", ".join(p for p in parts if p) or "nothing this SDK uses"),
        file=MANIFEST_FILE,
        line=line,
    )


def _norm_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@register(
    "manifest.name",
    "The manifest's name matches the folder or Space",
    severity="warning",
    stage="static",
    remediation="make `name` in openenv.yaml match the folder / Space name ('-' and '_' count as the same)",
)
def _manifest_name(ctx: FolderContext) -> Finding:
    if (skip := need_manifest(ctx)) is not None:
        return skip
    assert ctx.manifest is not None
    expected = ctx.space_id.split("/")[-1] if ctx.space_id else ctx.root.resolve().name
    what = "Space" if ctx.space_id else "folder"
    if _norm_name(ctx.manifest.name) == _norm_name(expected):
        return ok(f"name {ctx.manifest.name!r} matches the {what}", file=MANIFEST_FILE)
    return problem(
        f"name {ctx.manifest.name!r} does not match the {what} name {expected!r}",
        file=MANIFEST_FILE,
        line=key_line(ctx.manifest_path, "name"),
    )


def key_line(path: Path, key: str) -> int | None:
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if re.match(rf"^{re.escape(key)}\s*:", line):
            return number
    return None


# -- the app ----------------------------------------------------------------------------------------


@register(
    "app.module",
    "The manifest's app module is a file in the folder",
    severity="error",
    stage="static",
    remediation="set `app` to the module that builds the app, relative to the env folder, e.g. server.app:app",
)
def _app_module(ctx: FolderContext) -> Finding:
    if (skip := need_manifest(ctx)) is not None:
        return skip
    assert ctx.manifest is not None
    line = key_line(ctx.manifest_path, "app")
    if ctx.app_file is None:
        rel = ctx.manifest.app_module.replace(".", "/")
        return problem(
            f"app {ctx.manifest.app!r}: neither {rel}.py nor {rel}/__init__.py exists in the folder",
            file=MANIFEST_FILE,
            line=line,
        )
    module, note = ctx.app_file
    if note and ctx.app_prefix in ctx.package_names:
        return ok(
            f"{module.replace('.', '/')}.py exists; app {ctx.manifest.app!r} runs it as the package {ctx.app_prefix}",
            file=MANIFEST_FILE,
            package=ctx.app_prefix,
        )
    if note:
        return problem(
            f"app {ctx.manifest.app!r} names a module path outside the env; inside the folder it is {module}",
            remediation=f"set app: {module}:{ctx.manifest.app_attr}",
            file=MANIFEST_FILE,
            line=line,
            severity="warning",
        )
    return ok(f"{module.replace('.', '/')}.py exists", file=MANIFEST_FILE)


_UPSTREAM_SDK_TOPS = ("openenv_core", "core")


def _is_upstream_sdk(module: str) -> bool:
    """A module of upstream's SDK (`openenv.core...`, `openenv_core`), which this SDK does not have."""
    top = module.split(".")[0]
    return top in _UPSTREAM_SDK_TOPS or (top == "openenv" and module != "openenv")


@register(
    "app.import",
    "The app's module imports",
    severity="error",
    stage="static",
    remediation="fix the error shown; run `openenv serve` to see the full traceback",
)
def _app_import(ctx: FolderContext) -> Finding:
    if (skip := need_manifest(ctx)) is not None:
        return skip
    if ctx.app_file is None:
        return skipped("the app module was not found (see app.module)")
    if not ctx.import_app:
        return skipped("importing the app was turned off")
    result = ctx.probe
    loc = result.location or {}
    imported = result.data.get("imported") or ctx.app_file[0]
    how: dict[str, Any] = {"import_mode": result.import_mode, "module": imported}
    if result.ok or result.stage in ("attr", "asgi"):
        as_package = (
            f" as the package {imported.split('.')[0]} (its code imports itself relatively)"
            if result.import_mode == "package"
            else f" with the folder installed as {', '.join(ctx.mapped_packages)}, as its pyproject maps it "
            "(its code imports its own package by name)"
            if result.import_mode == "installed"
            else ""
        )
        return ok(f"{imported} imports{as_package}", app_type=result.data.get("app_type"), **how)
    # "Not installed here" or "broken": the nearest module not found along the exception chain
    # (an env may wrap a missing dependency in an ImportError of its own) decides.
    missing = result.missing_modules[0] if result.stage == "import" and result.missing_modules else ""
    if missing and not ctx.is_env_module(missing):
        if _is_upstream_sdk(missing):
            return skipped(
                f"the app is built on upstream openenv-core ({missing}), which this Python does not have; "
                "pass --python with the env's own interpreter to import it",
                missing_module=missing,
                **how,
            )
        wrapped = (
            ""
            if result.data.get("error_type") == "ModuleNotFoundError"
            else f" ({result.data.get('error_type')}: {result.message})"
        )
        return problem(
            f"{missing!r} is not installed in this Python, so the app could not be imported here{wrapped}",
            remediation="install the env's dependencies here, or pass --python with the env's own interpreter",
            severity="warning",
            file=loc.get("file"),
            line=loc.get("line"),
            missing_module=missing,
            **how,
        )
    return problem(
        f"importing {imported} failed: {result.data.get('error_type', result.stage)}: {result.message}",
        file=loc.get("file"),
        line=loc.get("line"),
        traceback=result.data.get("traceback") or result.data.get("output"),
        **how,
    )


@register(
    "app.object",
    "The app attribute is an ASGI app with the OpenEnv routes",
    severity="error",
    stage="static",
    remediation="make the attribute the app that `openenv.create_app(...)` returns",
)
def _app_object(ctx: FolderContext) -> Finding:
    if (skip := need_manifest(ctx)) is not None:
        return skip
    assert ctx.manifest is not None
    if ctx.app_file is None or not ctx.import_app:
        return skipped("the app was not imported")
    result = ctx.probe
    if not result.ok and result.stage not in ("attr", "asgi"):
        return skipped("the app module did not import (see app.import)")
    if result.stage == "attr":
        names = ", ".join(result.data.get("names", [])[:10])
        return problem(
            f"{result.message}" + (f" (it has: {names})" if names else ""),
            file=MANIFEST_FILE,
            line=key_line(ctx.manifest_path, "app"),
        )
    if result.stage == "asgi":
        return problem(result.message, file=MANIFEST_FILE, line=key_line(ctx.manifest_path, "app"))
    routes = set(result.data.get("routes") or [])
    missing = [r for r in ("/ws", "/reset", "/step", "/state", "/health", "/schema") if r not in routes]
    if routes and missing:
        return problem(
            f"{ctx.manifest.app} is an ASGI app without the OpenEnv routes {', '.join(missing)}",
            remediation="build the app with openenv.create_app(...)",
            severity="warning",
            routes=sorted(routes),
        )
    return ok(
        f"{ctx.manifest.app} is a {result.data.get('app_type')}", routes=sorted(routes), ours=result.data.get("ours")
    )
