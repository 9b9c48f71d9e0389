"""Static checks of the Space around the env: Dockerfile, README front matter, dependencies."""

from __future__ import annotations

import functools
import importlib.metadata
import sys
from collections.abc import Iterator

from openenv.validation import _files
from openenv.validation._context import FolderContext, need_front_matter, need_manifest
from openenv.validation.registry import Finding, ok, problem, register, skipped

__all__: list[str] = []

_HF_DEFAULT_PORT = 7860
_SDK_DISTS = frozenset({"openenv-hub", "openenv-core", "openenv"})
_UPSTREAM_SDK_DISTS = frozenset({"openenv-core", "openenv"})
# Modules an env gets with the SDK's server install (ours or upstream's): no need to declare them.
_PROVIDED = frozenset(
    {
        "openenv",
        "openenv_core",
        "pydantic",
        "pydantic_core",
        "fastapi",
        "starlette",
        "uvicorn",
        "orjson",
        "picows",
        "yaml",
        "typing_extensions",
        "anyio",
        "websockets",
        "httpx",
        "requests",
    }
)
# ... and what upstream's SDK (openenv / openenv-core) requires besides: its MCP envs import fastmcp and mcp.
_PROVIDED_BY_UPSTREAM = frozenset(
    {
        "fastmcp",
        "mcp",
        "gradio",
        "huggingface_hub",
        "openai",
        "rich",
        "typer",
        "jsonschema",
        "packaging",
        "tomli",
        "tomli_w",
    }
)
# Import names whose distribution is named otherwise (what to advise, and what `_provides` cannot guess).
_DIST_OF = {
    "yaml": "pyyaml",
    "PIL": "pillow",
    "cv2": "opencv-python",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "dotenv": "python-dotenv",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "jwt": "pyjwt",
    "git": "gitpython",
    "docx": "python-docx",
    "pptx": "python-pptx",
    "fitz": "pymupdf",
    "pyspiel": "open-spiel",
    "websocket": "websocket-client",
    "Crypto": "pycryptodome",
    "serial": "pyserial",
    "google": "protobuf",
    "OpenSSL": "pyopenssl",
    "magic": "python-magic",
    "ale_py": "ale-py",
    "Bio": "biopython",
}
_ALTERNATIVES = {
    "opencv-python": ("opencv-python-headless", "opencv-contrib-python", "opencv-contrib-python-headless"),
    "protobuf": ("google-cloud-core", "google-genai", "google-generativeai", "google-api-core"),
}


def _provides(dist: str, module: str) -> bool:
    """Whether the declared distribution `dist` (normalized) provides the top-level import `module`.

    Besides the table: the same name ('-', '_' and '.' alike: ale-py → ale_py, sumo-rl → sumo_rl),
    a `python-`/`py` prefix or `-python`/`-py` suffix (python-chess → chess, python-dateutil →
    dateutil, pyyaml → yaml, absl-py → absl), and a namespace's part (browsergym-core →
    browsergym).
    """
    mod = _files.normalize_dist(module)
    known = _DIST_OF.get(module)
    if dist == mod or (known is not None and (dist == known or dist in _ALTERNATIVES.get(known, ()))):
        return True
    if any(dist == prefix + mod for prefix in ("python-", "py")) or any(
        dist == mod + suffix for suffix in ("-python", "-py")
    ):
        return True
    return dist.startswith(mod + "-")


@functools.cache
def _installed_providers() -> dict[str, frozenset[str]]:
    """Top-level import name → the distributions installed here that provide it (normalized)."""
    return {
        module: frozenset(_files.normalize_dist(d) for d in dists)
        for module, dists in importlib.metadata.packages_distributions().items()
    }


# -- Dockerfile and README --------------------------------------------------------------------------


def _push_writes(
    ctx: FolderContext, message: str, what: str, *, line: int | None = None, file: str | None = "README.md"
) -> Finding:
    """A front matter gap that `openenv push` fills: a warning on a source folder, an error on a Space."""
    if ctx.space_id is None:
        return problem(
            message,
            remediation=f"nothing to do before pushing: `openenv push` writes {what} into the Space's README "
            "(add it to README.md yourself if you upload the folder another way)",
            file=file,
            line=line,
            severity="warning",
            source_folder=True,
        )
    return problem(message, file=file, line=line)


@register(
    "dockerfile.present",
    "A Dockerfile: at a Space's root, or server/Dockerfile in a source folder",
    severity="error",
    stage="static",
    remediation="add a Dockerfile (see `openenv init`); a Docker Space builds the one at its root",
)
def _dockerfile_present(ctx: FolderContext) -> Finding:
    found = ctx.dockerfile
    if found is None:
        return problem("no Dockerfile (looked for Dockerfile and server/Dockerfile)")
    rel = str(found.relative_to(ctx.root))
    if rel == "Dockerfile":
        return ok("Dockerfile found", file=rel)
    if ctx.space_id is None:  # upstream's source layout: push puts it at the Space's root
        return ok(
            f"{rel}, with the folder as its build context (`openenv push` copies it to the Space's root)", file=rel
        )
    return problem(
        f"the Dockerfile is at {rel}; a Docker Space needs it at the root",
        remediation="move it to the root (`openenv push` copies it there for you)",
        file=rel,
        severity="warning",
    )


@register(
    "dockerfile.port",
    "The Dockerfile exposes the manifest's port",
    severity="warning",
    stage="static",
    remediation="make EXPOSE (and the server's --port) match `port` in openenv.yaml",
)
def _dockerfile_port(ctx: FolderContext) -> Finding:
    if ctx.dockerfile is None:
        return skipped("no Dockerfile")
    if (skip := need_manifest(ctx)) is not None:
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
    first, line = exposed[0]
    return problem(
        f"the Dockerfile exposes {first} but openenv.yaml says port {ctx.manifest.port}", file=rel, line=line
    )


@register(
    "readme.front_matter",
    "README.md with Space front matter",
    severity="error",
    stage="static",
    remediation="start README.md with a '---' block holding sdk: docker, app_port and tags (see `openenv init`)",
)
def _readme_front_matter(ctx: FolderContext) -> Finding:
    fm = ctx.front_matter
    if fm is None:
        return _push_writes(
            ctx,
            "no README.md: a Space is configured by its README's front matter",
            "a README with front matter",
            file=None,
        )
    if fm.missing:
        return _push_writes(ctx, fm.error or "README.md has no front matter", "the front matter", line=fm.line)
    if fm.data is None:
        return problem(fm.error or "unreadable front matter", file="README.md", line=fm.line)
    return ok("front matter found", file="README.md", keys=sorted(fm.data))


@register(
    "readme.sdk",
    "The Space is a Docker Space",
    severity="error",
    stage="static",
    remediation="set `sdk: docker` in README.md's front matter",
)
def _readme_sdk(ctx: FolderContext) -> Finding:
    if (skip := need_front_matter(ctx)) is not None:
        return skip
    fm = ctx.front_matter
    assert fm is not None and fm.data is not None
    sdk = fm.data.get("sdk")
    if sdk == "docker":
        return ok("sdk: docker", file="README.md")
    if sdk is None:
        return _push_writes(ctx, "no `sdk` key in the front matter", "`sdk: docker`")
    return problem(f"sdk is {sdk!r}, not 'docker'", file="README.md", line=fm.lines.get("sdk"))


@register(
    "readme.app_port",
    "app_port routes to the server's port",
    severity="error",
    stage="static",
    remediation="set `app_port:` in README.md's front matter to the manifest's port",
)
def _readme_app_port(ctx: FolderContext) -> Finding:
    if (skip := need_front_matter(ctx)) is not None:
        return skip
    fm = ctx.front_matter
    assert fm is not None and fm.data is not None
    port = ctx.manifest.port if ctx.manifest else None
    app_port = fm.data.get("app_port")
    line = fm.lines.get("app_port")
    if app_port is None:
        if port in (None, _HF_DEFAULT_PORT):
            return ok(f"no app_port: the Hub routes to {_HF_DEFAULT_PORT}", file="README.md")
        if ctx.space_id is None:
            return _push_writes(
                ctx,
                f"no app_port; a Space would route to {_HF_DEFAULT_PORT} while the server listens on {port}",
                f"`app_port: {port}`",
            )
        return problem(
            f"no app_port, so the Hub would route to {_HF_DEFAULT_PORT} while the server listens on {port}",
            remediation=f"add `app_port: {port}` to the front matter",
            file="README.md",
        )
    if not isinstance(app_port, int) or isinstance(app_port, bool):
        return problem(f"app_port {app_port!r} is not a port number", file="README.md", line=line)
    if port is not None and app_port != port:
        return problem(f"app_port is {app_port} but openenv.yaml says port {port}", file="README.md", line=line)
    return ok(f"app_port {app_port}", file="README.md")


@register(
    "readme.tag",
    "The Space is tagged openenv",
    severity="warning",
    stage="static",
    remediation="add `openenv` to `tags:` in README.md's front matter so catalogs find it (`openenv push` adds it)",
)
def _readme_tag(ctx: FolderContext) -> Finding:
    if (skip := need_front_matter(ctx)) is not None:
        return skip
    fm = ctx.front_matter
    assert fm is not None and fm.data is not None
    tags = fm.data.get("tags") or []
    if isinstance(tags, list) and "openenv" in tags:
        return ok("tagged openenv", file="README.md")
    if ctx.space_id is None:
        return _push_writes(
            ctx, "the front matter's tags do not include 'openenv'", "the `openenv` tag", line=fm.lines.get("tags")
        )
    return problem("the front matter's tags do not include 'openenv'", file="README.md", line=fm.lines.get("tags"))


# -- dependencies -----------------------------------------------------------------------------------


@register(
    "deps.declared",
    "Dependencies are declared",
    severity="warning",
    stage="static",
    remediation="declare the env's dependencies in pyproject.toml (or server/requirements.txt)",
)
def _deps_declared(ctx: FolderContext) -> Finding:
    files = [p for p in ("pyproject.toml", "requirements.txt", "server/requirements.txt") if (ctx.root / p).is_file()]
    if files:
        return ok(f"declared in {', '.join(files)}", files=files)
    return problem("no pyproject.toml or requirements.txt")


@register(
    "deps.sdk",
    "The OpenEnv SDK is a declared dependency",
    severity="warning",
    stage="static",
    remediation="add openenv-hub[server] (or openenv-core) to the dependencies, or install it in the Dockerfile",
)
def _deps_sdk(ctx: FolderContext) -> Finding:
    declared = ctx.declared
    found = sorted(d for d in declared if d in _SDK_DISTS)
    if found:
        return ok(f"{found[0]} declared in {declared[found[0]]}")
    if ctx.dockerfile is not None:
        for ins in _files.dockerfile_instructions(ctx.dockerfile.read_text(encoding="utf-8", errors="replace")):
            if ins.keyword == "RUN" and "install" in ins.args and "OPENENV_SDK" in ins.args:
                return ok(
                    "the Dockerfile installs the SDK (OPENENV_SDK)", file=str(ctx.dockerfile.relative_to(ctx.root))
                )
    return problem("neither the dependencies nor the Dockerfile install openenv-hub or openenv-core")


@register(
    "deps.imports",
    "Third-party imports are declared",
    severity="warning",
    stage="static",
    remediation="add the missing distributions to pyproject.toml / requirements.txt",
)
def _deps_imports(ctx: FolderContext) -> Iterator[Finding]:
    declared = set(ctx.declared)
    local = _files.local_module_names(ctx.root) | set(ctx.package_names)
    provided = _PROVIDED | (_PROVIDED_BY_UPSTREAM if declared & _UPSTREAM_SDK_DISTS else frozenset())
    missing = 0
    for module, (file, line) in sorted(_files.imported_modules(ctx.root).items()):
        if module in local or module in provided or module in sys.builtin_module_names:
            continue
        if (
            any(_provides(dist, module) for dist in declared)
            or _installed_providers().get(module, frozenset()) & declared
        ):
            continue
        missing += 1
        dist = _DIST_OF.get(module, module)
        yield problem(
            f"{file} imports {module!r}, which no dependency file declares",
            file=file,
            line=line,
            remediation=f"add {dist} to pyproject.toml or requirements.txt",
            module=module,
        )
    if not missing:
        yield ok("every third-party import is declared")
