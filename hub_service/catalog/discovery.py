"""A revision's discovery declaration: `discovery.json`, README front matter, `pyproject.toml`.

What upstream's catalog producer reads to describe an env (its task, tags, representative
queries, license, agent tools), read here leniently and bounded like the manifest: a field that
is malformed is dropped with a warning that names it, and nothing here can fail a revision.
The record is stored on the version (`env_versions.discovery`) and feeds search, the env page
and the catalog snapshot (hub_service/catalog/snapshot.py).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml
from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["DISCOVERY_FILE", "discovery_search_text", "read_discovery", "validation_parts", "validation_search_text"]

DISCOVERY_FILE = "discovery.json"
MAX_FILE_BYTES = 64 * 1024  # a declaration is a few hundred bytes; more is not a declaration
MAX_TEXT = 4000
MAX_TAGS = 64
MAX_TAG = 64
MAX_QUERY = 500
MAX_TOOLS = 256
AVAILABILITY = ("resolvable", "external", "unknown")
# The calls that drive an env are not tools an agent may be offered (upstream's rule, too).
SIMULATION_CONTROLS = frozenset({"reset", "step", "state", "get_state"})
_KNOWN = frozenset(
    {
        "description",
        "tags",
        "representative_queries",
        "license",
        "license_source",
        "artifact_availability",
        "agent_tools",
    }
)
_PATH = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[^\\\x00-\x1f]+$")


def read_discovery(folder: Path) -> dict[str, Any]:
    """The discovery record of the env checked out in `folder` (never raises for its content).

    Keys: `description`, `tags`, `representative_queries`, `license`, `license_origin`,
    `artifact_availability`, `agent_tools`, `framework_requirement` (each only when declared
    and well formed), and `warnings`: `[{"field": ..., "message": ...}]`.
    """
    warnings: list[dict[str, str]] = []
    record: dict[str, Any] = {}
    declared = _declaration(folder / DISCOVERY_FILE, warnings)
    for key in sorted(set(declared) - _KNOWN):
        _warn(warnings, key[:64], "is not a discovery field; ignored")
    _text(declared, record, warnings)
    _tags(declared, record, warnings)
    _queries(declared, record, warnings)
    _availability(declared, record, warnings)
    _tools(declared, record, warnings)
    project = _project(folder / "pyproject.toml", warnings)
    license_name, origin = _license(declared, folder, project, warnings)
    if license_name is not None:
        record["license"], record["license_origin"] = license_name, origin
    requirement = _requirement(project, warnings)
    if requirement is not None:
        record["framework_requirement"] = requirement
    record["warnings"] = warnings
    return record


def discovery_search_text(record: Any) -> str:
    """What text search matches in a discovery record: description, queries, `#tag ` tokens."""
    if not isinstance(record, dict):
        return ""
    words = [record.get("description"), *(record.get("representative_queries") or [])]
    text = " ".join(w.lower() for w in words if isinstance(w, str))[: 2 * MAX_TEXT]
    tokens = "".join(f"#{t.lower()} " for t in record.get("tags") or [] if isinstance(t, str))
    return f"{text} {tokens}".strip()


_RFC008_PINS = frozenset({"generator_seed", "dataset_version", "generator_model"})


def validation_parts(manifest: Any) -> dict[str, Any]:
    """The manifest `validation:` parts that describe the env: capabilities, types, task_distribution.

    Kept as written when they have the shape a reader can show (lists of short strings; a
    mapping of task names to weights); anything else is left out.
    """
    block = manifest.get("validation") if isinstance(manifest, dict) else None
    if not isinstance(block, dict):
        return {}
    out: dict[str, Any] = {}
    declared = block.get("capabilities")
    # a list of capability names, as some Spaces write it; RFC 008's mapping (verifier, oracle, ...)
    # declares how the env is checked, not what it can do, and is shown by its report instead
    capabilities = [] if isinstance(declared, dict) else _names(declared)
    if capabilities:
        out["capabilities"] = capabilities
    types = block.get("types")
    if isinstance(types, dict):
        kinds = {str(k)[:64]: v[:200] for k, v in list(types.items())[:32] if isinstance(v, str)}
        if kinds:
            out["types"] = kinds
    elif _names(types):
        out["types"] = _names(types)
    tasks = block.get("task_distribution")
    if isinstance(tasks, dict) and set(tasks) <= _RFC008_PINS:
        pass  # RFC 008's pins of how tasks are made (a seed, a dataset version), not task weights
    elif isinstance(tasks, dict):
        weights = {
            str(k)[:64]: v
            for k, v in list(tasks.items())[:64]
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        if weights:
            out["task_distribution"] = weights
    elif _names(tasks):
        out["task_distribution"] = {name: 1 for name in _names(tasks)}
    return out


def validation_search_text(manifest: Any) -> str:
    """Filter tokens for the `validation:` parts: `cap:NAME `, `task:NAME ` (lowercase, no spaces)."""
    parts = validation_parts(manifest)
    caps = [f"cap:{_token(c)} " for c in parts.get("capabilities", [])]
    tasks = [f"task:{_token(t)} " for t in parts.get("task_distribution", {})]
    return "".join(caps + tasks).strip()


def checks_search_text(report: Any) -> str:
    """Filter tokens for an RFC 008 report's results: `chk:<check id>:<status> ` (the ids are
    lowercase dotted names; the status pass, fail, skip or error)."""
    results = report.get("results") if isinstance(report, dict) else None
    tokens = [
        f"chk:{r['check_id']}:{r['status']} "
        for r in (results if isinstance(results, list) else [])
        if isinstance(r, dict) and isinstance(r.get("check_id"), str) and isinstance(r.get("status"), str)
    ]
    return "".join(tokens).strip()


def _token(value: str) -> str:
    return "_".join(value.lower().split())[:64]


def _names(value: Any) -> list[str]:
    if isinstance(value, dict):
        value = list(value)
    if not isinstance(value, list):
        return []
    return [str(v).strip()[:64] for v in value[:64] if isinstance(v, str | int) and str(v).strip()]


def _warn(warnings: list[dict[str, str]], field: str, message: str) -> None:
    warnings.append({"field": field, "message": f"{field}: {message}"})


def _declaration(path: Path, warnings: list[dict[str, str]]) -> dict[str, Any]:
    try:
        if path.is_symlink() or not path.is_file():
            if path.is_symlink():
                _warn(warnings, DISCOVERY_FILE, "is a symlink; only a regular file is read")
            return {}
        if path.stat().st_size > MAX_FILE_BYTES:
            _warn(warnings, DISCOVERY_FILE, f"is larger than {MAX_FILE_BYTES // 1024} KiB; ignored")
            return {}
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        _warn(warnings, DISCOVERY_FILE, f"is not valid UTF-8 JSON ({type(exc).__name__}); ignored")
        return {}
    if not isinstance(raw, dict):
        _warn(warnings, DISCOVERY_FILE, "must be a JSON object; ignored")
        return {}
    return raw


def _nonempty(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _text(declared: dict[str, Any], record: dict[str, Any], warnings: list[dict[str, str]]) -> None:
    if "description" not in declared:
        return
    value = declared["description"]
    if not _nonempty(value):
        _warn(warnings, "description", "must be a non-empty string; ignored")
        return
    if len(value) > MAX_TEXT:
        _warn(warnings, "description", f"is longer than {MAX_TEXT} characters; cut")
    record["description"] = value.strip()[:MAX_TEXT]


def _tags(declared: dict[str, Any], record: dict[str, Any], warnings: list[dict[str, str]]) -> None:
    if "tags" not in declared:
        return
    value = declared["tags"]
    if not isinstance(value, list) or not all(_nonempty(t) and len(t) <= MAX_TAG for t in value):
        _warn(warnings, "tags", f"must be a list of non-empty strings of at most {MAX_TAG} characters; ignored")
        return
    if len(value) > MAX_TAGS:
        _warn(warnings, "tags", f"has more than {MAX_TAGS} tags; the first {MAX_TAGS} are kept")
    record["tags"] = sorted({t.strip() for t in value[:MAX_TAGS]})


def _queries(declared: dict[str, Any], record: dict[str, Any], warnings: list[dict[str, str]]) -> None:
    if "representative_queries" not in declared:
        return
    value = declared["representative_queries"]
    ok = isinstance(value, list) and all(_nonempty(q) and len(q) <= MAX_QUERY for q in value)
    if not ok or not (len(value) == 0 or 2 <= len(value) <= 5):
        _warn(
            warnings,
            "representative_queries",
            f"must be a list of 2 to 5 non-empty strings of at most {MAX_QUERY} characters; ignored",
        )
        return
    if value:
        record["representative_queries"] = [q.strip() for q in value]


def _availability(declared: dict[str, Any], record: dict[str, Any], warnings: list[dict[str, str]]) -> None:
    if "artifact_availability" not in declared:
        return
    value = declared["artifact_availability"]
    if value not in AVAILABILITY:
        _warn(warnings, "artifact_availability", f"must be one of {', '.join(AVAILABILITY)}; ignored")
        return
    record["artifact_availability"] = value


def _tools(declared: dict[str, Any], record: dict[str, Any], warnings: list[dict[str, str]]) -> None:
    if "agent_tools" not in declared:
        return
    tools = declared["agent_tools"]
    if not isinstance(tools, dict):
        _warn(warnings, "agent_tools", "must be an object with protocol, names and source; ignored")
        return
    names, protocol, source = tools.get("names"), tools.get("protocol"), tools.get("source")
    if not isinstance(protocol, str) or not protocol.strip() or len(protocol) > MAX_TAG:
        _warn(warnings, "agent_tools.protocol", "must be a short non-empty string (e.g. mcp); agent_tools ignored")
        return
    if (
        not isinstance(names, list)
        or not 1 <= len(names) <= MAX_TOOLS
        or not all(_nonempty(n) and len(n) <= MAX_TAG for n in names)
        or len(set(names)) != len(names)
    ):
        _warn(warnings, "agent_tools.names", f"must list 1 to {MAX_TOOLS} distinct tool names; agent_tools ignored")
        return
    controls = sorted(n for n in names if n.casefold() in SIMULATION_CONTROLS)
    if controls:
        _warn(warnings, "agent_tools.names", f"{', '.join(controls)} drive the env and are not agent tools; ignored")
        return
    if not isinstance(source, str) or not _PATH.match(source):
        _warn(warnings, "agent_tools.source", "must be a relative path inside the env; agent_tools ignored")
        return
    record["agent_tools"] = {"protocol": protocol.strip(), "names": list(names), "source": source}


def _project(path: Path, warnings: list[dict[str, str]]) -> dict[str, Any]:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1024 * 1024:
            return {}
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        _warn(warnings, "pyproject.toml", "could not be read as TOML; its license and requirements are not used")
        return {}
    return project if isinstance(project, dict) else {}


def _canonical(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("text")
    if not _nonempty(value):
        return None
    value = value.strip()
    if value in ("unknown", "other"):
        return value
    try:
        return str(canonicalize_license_expression(value))
    except InvalidLicenseExpression:
        return "other"


def _license(
    declared: dict[str, Any], folder: Path, project: dict[str, Any], warnings: list[dict[str, str]]
) -> tuple[str | None, str | None]:
    if "license" in declared:
        value = declared["license"]
        name = _canonical(value) if isinstance(value, str) else None
        if name is None or (name == "other" and value.strip() != "other"):
            _warn(warnings, "license", "must be an SPDX expression, 'other' or 'unknown'; ignored")
        else:
            source = declared.get("license_source")
            if source is not None and not (isinstance(source, str) and _PATH.match(source)):
                _warn(warnings, "license_source", "must be a relative path inside the env; ignored")
                source = None
            return name, source or DISCOVERY_FILE
    found = [(n, o) for n, o in ((_canonical(project.get("license")), "pyproject.toml"),) if n]
    readme = _front_matter(folder / "README.md").get("license")
    if _canonical(readme):
        found.append((_canonical(readme) or "unknown", "README.md"))
    if len({n for n, _ in found}) > 1:
        _warn(warnings, "license", "pyproject.toml and README.md name different licenses; shown as unknown")
        return "unknown", None
    return found[0] if found else (None, None)


def _front_matter(path: Path) -> dict[str, Any]:
    try:
        if path.is_symlink() or not path.is_file():
            return {}
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(64 * 1024)
    except OSError:
        return {}
    if not head.startswith("---"):
        return {}
    end = head.find("\n---", 3)
    try:
        parsed = yaml.safe_load(head[3:end]) if end > 0 else None
    except yaml.YAMLError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _requirement(project: dict[str, Any], warnings: list[dict[str, str]]) -> str | None:
    found = []
    dependencies = project.get("dependencies")
    for dependency in dependencies if isinstance(dependencies, list) else []:
        try:
            if isinstance(dependency, str) and canonicalize_name(Requirement(dependency).name) == "openenv":
                found.append(dependency)
        except InvalidRequirement:
            continue
    if len(found) > 1:
        _warn(warnings, "pyproject.toml", "declares openenv more than once; no framework requirement shown")
        return None
    return found[0] if found else None
