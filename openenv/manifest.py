"""`openenv.yaml`: the manifest of an environment — its schema, loading, and versioning.

The forms Spaces ship today all load:

```
spec_version: 1            # absent in the oldest manifests (then read as version 1, with a warning)
name: echo_env
type: space                # or "env"
runtime: fastapi           # or "python"
app: server.app:app        # import string of the ASGI app, relative to the env's folder
port: 8000
version: "0.1.0"           # optional from here on
description: ...
tags: [openenv, games]
variables: {LEVEL: "3"}    # public environment variables of the Space
secrets: [OPENAI_API_KEY]  # names of secrets the Space needs (never values)
action: EchoAction         # a class name, or a block describing the fields
observation: EchoObservation
rubric: {...}              # any other top-level block is kept as an extension
```

`inspect_manifest` reports every problem with the line it is on; `load_manifest` raises
`ManifestError` when there is one. `manifest_json_schema()` is the schema published in
docs/manifest.schema.json.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openenv._manifest_problems import MANIFEST_FILE, ManifestProblem
from openenv.errors import ConfigurationError

__all__ = [
    "DEFAULT_PORT",
    "MANIFEST_FILE",
    "SPEC_VERSION",
    "SUPPORTED_SPEC_VERSIONS",
    "Manifest",
    "ManifestError",
    "ManifestInspection",
    "ManifestProblem",
    "UnsupportedManifestError",
    "env_port",
    "find_app_module",
    "inspect_manifest",
    "load_manifest",
    "manifest_json_schema",
    "parse_manifest",
]

SPEC_VERSION = 1
SUPPORTED_SPEC_VERSIONS = frozenset({1})
SCHEMA_ID = "https://github.com/openenv-hub/openenv-hub/blob/main/docs/manifest.schema.json"

_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"
_APP_RE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
_ENV_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MAX_BYTES = 256 * 1024


class Manifest(BaseModel):
    """A parsed `openenv.yaml`. Unknown top-level blocks are kept (see `extensions`)."""

    model_config = ConfigDict(
        extra="allow",
        title="openenv.yaml",
        json_schema_extra={"$id": SCHEMA_ID, "$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    spec_version: int | None = Field(
        default=None,
        ge=1,
        description="Version of this manifest format. Absent in the oldest manifests, which are read as version 1.",
    )
    name: str = Field(
        pattern=_NAME_RE,
        description="The environment's name: letters, digits, '.', '_' or '-', starting with a letter or digit.",
    )
    type: Literal["space", "env"] = Field(
        default="space", description="What the folder is: a Space (the usual) or a bare env."
    )
    runtime: Literal["fastapi", "python"] = Field(default="fastapi", description="How the server is run.")
    app: str = Field(
        default="server.app:app",
        pattern=_APP_RE,
        description="Import string 'package.module:attribute' of the ASGI app, relative to the env's folder.",
    )
    port: int = Field(default=8000, ge=1, le=65535, description="Port the server listens on in its container.")
    version: str | None = Field(default=None, description="The environment's own version, e.g. '0.1.0'.")
    description: str | None = Field(default=None, description="One paragraph saying what the environment is.")
    author: str | None = Field(default=None, description="Who maintains it.")
    tags: list[str] = Field(default_factory=list, description="Topic tags, shown by catalogs.")
    variables: dict[str, str] = Field(
        default_factory=dict, description="Public environment variables set on the Space (values are text)."
    )
    secrets: list[str] = Field(default_factory=list, description="Names of the secrets the Space needs; never values.")
    action: str | dict[str, Any] | None = Field(
        default=None, description="The action class's name, or a description of its fields."
    )
    observation: str | dict[str, Any] | None = Field(
        default=None, description="The observation class's name, or a description of its fields."
    )

    @field_validator("spec_version", "port", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        # YAML gives bools for yes/no/on/off: never a number here. "8000" and 1.0 are fine.
        if isinstance(value, bool):
            raise ValueError("must be a whole number, not true/false")
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        # `version: 1.0` is a float in YAML; the author meant the text "1.0".
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("variables", mode="before")
    @classmethod
    def _variables(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, val in value.items():
            if not isinstance(key, str) or not _ENV_VAR_RE.match(key):
                raise ValueError(f"{key!r} is not an environment variable name (letters, digits, '_')")
            if isinstance(val, bool):
                val = "true" if val else "false"
            elif isinstance(val, (int, float)):
                val = str(val)
            elif val is None:
                val = ""
            out[key] = val
        return out

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_VAR_RE.match(name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, digits, '_')")
        return value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> Any:
        return [] if value is None else value

    @property
    def extensions(self) -> dict[str, Any]:
        """Top-level blocks this schema does not define (rubric, tools, ...), kept as written."""
        return dict(self.model_extra or {})

    @property
    def effective_spec_version(self) -> int:
        """`spec_version`, or 1 for the oldest manifests that have none."""
        return self.spec_version or 1

    @property
    def app_module(self) -> str:
        """The module part of `app` ("server.app")."""
        return self.app.partition(":")[0]

    @property
    def app_attr(self) -> str:
        """The attribute part of `app` ("app")."""
        return self.app.partition(":")[2]


_KNOWN_KEYS = tuple(Manifest.model_fields)

_HINTS: dict[str, str] = {
    "name": "use letters, digits, '.', '_' or '-', e.g. name: my_env",
    "app": "write it as 'module.path:attribute', e.g. app: server.app:app",
    "port": "use a port number such as 8000",
    "spec_version": f"use spec_version: {SPEC_VERSION}",
    "type": "use type: space",
    "runtime": "use runtime: fastapi",
    "variables": "write variables as a mapping of NAME: value",
    "secrets": "list secret names only, e.g. secrets: [OPENAI_API_KEY]; set values with `openenv push --secret`",
    "tags": "write tags as a list, e.g. tags: [openenv, games]",
    "version": 'quote the version, e.g. version: "0.1.0"',
}


@dataclass(slots=True)
class ManifestInspection:
    """What `inspect_manifest` found: the manifest (None when it has errors), errors and warnings."""

    manifest: Manifest | None
    errors: list[ManifestProblem] = field(default_factory=list)
    warnings: list[ManifestProblem] = field(default_factory=list)
    data: Any = None

    @property
    def unsupported(self) -> bool:
        """The manifest was written for a spec_version this SDK does not know."""
        return any(p.code == "unsupported_version" for p in self.errors)


class ManifestError(ConfigurationError):
    """The manifest cannot be used. `problems` lists each error with its line."""

    def __init__(self, problems: list[ManifestProblem], source: str = MANIFEST_FILE) -> None:
        self.problems = problems
        self.source = source
        first = problems[0].format(source) if problems else f"{source}: invalid manifest"
        more = (
            f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''}; run `openenv validate`)"
            if len(problems) > 1
            else ""
        )
        super().__init__(first + more)


class UnsupportedManifestError(ManifestError):
    """The manifest's spec_version is newer than this SDK understands."""


def inspect_manifest(text: str | bytes, source: str = MANIFEST_FILE) -> ManifestInspection:
    """Parse and check a manifest's text, collecting every problem with its line.

    Returns:
        A `ManifestInspection`; its `manifest` is None when there is any error.
    """
    import yaml  # the cli/server extras; imported here so `import openenv.manifest` stays light

    from openenv._manifest_problems import LineIndex, merge_by_field, problem_from_pydantic
    from openenv._yaml import YamlLimitError, compose_limited

    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", errors="replace"))
    if size > _MAX_BYTES:
        return ManifestInspection(
            None,
            [
                ManifestProblem(
                    "too_large",
                    "",
                    f"the file is {size} bytes; a manifest is at most {_MAX_BYTES}",
                    hint="move large data out of openenv.yaml",
                )
            ],
        )
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return ManifestInspection(
                None,
                [
                    ManifestProblem(
                        "syntax",
                        "",
                        f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                        hint="save the file as UTF-8",
                    )
                ],
            )
    try:
        node, data = compose_limited(text, max_bytes=_MAX_BYTES)
    except YamlLimitError as exc:
        return ManifestInspection(
            None,
            [
                ManifestProblem(
                    "too_large",
                    "",
                    str(exc),
                    hint="a manifest is a few flat keys; remove the deep or repeated structure",
                )
            ],
        )
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        reason = getattr(exc, "problem", None) or str(exc)
        return ManifestInspection(
            None,
            [
                ManifestProblem(
                    "syntax",
                    "",
                    f"not valid YAML: {reason}",
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                    hint="fix the YAML syntax (indentation, quotes, colons)",
                )
            ],
        )
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        return ManifestInspection(
            None,
            [
                ManifestProblem(
                    "not_mapping",
                    "",
                    f"the manifest must be a mapping of keys to values, but it is {kind}",
                    line=1,
                    hint="start from `openenv init`, or write at least `name: my_env`",
                )
            ],
            data=data,
        )
    lines = LineIndex(node)
    errors: list[ManifestProblem] = list(lines.duplicates)
    warnings: list[ManifestProblem] = []
    for key in data:
        if not isinstance(key, str):
            errors.append(ManifestProblem("invalid", str(key), "top-level keys must be text", line=lines.line((key,))))
        elif key not in _KNOWN_KEYS:
            close = difflib.get_close_matches(key, _KNOWN_KEYS, n=1, cutoff=0.75)
            if close:
                warnings.append(
                    ManifestProblem(
                        "unknown_key",
                        key,
                        f"unknown key (did you mean {close[0]!r}?)",
                        line=lines.line((key,)),
                        hint=f"rename it to {close[0]}, or it is ignored",
                    )
                )
    version = data.get("spec_version")
    if "spec_version" not in data:
        warnings.append(
            ManifestProblem(
                "no_spec_version",
                "spec_version",
                f"no spec_version; read as version {SPEC_VERSION}",
                line=1,
                hint=f"add `spec_version: {SPEC_VERSION}` at the top",
            )
        )
    elif (
        isinstance(version, int)
        and not isinstance(version, bool)
        and version not in SUPPORTED_SPEC_VERSIONS
        and version > max(SUPPORTED_SPEC_VERSIONS)
    ):
        errors.append(
            ManifestProblem(
                "unsupported_version",
                "spec_version",
                f"spec_version {version} is newer than this openenv understands (it reads {sorted(SUPPORTED_SPEC_VERSIONS)})",
                line=lines.line(("spec_version",)),
                hint="upgrade openenv-hub: pip install -U openenv-hub",
            )
        )
        return ManifestInspection(None, errors, warnings, data)
    manifest: Manifest | None = None
    try:
        manifest = Manifest.model_validate({k: v for k, v in data.items() if isinstance(k, str)})
    except ValidationError as exc:
        errors.extend(
            merge_by_field([problem_from_pydantic(err, lines, _HINTS) for err in exc.errors(include_url=False)])
        )
    if errors:
        return ManifestInspection(None, errors, warnings, data)
    return ManifestInspection(manifest, errors, warnings, data)


def parse_manifest(text: str | bytes, source: str = MANIFEST_FILE) -> Manifest:
    """Parse a manifest's text.

    Raises:
        UnsupportedManifestError: its spec_version is newer than this SDK.
        ManifestError: anything else wrong; `problems` has every error with its line.
    """
    found = inspect_manifest(text, source)
    if found.manifest is None:
        cls = UnsupportedManifestError if found.unsupported else ManifestError
        raise cls(found.errors, source)
    return found.manifest


def load_manifest(path: str | Path) -> Manifest:
    """Load `openenv.yaml` from an env folder (or the file itself).

    Raises:
        ManifestError: no manifest there, or it is invalid (the message names the line).
    """
    path = Path(path)
    file = path / MANIFEST_FILE if path.is_dir() else path
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise ManifestError(
            [
                ManifestProblem(
                    "missing_file",
                    "",
                    f"no {MANIFEST_FILE} in {file.parent}",
                    hint="is this an environment folder? `openenv init NAME` makes one",
                )
            ],
            str(file),
        ) from None
    except OSError as exc:
        raise ManifestError([ManifestProblem("unreadable", "", f"cannot read it: {exc.strerror}")], str(file)) from None
    return parse_manifest(raw, str(file))


def find_app_module(root: str | Path, app_module: str) -> str | None:
    """The module to import, from the env folder `root`, for the manifest's app module.

    Manifests written inside upstream's monorepo name the module from that repository's root
    (`envs.echo_env.server.app`); inside the env folder the same file is `server.app`, so leading
    parts are dropped until a file matches. Returns None when no file in the folder matches.
    """
    root = Path(root)
    parts = app_module.split(".")
    for start in range(len(parts)):
        rel = Path(*parts[start:])
        if (root / rel.with_suffix(".py")).is_file() or (root / rel / "__init__.py").is_file():
            return ".".join(parts[start:])
    return None


DEFAULT_PORT = 8000


def env_port(root: str | Path) -> int:
    """The port an env's server listens on in its container, read the way the Hub and Spaces read
    it: the manifest's `port` when it sets one, else the README front matter's `app_port` (what a
    Docker Space routes to), else 8000. Unreadable or invalid values are passed over."""
    from openenv._yaml import load_limited

    root = Path(root)
    sources = [(root / MANIFEST_FILE, "port"), (root / "README.md", "app_port")]
    for path, key in sources:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            if key == "app_port":  # only the front matter: the `---` block at the very top
                lines = text.splitlines()
                if not lines or lines[0].strip() != "---" or "---" not in [line.strip() for line in lines[1:]]:
                    continue
                text = "\n".join(lines[1 : 1 + [line.strip() for line in lines[1:]].index("---")])
            data = load_limited(text)
        except Exception:  # missing file, bad YAML, too large: the next source decides
            continue
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, bool):
            continue
        try:
            port = int(str(value).strip()) if value is not None else None
        except ValueError:
            continue
        if port is not None and 1 <= port <= 65535:
            return port
    return DEFAULT_PORT


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of `openenv.yaml` (published as docs/manifest.schema.json)."""
    schema = Manifest.model_json_schema()
    schema["additionalProperties"] = True
    schema["description"] = (
        "The manifest of an OpenEnv environment (openenv.yaml). Keys not listed here are kept as "
        "extension blocks. Every key but `name` has a default."
    )
    return schema
