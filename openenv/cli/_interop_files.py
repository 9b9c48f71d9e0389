"""The folder `openenv import --type verifiers|ors` writes: the source copied into `source/`, a server
that serves it through `openenv.interop.verifiers` or `openenv.interop.ors`, models, client, manifest
(with where it came from), README, Dockerfile and package metadata. Nothing of the source is run."""

from __future__ import annotations

import ast
import json
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from openenv.cli._detect import SKIPPED_DIRS, Candidate
from openenv.cli._gym_files import _APP, _DOCKERFILE, _IGNORES, _INIT, _PYPROJECT, MANIFEST_HEAD
from openenv.cli._output import CliError

__all__ = ["LIBRARIES", "SourceInfo", "source_info", "write_folder"]

# What the server installs for each kind, besides the source's own dependencies.
# Pinned to the versions this project's tests serve them with (scripts/interop-venv).
LIBRARIES = {"verifiers": "verifiers==0.1.14", "ors": "openreward==0.1.167"}
_LABELS = {"verifiers": "Verifiers", "ors": "ORS"}
# Where a source keeps its answer plans for OpenEnv's validation (moved to the folder's validation/).
_PLANS_DIR = "openenv"
# Names the env folder itself uses at the top level of `sys.path` when served from it.
_TAKEN = frozenset({"models", "client", "server", "source"})


@dataclass(frozen=True)
class SourceInfo:
    """What the source's `pyproject.toml` says of it (each None when it says nothing)."""

    project: str | None
    version: str | None
    dependencies: list[str]


def source_info(source: Path) -> SourceInfo:
    """Read the source folder's `pyproject.toml` (a .py file's folder's, when it has one)."""
    folder = source if source.is_dir() else source.parent
    path = folder / "pyproject.toml"
    if not path.is_file():
        return SourceInfo(None, None, [])
    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CliError(f"{path} is not valid TOML: {exc}", "fix it, or import the .py file alone", 2) from None
    deps = project.get("dependencies", [])
    version = project.get("version")
    return SourceInfo(
        project.get("name") if isinstance(project.get("name"), str) else None,
        str(version) if isinstance(version, (str, int, float)) else None,
        [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else [],
    )


def requirements(kind: str, info: SourceInfo) -> list[str]:
    """The server's requirements: the source's dependencies, and its library when they lack it."""
    library = LIBRARIES[kind]
    base = _req_name(library)
    named = {_req_name(d) for d in info.dependencies}
    return [*info.dependencies, *([] if base in named else [library])]


def _req_name(requirement: str) -> str:
    name = requirement.strip()
    for stop in "<>=!~[; (":
        name = name.split(stop)[0]
    return name.lower().replace("_", "-")


def write_folder(folder: Path, name: str, source: Path, found: Candidate, info: SourceInfo) -> list[str]:
    """Write the env folder for the environment `found` of `source` into `folder` (empty). Returns the
    files written (the copied source as `source/...`).

    Raises:
        CliError: a top-level module of the source would shadow one of the env folder's (exit 2).
    """
    from openenv import __version__
    from openenv.cli.init import class_prefix
    from openenv.interop.provenance import Provenance

    root = source if source.is_dir() else source.parent
    module = found.module
    if not module:  # the folder is itself the package (its __init__.py holds the env): keep its name
        module = root.name
        copied = [f"{module}/{p}" for p in _copy_source(source, folder / "source" / module)]
    else:
        copied = _copy_source(source, folder / "source")
    top = {p.split("/")[0].removesuffix(".py") for p in copied}
    if clash := sorted(top & _TAKEN):
        shutil.rmtree(folder / "source")
        raise CliError(
            f"the source's top-level module(s) {', '.join(clash)} would shadow the env folder's own",
            "rename them in the source (or move the environment into a package)",
            2,
        )
    plans = _source_plans(root)
    kind, label = found.kind, _LABELS[found.kind]
    prefix = class_prefix(name)
    reqs = requirements(kind, info)
    source_name = info.project or (found.qualified_name if kind == "ors" else found.module or root.name)
    provenance = Provenance(kind, source_name, info.version)
    described = (
        f"{source_name}{' ' + info.version if info.version else ''}, a {label} environment imported by openenv import."
    )
    values = {
        "name": name,
        "prefix": prefix,
        "sdk_version": __version__,
        "description": described,
        "label": label,
        "kind": kind,
        "module": module,
        "entry": found.name,
        "qualified": found.qualified_name,
        "source_name": source_name,
        "version": info.version or "unversioned",
        "requirements": ", ".join(reqs),
    }
    files = {
        "openenv.yaml": _MANIFEST.format(
            **{**values, "description": json.dumps(described)},
            provenance=provenance.manifest_line(),
            reward_note=_REWARD_NOTES[kind],
            declared_tools=_declared_tools(found) if kind == "verifiers" else "",
            execution="  execution: {probe_path: validation/oracle.json}\n" if plans else "",
            plans="".join(
                {
                    "validation/oracle.json": "    oracle: {form: script, location: validation/oracle.json}\n",
                    "validation/canaries.json": "    canaries: validation/canaries.json\n",
                }[p]
                for p in plans
            ),
        ),
        "README.md": (_VF_README if kind == "verifiers" else _ORS_README).format(
            **values, title=json.dumps(source_name), common=_README_USE.format(**values)
        ),
        "Dockerfile": _DOCKERFILE.format(**values),
        ".dockerignore": _IGNORES + "validation/\n",
        ".gitignore": _IGNORES.replace(".git\n", ""),
        "pyproject.toml": _PYPROJECT.format(
            **values,
            description_toml=json.dumps(described),
            server_extra=json.dumps([f"openenv-hub[server]>={__version__}", *reqs]),
        ).replace(
            'include = ["/*.py", "/py.typed", "/server"]', 'include = ["/*.py", "/py.typed", "/server", "/source"]'
        ),
        "__init__.py": _INIT.format(**values),
        "client.py": _CLIENT.format(**values),
        "models.py": (_VF_MODELS if kind == "verifiers" else _ORS_MODELS).format(**values),
        "py.typed": "",
        "server/__init__.py": "",
        "server/app.py": _APP.format(**values),
        "server/environment.py": (_VF_ENVIRONMENT if kind == "verifiers" else _ORS_ENVIRONMENT).format(**values),
        "server/requirements.txt": "# What the server needs beyond the OpenEnv SDK (written by `openenv import`).\n"
        + "".join(f"{r}\n" for r in reqs),
    }
    files |= plans
    for rel, text in sorted(files.items()):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return sorted([*files, *(f"source/{p}" for p in copied)])


def _source_plans(root: Path) -> dict[str, str]:
    """The answer plans a source carries for OpenEnv (`openenv/oracle.json`, `openenv/canaries.json`:
    RFC 008 runtime plans, as docs/validate.md describes), as the folder's `validation/` files. They
    stay out of `source/` (and so out of the image: runtime.oracle_containment)."""
    plans = {}
    for name in ("oracle.json", "canaries.json"):
        path = root / _PLANS_DIR / name
        if path.is_file():
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise CliError(f"{path} is not JSON: {exc}", "fix it, or remove it", 2) from None
            plans[f"validation/{name}"] = path.read_text(encoding="utf-8")
    if plans and "validation/oracle.json" not in plans:
        raise CliError(f"{root / _PLANS_DIR} has canaries but no oracle.json", "add the oracle's plan", 2)
    return plans


def _declared_tools(found: Candidate) -> str:
    """The manifest's `declared_tools` line for a Verifiers env whose `load_environment` passes
    `tools=[f, g]` (names, read from the source); empty when it passes none or they cannot be read."""
    tree = ast.parse(found.path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == found.name:
            for call in ast.walk(node):
                for kw in call.keywords if isinstance(call, ast.Call) else []:
                    if kw.arg == "tools" and isinstance(kw.value, (ast.List, ast.Tuple)):
                        for item in kw.value.elts:
                            if isinstance(item, ast.Name):
                                names.append(item.id)
                            elif isinstance(item, ast.Attribute):
                                names.append(item.attr)
                            else:  # made at run time: nothing to read
                                return ""
    return f"    declared_tools: [{', '.join(names)}]\n" if names else ""


def _copy_source(source: Path, dest: Path) -> list[str]:
    """Copy the source (a folder's files but caches, VCS and virtual environments; or one .py file)."""
    dest.mkdir(parents=True, exist_ok=True)
    if source.is_file():
        shutil.copy2(source, dest / source.name)
        return [source.name]
    copied = []
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        skipped = SKIPPED_DIRS.intersection(rel.parts[:-1]) or rel.parts[0] == _PLANS_DIR
        if not path.is_file() or skipped or path.suffix in (".pyc", ".pyo"):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / rel)
        copied.append(rel.as_posix())
    return copied


_MANIFEST = (
    MANIFEST_HEAD
    + """  # {reward_note}
  reward: {{range: [0.0, 1.0], oracle_tolerance: 0.0, floor_margin: 0.5}}
  resources: {{cpu: 1.0, memory_mb: 2048, disk_mb: 2048, episode_timeout_s: 600.0}}
  network: {{mode: no-network}}
{execution}  capabilities:
    verifier: {{kind: reward_channel}}
{plans}{declared_tools}  types: {{tags: [{kind}]}}
"""
)
_REWARD_NOTES = {
    "verifiers": "The reward is the rubric's weighted sum: widen the range if its weights add up to more than 1.",
    "ors": "The reward is what each tool call returns: widen the range if the environment pays more than 1.",
}

_README_HEAD = """---
title: {title}
emoji: 🧩
colorFrom: indigo
colorTo: gray
sdk: docker
app_port: 8000
base_path: /web
pinned: false
tags:
  - openenv
  - {kind}
---

# {name}

"""

_VF_README = (
    _README_HEAD
    + """`{source_name}` {version}, a [Verifiers](https://github.com/PrimeIntellect-ai/verifiers) environment,
served as an OpenEnv environment. Imported by `openenv import --type verifiers` (openenv-hub
{sdk_version}) from `{qualified}`; its source is copied, unchanged, into `source/`. The server calls
`load_environment()` once and serves it through `openenv.interop.verifiers`:

| | |
|---|---|
| tasks (Task API) | the rows of its `dataset` (split `train`) and `eval_dataset` (split `eval`); `reset(split=..., index=...)` plays one |
| reset observation `{prefix}Observation` | `prompt` (the row's chat messages), `info` |
| action `{prefix}Action` | `completion`: the final answer; one step per episode |
| reward | the rubric's (`score_rollout`), each reward function's score in `metrics` |
| tools | a `ToolEnv`'s tools, as MCP tools of the same names; their calls count in the scored completion |

The server installs {requirements} (`server/requirements.txt`).
{common}"""
)

_ORS_README = (
    _README_HEAD
    + """`{source_name}` {version}, an Open Reward Standard (ORS) environment,
served as an OpenEnv environment. Imported by `openenv import --type ors` (openenv-hub {sdk_version})
from the class `{qualified}`; its source is copied, unchanged, into `source/`. The server serves it
through `openenv.interop.ors`:

| | |
|---|---|
| tasks (Task API) | the class's `list_splits` and `list_tasks`; `reset(split=..., index=...)` starts a session on one |
| reset observation `{prefix}Observation` | `blocks` (the task's prompt), `tools` (name, description, input schema) |
| action `{prefix}Action` | `tool`, `arguments`: one tool call |
| reward, done | the reward the tool call returns; done when it says `finished`; a refused call's reason in `error` |

The server installs {requirements} (`server/requirements.txt`).
{common}"""
)

_README_USE = """
## Use it

`openenv serve .` runs it here; `openenv build .` builds its image. The folder is also a Python
package: `pip install .` gives the typed client `{prefix}Env` (`pip install ".[server]"` adds the
server's needs).
"""

_CLIENT = '''"""The typed client of {name}."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import {prefix}Action, {prefix}Observation, {prefix}State
except ImportError:  # used from the env's folder, not as a package
    from models import {prefix}Action, {prefix}Observation, {prefix}State  # type: ignore[no-redef]


class {prefix}Env(EnvClient[{prefix}Action, {prefix}Observation, {prefix}State]):
    """A session of the {name} server ({source_name} from {label})."""
'''

_VF_MODELS = '''"""The wire types of {name}: those of openenv.interop.verifiers, named for this env."""

from __future__ import annotations

from openenv.interop.verifiers import VerifiersAction, VerifiersObservation, VerifiersState


class {prefix}Action(VerifiersAction):
    """The final answer to the task's prompt."""


class {prefix}Observation(VerifiersObservation):
    """The task's prompt (on reset) or the rubric's score (on step)."""


class {prefix}State(VerifiersState):
    """Which task is played."""
'''

_ORS_MODELS = '''"""The wire types of {name}: those of openenv.interop.ors, named for this env."""

from __future__ import annotations

from openenv.interop.ors import ORSAction, ORSObservation, ORSState


class {prefix}Action(ORSAction):
    """One tool call."""


class {prefix}Observation(ORSObservation):
    """The task's prompt and tools (on reset), or a tool call's output (on step)."""


class {prefix}State(ORSState):
    """Which task is played and what its tool calls earned."""
'''

_VF_ENVIRONMENT = '''"""{source_name} {version} ({label}): `{qualified}` of the source in ../source."""

from __future__ import annotations

from pathlib import Path

from openenv.interop._sources import load_entry
from openenv.interop.verifiers import VerifiersEnvironment


class {prefix}Environment(VerifiersEnvironment):
    """{source_name}, loaded by its load_environment()."""

    LOAD_ENVIRONMENT = staticmethod(load_entry(Path(__file__).resolve().parents[1] / "source", {module!r}, {entry!r}))


{prefix}Environment.add_source_tools()
'''

_ORS_ENVIRONMENT = '''"""{source_name} {version} ({label}): the class `{qualified}` of the source in ../source."""

from __future__ import annotations

from pathlib import Path

from openenv.interop._sources import load_entry
from openenv.interop.ors import ORSEnvironment


class {prefix}Environment(ORSEnvironment):
    """{source_name}, one ORS session per episode."""

    ORS_CLASS = load_entry(Path(__file__).resolve().parents[1] / "source", {module!r}, {entry!r})
'''
