"""Static checks of an env folder: manifest, app, Dockerfile, README front matter, dependencies.

Conventions that Spaces on the Hub predate (a pyproject, the `openenv` tag, the name matching
the folder, `spec_version`) are warnings; what stops a Space from building or serving is an
error. `strict=True` (our own envs, `openenv init` output) makes warnings fail too.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from openenv.manifest import MANIFEST_FILE, Manifest, ManifestInspection, find_app_module, inspect_manifest
from openenv.validation import _files
from openenv.validation._probe import AppProbe, probe_app
from openenv.validation.registry import Finding, checks, ok, problem, register, run_check, skipped
from openenv.validation.report import CheckResult, Report, Target

__all__ = ["FolderContext", "validate_folder"]

_HF_DEFAULT_PORT = 7860
_SDK_DISTS = frozenset({"openenv-hub", "openenv-core", "openenv"})
# Modules an env gets with the SDK's server install (ours or upstream's): no need to declare them.
_PROVIDED = frozenset({"openenv", "openenv_core", "pydantic", "pydantic_core", "fastapi", "starlette", "uvicorn", "orjson",
                       "picows", "yaml", "typing_extensions", "anyio", "websockets", "httpx", "requests"})
# Import names whose distribution is named differently.
_DIST_OF = {
    "yaml": "pyyaml", "PIL": "pillow", "cv2": "opencv-python", "sklearn": "scikit-learn", "skimage": "scikit-image",
    "bs4": "beautifulsoup4", "dotenv": "python-dotenv", "attr": "attrs", "dateutil": "python-dateutil",
    "jwt": "pyjwt", "git": "gitpython", "docx": "python-docx", "pptx": "python-pptx", "fitz": "pymupdf",
    "pyspiel": "open-spiel", "websocket": "websocket-client", "Crypto": "pycryptodome", "serial": "pyserial",
    "google": "protobuf", "OpenSSL": "pyopenssl", "magic": "python-magic", "gym": "gym", "ale_py": "ale-py",
}
_ALTERNATIVES = {"opencv-python": ("opencv-python-headless", "opencv-contrib-python", "opencv-contrib-python-headless"),
                 "protobuf": ("google-cloud-core", "google-genai", "google-generativeai", "google-api-core")}


class FolderContext:
    """What the checks of one folder share; expensive parts are computed once, on demand."""

    def __init__(self, root: Path, *, space_id: str | None, import_app: bool, python: str | None, timeout_s: float) -> None:
        self.root = root
        self.space_id = space_id
        self.import_app = import_app
        self.python = python
        self.timeout_s = timeout_s

    @functools.cached_property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_FILE

    @functools.cached_property
    def inspection(self) -> ManifestInspection | None:
        try:
            raw = self.manifest_path.read_bytes()
        except OSError:
            return None
        return inspect_manifest(raw, MANIFEST_FILE)

    @property
    def manifest(self) -> Manifest | None:
        return self.inspection.manifest if self.inspection else None

    @functools.cached_property
    def dockerfile(self) -> Path | None:
        return _files.find_dockerfile(self.root)

    @functools.cached_property
    def front_matter(self) -> _files.FrontMatter | None:
        readme = self.root / "README.md"
        if not readme.is_file():
            return None
        return _files.read_front_matter(readme.read_text(encoding="utf-8", errors="replace"))

    @functools.cached_property
    def declared(self) -> dict[str, str]:
        """Declared distributions (normalized) → the file declaring them."""
        return _files.declared_dependencies(self.root, self.dockerfile)

    @functools.cached_property
    def app_file(self) -> tuple[str, str | None] | None:
        """(module to import, a note) for the manifest's `app`, or None when no file matches."""
        assert self.manifest is not None
        module = find_app_module(self.root, self.manifest.app_module)
        if module is None:
            return None
        return module, (module if module != self.manifest.app_module else None)

    @functools.cached_property
    def probe(self) -> AppProbe:
        assert self.manifest is not None and self.app_file is not None
        return probe_app(self.root, self.app_file[0], self.manifest.app_attr, python=self.python, timeout_s=self.timeout_s)


def _need_manifest(ctx: FolderContext) -> Finding | None:
    if ctx.manifest is None:
        return skipped(f"{MANIFEST_FILE} is missing or invalid")
    return None


# -- manifest ---------------------------------------------------------------------------------------


@register("manifest.present", "openenv.yaml exists", severity="error", stage="static", gate=True,
          remediation="add an openenv.yaml (`openenv init NAME` makes a complete env), or point at the env's folder")
def _manifest_present(ctx: FolderContext) -> Finding:
    if not ctx.root.is_dir():
        return problem(f"{ctx.root} is not a folder")
    if ctx.manifest_path.is_file():
        return ok(f"{MANIFEST_FILE} found", file=MANIFEST_FILE)
    if (ctx.root / "openenv.yml").is_file():
        return problem("found openenv.yml, but the manifest must be named openenv.yaml",
                       remediation="rename openenv.yml to openenv.yaml", file="openenv.yml")
    return problem(f"no {MANIFEST_FILE} in {ctx.root}: this is not an OpenEnv environment folder")


def _problems(ctx: FolderContext, codes: set[str], *, warnings: bool = False) -> list[Finding]:
    assert ctx.inspection is not None
    found = ctx.inspection.warnings if warnings else ctx.inspection.errors
    return [problem(f"{p.field}: {p.message}" if p.field else p.message, remediation=p.hint or None,
                    file=MANIFEST_FILE, line=p.line, rule=p.code, field=p.field)
            for p in found if p.code in codes]


@register("manifest.syntax", "openenv.yaml is a YAML mapping", severity="error", stage="static",
          remediation="fix the YAML: indentation with spaces, a colon after each key, quotes around odd values")
def _manifest_syntax(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None:
        return skipped(f"no readable {MANIFEST_FILE}")
    found = _problems(ctx, {"syntax", "not_mapping", "too_large"})
    return found or ok("valid YAML mapping", file=MANIFEST_FILE)


@register("manifest.duplicate_key", "No key is set twice", severity="error", stage="static",
          remediation="remove the repeated key: YAML silently keeps only the last one")
def _manifest_duplicates(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None or ctx.inspection.data is None:
        return skipped(f"{MANIFEST_FILE} did not parse")
    return _problems(ctx, {"duplicate_key"}) or ok("no duplicate keys", file=MANIFEST_FILE)


@register("manifest.spec_version", "spec_version is one this SDK reads", severity="error", stage="static", gate=True,
          remediation="upgrade openenv-hub, or set spec_version: 1")
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


@register("manifest.schema", "openenv.yaml follows the manifest schema", severity="error", stage="static",
          remediation="fix the value as the message says; docs/manifest.md lists every key")
def _manifest_schema(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None or not isinstance(ctx.inspection.data, dict) or ctx.inspection.unsupported:
        return skipped(f"{MANIFEST_FILE} did not parse or its version is not supported")
    found = _problems(ctx, {"invalid", "missing"})
    if found:
        return found
    if ctx.manifest is None:  # duplicate keys only: the values themselves are fine
        return ok("values are valid (see manifest.duplicate_key)", file=MANIFEST_FILE)
    return ok(f"name {ctx.manifest.name!r}, app {ctx.manifest.app}, port {ctx.manifest.port}", file=MANIFEST_FILE,
              extensions=sorted(ctx.manifest.extensions))


@register("manifest.keys", "No misspelled keys", severity="warning", stage="static",
          remediation="rename the key as suggested; unknown keys are kept but not used")
def _manifest_keys(ctx: FolderContext) -> Finding | list[Finding]:
    if ctx.inspection is None or not isinstance(ctx.inspection.data, dict):
        return skipped(f"{MANIFEST_FILE} did not parse")
    return _problems(ctx, {"unknown_key"}, warnings=True) or ok("all keys are known or extension blocks", file=MANIFEST_FILE)


def _norm_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@register("manifest.name", "The manifest's name matches the folder or Space", severity="warning", stage="static",
          remediation="make `name` in openenv.yaml match the folder / Space name ('-' and '_' count as the same)")
def _manifest_name(ctx: FolderContext) -> Finding:
    if (skip := _need_manifest(ctx)) is not None:
        return skip
    assert ctx.manifest is not None
    expected = ctx.space_id.split("/")[-1] if ctx.space_id else ctx.root.resolve().name
    what = "Space" if ctx.space_id else "folder"
    if _norm_name(ctx.manifest.name) == _norm_name(expected):
        return ok(f"name {ctx.manifest.name!r} matches the {what}", file=MANIFEST_FILE)
    return problem(f"name {ctx.manifest.name!r} does not match the {what} name {expected!r}", file=MANIFEST_FILE,
                   line=_key_line(ctx.manifest_path, "name"))


def _key_line(path: Path, key: str) -> int | None:
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if re.match(rf"^{re.escape(key)}\s*:", line):
            return number
    return None


# -- the app ----------------------------------------------------------------------------------------


@register("app.module", "The manifest's app module is a file in the folder", severity="error", stage="static",
          remediation="set `app` to the module that builds the app, relative to the env folder, e.g. server.app:app")
def _app_module(ctx: FolderContext) -> Finding:
    if (skip := _need_manifest(ctx)) is not None:
        return skip
    assert ctx.manifest is not None
    line = _key_line(ctx.manifest_path, "app")
    if ctx.app_file is None:
        rel = ctx.manifest.app_module.replace(".", "/")
        return problem(f"app {ctx.manifest.app!r}: neither {rel}.py nor {rel}/__init__.py exists in the folder",
                       file=MANIFEST_FILE, line=line)
    module, note = ctx.app_file
    if note:
        return problem(f"app {ctx.manifest.app!r} names a module path outside the env; inside the folder it is {module}",
                       remediation=f"set app: {module}:{ctx.manifest.app_attr}", file=MANIFEST_FILE, line=line, severity="warning")
    return ok(f"{module.replace('.', '/')}.py exists", file=MANIFEST_FILE)


def _is_local(ctx: FolderContext, module: str) -> bool:
    top = module.split(".")[0]
    return (ctx.root / f"{top}.py").is_file() or (ctx.root / top).is_dir() or (ctx.root / "server" / f"{top}.py").is_file()


@register("app.import", "The app's module imports", severity="error", stage="static",
          remediation="fix the error shown; run `openenv serve` to see the full traceback")
def _app_import(ctx: FolderContext) -> Finding:
    if (skip := _need_manifest(ctx)) is not None:
        return skip
    if ctx.app_file is None:
        return skipped("the app module was not found (see app.module)")
    if not ctx.import_app:
        return skipped("importing the app was turned off")
    result = ctx.probe
    loc = result.location or {}
    if result.ok or result.stage in ("attr", "asgi"):
        return ok(f"{ctx.app_file[0]} imports", app_type=result.data.get("app_type"))
    missing = result.missing_module or ""
    top = missing.split(".")[0]
    if result.stage == "import" and result.data.get("error_type") == "ModuleNotFoundError" and missing:
        if top in ("openenv_core", "core") or (top == "openenv" and missing != "openenv"):
            return skipped(f"the app is built on upstream openenv-core ({missing}), which this Python does not have; "
                           "pass --python with the env's own interpreter to import it", missing_module=missing)
        if not _is_local(ctx, missing):
            return problem(f"{missing!r} is not installed in this Python, so the app could not be imported here",
                           remediation="install the env's dependencies here, or pass --python with the env's own interpreter",
                           severity="warning", file=loc.get("file"), line=loc.get("line"), missing_module=missing)
    return problem(f"importing {ctx.app_file[0]} failed: {result.data.get('error_type', result.stage)}: {result.message}",
                   file=loc.get("file"), line=loc.get("line"), traceback=result.data.get("traceback") or result.data.get("output"))


@register("app.object", "The app attribute is an ASGI app with the OpenEnv routes", severity="error", stage="static",
          remediation="make the attribute the app that `openenv.create_app(...)` returns")
def _app_object(ctx: FolderContext) -> Finding:
    if (skip := _need_manifest(ctx)) is not None:
        return skip
    assert ctx.manifest is not None
    if ctx.app_file is None or not ctx.import_app:
        return skipped("the app was not imported")
    result = ctx.probe
    if not result.ok and result.stage not in ("attr", "asgi"):
        return skipped("the app module did not import (see app.import)")
    if result.stage == "attr":
        names = ", ".join(result.data.get("names", [])[:10])
        return problem(f"{result.message}" + (f" (it has: {names})" if names else ""), file=MANIFEST_FILE,
                       line=_key_line(ctx.manifest_path, "app"))
    if result.stage == "asgi":
        return problem(result.message, file=MANIFEST_FILE, line=_key_line(ctx.manifest_path, "app"))
    routes = set(result.data.get("routes") or [])
    missing = [r for r in ("/ws", "/reset", "/step", "/state", "/health", "/schema") if r not in routes]
    if routes and missing:
        return problem(f"{ctx.manifest.app} is an ASGI app without the OpenEnv routes {', '.join(missing)}",
                       remediation="build the app with openenv.create_app(...)", severity="warning", routes=sorted(routes))
    return ok(f"{ctx.manifest.app} is a {result.data.get('app_type')}", routes=sorted(routes), ours=result.data.get("ours"))


# -- Dockerfile and README --------------------------------------------------------------------------


@register("dockerfile.present", "A Dockerfile at the folder's root", severity="error", stage="static",
          remediation="add a Dockerfile (see `openenv init`); a Docker Space builds the one at its root")
def _dockerfile_present(ctx: FolderContext) -> Finding:
    found = ctx.dockerfile
    if found is None:
        return problem("no Dockerfile (looked for Dockerfile and server/Dockerfile)")
    rel = str(found.relative_to(ctx.root))
    if rel != "Dockerfile":
        return problem(f"the Dockerfile is at {rel}; a Docker Space needs it at the root",
                       remediation="move it to the root (`openenv push` copies it there for you)", file=rel, severity="warning")
    return ok("Dockerfile found", file=rel)


@register("dockerfile.port", "The Dockerfile exposes the manifest's port", severity="warning", stage="static",
          remediation="make EXPOSE (and the server's --port) match `port` in openenv.yaml")
def _dockerfile_port(ctx: FolderContext) -> Finding:
    if ctx.dockerfile is None:
        return skipped("no Dockerfile")
    if (skip := _need_manifest(ctx)) is not None:
        return skip
    assert ctx.manifest is not None
    rel = str(ctx.dockerfile.relative_to(ctx.root))
    exposed: list[tuple[int, int]] = []
    for ins in _files.dockerfile_instructions(ctx.dockerfile.read_text(encoding="utf-8", errors="replace")):
        if ins.keyword == "EXPOSE":
            for word in ins.args.split():
                port = word.split("/")[0]
                if port.isdigit():
                    exposed.append((int(port), ins.line))
    if not exposed:
        return ok("no EXPOSE (nothing to disagree with)", file=rel)
    if any(p == ctx.manifest.port for p, _ in exposed):
        return ok(f"EXPOSE {ctx.manifest.port}", file=rel)
    port, line = exposed[0]
    return problem(f"the Dockerfile exposes {port} but openenv.yaml says port {ctx.manifest.port}", file=rel, line=line)


def _need_front_matter(ctx: FolderContext) -> Finding | None:
    fm = ctx.front_matter
    if fm is None or fm.data is None:
        return skipped("README.md has no readable front matter (see readme.front_matter)")
    return None


@register("readme.front_matter", "README.md with Space front matter", severity="error", stage="static",
          remediation="start README.md with a '---' block holding sdk: docker, app_port and tags (see `openenv init`)")
def _readme_front_matter(ctx: FolderContext) -> Finding:
    fm = ctx.front_matter
    if fm is None:
        return problem("no README.md: a Space is configured by its README's front matter")
    if fm.data is None:
        return problem(fm.error or "unreadable front matter", file="README.md", line=fm.line)
    return ok("front matter found", file="README.md", keys=sorted(fm.data))


@register("readme.sdk", "The Space is a Docker Space", severity="error", stage="static",
          remediation="set `sdk: docker` in README.md's front matter")
def _readme_sdk(ctx: FolderContext) -> Finding:
    if (skip := _need_front_matter(ctx)) is not None:
        return skip
    fm = ctx.front_matter
    assert fm is not None and fm.data is not None
    sdk = fm.data.get("sdk")
    if sdk == "docker":
        return ok("sdk: docker", file="README.md")
    return problem(f"sdk is {sdk!r}, not 'docker'" if sdk else "no `sdk` key", file="README.md", line=fm.lines.get("sdk"))


@register("readme.app_port", "app_port routes to the server's port", severity="error", stage="static",
          remediation="set `app_port:` in README.md's front matter to the manifest's port")
def _readme_app_port(ctx: FolderContext) -> Finding:
    if (skip := _need_front_matter(ctx)) is not None:
        return skip
    fm = ctx.front_matter
    assert fm is not None and fm.data is not None
    port = ctx.manifest.port if ctx.manifest else None
    app_port = fm.data.get("app_port")
    line = fm.lines.get("app_port")
    if app_port is None:
        if port in (None, _HF_DEFAULT_PORT):
            return ok(f"no app_port: the Hub routes to {_HF_DEFAULT_PORT}", file="README.md")
        return problem(f"no app_port, so the Hub would route to {_HF_DEFAULT_PORT} while the server listens on {port}",
                       remediation=f"add `app_port: {port}` to the front matter", file="README.md")
    if not isinstance(app_port, int) or isinstance(app_port, bool):
        return problem(f"app_port {app_port!r} is not a port number", file="README.md", line=line)
    if port is not None and app_port != port:
        return problem(f"app_port is {app_port} but openenv.yaml says port {port}", file="README.md", line=line)
    return ok(f"app_port {app_port}", file="README.md")


@register("readme.tag", "The Space is tagged openenv", severity="warning", stage="static",
          remediation="add `openenv` to `tags:` in README.md's front matter so catalogs find it (`openenv push` adds it)")
def _readme_tag(ctx: FolderContext) -> Finding:
    if (skip := _need_front_matter(ctx)) is not None:
        return skip
    fm = ctx.front_matter
    assert fm is not None and fm.data is not None
    tags = fm.data.get("tags") or []
    if isinstance(tags, list) and "openenv" in tags:
        return ok("tagged openenv", file="README.md")
    return problem("the front matter's tags do not include 'openenv'", file="README.md", line=fm.lines.get("tags"))


# -- dependencies -----------------------------------------------------------------------------------


@register("deps.declared", "Dependencies are declared", severity="warning", stage="static",
          remediation="declare the env's dependencies in pyproject.toml (or server/requirements.txt)")
def _deps_declared(ctx: FolderContext) -> Finding:
    files = [p for p in ("pyproject.toml", "requirements.txt", "server/requirements.txt") if (ctx.root / p).is_file()]
    if files:
        return ok(f"declared in {', '.join(files)}", files=files)
    return problem("no pyproject.toml or requirements.txt")


@register("deps.sdk", "The OpenEnv SDK is a declared dependency", severity="warning", stage="static",
          remediation="add openenv-hub[server] (or openenv-core) to the dependencies, or install it in the Dockerfile")
def _deps_sdk(ctx: FolderContext) -> Finding:
    declared = ctx.declared
    found = sorted(d for d in declared if d in _SDK_DISTS)
    if found:
        return ok(f"{found[0]} declared in {declared[found[0]]}")
    if ctx.dockerfile is not None:
        for ins in _files.dockerfile_instructions(ctx.dockerfile.read_text(encoding="utf-8", errors="replace")):
            if ins.keyword == "RUN" and "install" in ins.args and "OPENENV_SDK" in ins.args:
                return ok("the Dockerfile installs the SDK (OPENENV_SDK)", file=str(ctx.dockerfile.relative_to(ctx.root)))
    return problem("neither the dependencies nor the Dockerfile install openenv-hub or openenv-core")


@register("deps.imports", "Third-party imports are declared", severity="warning", stage="static",
          remediation="add the missing distributions to pyproject.toml / requirements.txt")
def _deps_imports(ctx: FolderContext) -> Iterator[Finding]:
    declared = set(ctx.declared)
    local = _files.local_module_names(ctx.root)
    missing = 0
    for module, (file, line) in sorted(_files.imported_modules(ctx.root).items()):
        if module in local or module in _PROVIDED or module in sys.builtin_module_names:
            continue
        dist = _DIST_OF.get(module, module)
        candidates = {_files.normalize_dist(dist), _files.normalize_dist(module), *(_ALTERNATIVES.get(dist, ()))}
        if candidates & declared:
            continue
        missing += 1
        yield problem(f"{file} imports {module!r}, which no dependency file declares", file=file, line=line,
                      remediation=f"add {dist} to pyproject.toml or requirements.txt", module=module)
    if not missing:
        yield ok("every third-party import is declared")


# -- the runner -------------------------------------------------------------------------------------


def validate_folder(
    path: str | Path,
    *,
    space_id: str | None = None,
    import_app: bool = True,
    python: str | None = None,
    strict: bool = False,
    timeout_s: float = 60.0,
) -> Report:
    """Run the static checks on an env folder.

    Args:
        path: the env folder (or a Space's files, downloaded).
        space_id: "owner/name" of the Space the files come from (the name check then uses it).
        import_app: import the app in a child Python (turn off for untrusted code).
        python: interpreter to import the app with (default: this one).
        strict: count warnings as failures.
        timeout_s: limit for importing the app.

    Returns:
        The report; `report.exit_code` is what `openenv validate` exits with. Never raises for a
        bad env; a bug in a check gives a report with status "error".
    """
    from openenv import __version__

    start = time.perf_counter()
    root = Path(path).expanduser()
    ctx = FolderContext(root, space_id=space_id, import_app=import_app, python=python, timeout_s=timeout_s)
    report = Report(tool_version=__version__, target=Target(path=str(root), space_id=space_id), strict=strict)
    unsupported: str | None = None
    error: str | None = None
    for check in checks("static"):
        if unsupported:
            report.checks.append(_skip_result(check.id, check.title, "not a supported OpenEnv environment"))
            continue
        try:
            results = run_check(check, ctx)
        except Exception as exc:  # a bug in a check: say so, keep the others
            error = f"check {check.id} crashed: {type(exc).__name__}: {exc}"
            results = [CheckResult(id=check.id, title=check.title, status="skip", severity="info", message=error)]
        report.checks.extend(results)
        if check.gate and any(r.status == "fail" for r in results):
            unsupported = next(r.message for r in results if r.status == "fail")
    if ctx.manifest is not None:
        report.manifest = ctx.manifest.model_dump(mode="json")
        report.target.name = ctx.manifest.name
    report.duration_ms = round((time.perf_counter() - start) * 1000, 1)
    return report.finish(unsupported=unsupported, error=error)


def _skip_result(check_id: str, title: str, reason: str) -> CheckResult:
    return CheckResult(id=check_id, title=title, status="skip", severity="info", message=reason)
