"""The files of an imported Gymnasium env's folder other than models.py (`_gym_models.py`): manifest,
README that says where the env came from, Dockerfile, package metadata, client and server."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from openenv.cli._gym_models import models_source, space_text
from openenv.cli._gym_plans import PLAN_SEED, plan_files
from openenv.cli._gym_source import FLOOR_MARGIN, GymSource

__all__ = ["folder_files", "write_folder"]

# The head of an imported env's openenv.yaml, whatever it was imported from (`kind`); each writer adds
# its own validation block under it.
MANIFEST_HEAD = """spec_version: 1
name: {name}
type: space
runtime: fastapi
app: server.app:app
port: 8000
version: 0.1.0
description: {description}
tags: [openenv, {kind}]
{provenance}validation:
"""
_MANIFEST = (
    MANIFEST_HEAD
    + """  # The range of one step's reward that a few random episodes showed when this folder was written:
  # widen it if the env pays more. {plans_note}
  reward: {{range: [{low}, {high}], oracle_tolerance: 0.0, floor_margin: {margin}}}
  resources: {{cpu: 1.0, memory_mb: 1024, disk_mb: 512, episode_timeout_s: 600.0}}
  network: {{mode: no-network}}
{execution}  capabilities:
    verifier: {{kind: reward_channel}}
{capabilities}  types: {{tags: [{kind}]}}
"""
)
_NO_PLANS = (
    "No oracle: the search found no plan that earns the top reward;\n"
    "  # add validation/oracle.json (and canaries) for the semantic level (docs/validate.md)."
)
_PLANS = "The oracle and canaries in validation/ were found by\n  # playing the env (openenv import), from seed {seed}."

_README = """---
title: {title}
emoji: 🤸
colorFrom: indigo
colorTo: gray
sdk: docker
app_port: 8000
base_path: /web
pinned: false
tags:
  - openenv
  - gymnasium
---

# {name}

`{env_id}` from [Gymnasium](https://gymnasium.farama.org) {version}, served as an OpenEnv
environment. Imported by `openenv import {env_id}` (openenv-hub {sdk_version}) from the registered
id `{env_id}` (entry point `{entry_point}`); the server makes one Gymnasium env per session
with `gymnasium.make` and maps its spaces to JSON (`openenv.interop.gymnasium`).

| | fields |
|---|---|
| action `{prefix}Action` | `action`: `{action_space}` |
| observation `{prefix}Observation` | `observation`: `{observation_space}`{image_note}; `truncated`; `info` (Gymnasium's info dict) |
| reward, done | Gymnasium's reward; done when the episode terminated or was truncated{time_limit} |
| state `{prefix}State` | `episode_id`, `step_count`, `env_id`, `seed`, `total_reward` |
| reset options | `seed`; any other option goes to Gymnasium's `reset(options=...)` |
| picture (`render()`) | {picture} |

The server installs `{requirements}` (`server/requirements.txt`). {plans}

## Use it

```python
from {name} import {prefix}Action, {prefix}Env

with {prefix}Env("http://127.0.0.1:8000").sync() as env:
    result = env.reset(seed=0)
    result = env.step({prefix}Action(action={example_action}))
    print(result.observation.observation, result.reward, result.done)
```

`openenv serve .` runs it here; `openenv build .` builds its image. The folder is also a Python
package: `pip install .` gives the typed client (`pip install ".[server]"` adds the server's needs).
"""

_DOCKERFILE = """# {name} as a Docker Space: {description}
# BASE_IMAGE: any image with Python >= 3.11 and pip. OPENENV_SDK: what pip installs for the runtime
# (the published package by default; `openenv build` inside an SDK checkout passes a local wheel).
ARG BASE_IMAGE=python:3.11-slim
FROM ${{BASE_IMAGE}}
LABEL org.opencontainers.image.title="{name}" \\
      org.opencontainers.image.description="{description}" \\
      org.opencontainers.image.version="0.1.0"

ARG OPENENV_SDK="openenv-hub[server]=={sdk_version}"
WORKDIR /app/env
COPY . /app/env
# Set, SOURCE_DATE_EPOCH makes Python write hash-checked .pyc files: the same bytes on every build.
ARG SOURCE_DATE_EPOCH=0
RUN pip install --no-cache-dir "${{OPENENV_SDK}}" -r server/requirements.txt
ENV PORT=8000 \\
    HOST=0.0.0.0 \\
    PYTHONUNBUFFERED=1 \\
    OPENENV_ENABLE_WEB_INTERFACE=true
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2).status != 200)"
CMD ["python", "-m", "openenv.server", "server.app:app"]
"""

_PYPROJECT = """# {name} as a Python package: `pip install .` gives the typed client and models; the `server`
# extra adds what serving it needs (also in server/requirements.txt, which the image installs).
[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "0.1.0"
description = {description_toml}
requires-python = ">=3.11"
dependencies = ["openenv-hub>={sdk_version}"]

[project.optional-dependencies]
server = {server_extra}

[tool.hatch.build.targets.wheel]
include = ["/*.py", "/py.typed", "/server"]
exclude = ["__pycache__", "*.pyc"]

[tool.hatch.build.targets.wheel.sources]
"" = "{name}"
"""

_INIT = '''"""{name}: {description}"""

from .client import {prefix}Env
from .models import {prefix}Action, {prefix}Observation, {prefix}State

__all__ = ["{prefix}Action", "{prefix}Env", "{prefix}Observation", "{prefix}State"]
'''

_CLIENT = '''"""The typed client of {name}."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import {prefix}Action, {prefix}Observation, {prefix}State
except ImportError:  # used from the env's folder, not as a package
    from models import {prefix}Action, {prefix}Observation, {prefix}State  # type: ignore[no-redef]


class {prefix}Env(EnvClient[{prefix}Action, {prefix}Observation, {prefix}State]):
    """A session of the {name} server ({env_id} from Gymnasium)."""
'''

_ENVIRONMENT = '''"""{env_id} from Gymnasium {version} ({entry_point}), one Gymnasium env per session."""

from __future__ import annotations

from openenv.interop.gymnasium import GymnasiumEnvironment

try:
    from ..models import {prefix}Action, {prefix}Observation, {prefix}State
except ImportError:  # run from the env's folder
    from models import {prefix}Action, {prefix}Observation, {prefix}State  # type: ignore[no-redef]


class {prefix}Environment(GymnasiumEnvironment[{prefix}Action, {prefix}Observation, {prefix}State]):
    """{env_id}: its spaces mapped by openenv.interop.gymnasium."""

    GYMNASIUM_ID = {env_id!r}
    RENDER = {render}
    ACTION = {prefix}Action
    OBSERVATION = {prefix}Observation
    STATE = {prefix}State
'''

_APP = '''"""The ASGI app: `openenv serve .`, or `python -m openenv.server server.app:app` in this folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import {prefix}Action, {prefix}Observation
    from .environment import {prefix}Environment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import {prefix}Action, {prefix}Observation  # type: ignore[no-redef]
    from server.environment import {prefix}Environment  # type: ignore[no-redef]

app = create_app({prefix}Environment, {prefix}Action, {prefix}Observation, env_name="{name}")


def main() -> None:
    """Serve on 0.0.0.0:8000 (or $HOST:$PORT)."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
'''

_IGNORES = ".git\n.venv\n__pycache__\n*.pyc\n.pytest_cache\n"
# The oracle and canaries are for validators, never for the agent: RFC 008's runtime.oracle_containment.
_DOCKER_IGNORES = _IGNORES + "validation/\n"


def folder_files(name: str, prefix: str, source: GymSource, sdk_version: str) -> dict[str, str]:
    """Every file but models.py, by path relative to the folder."""
    from openenv.interop.gymnasium import is_image, to_json
    from openenv.interop.provenance import Provenance

    description = f"{source.env_id} from Gymnasium {source.version}, imported by openenv import."
    values = {
        "name": name,
        "prefix": prefix,
        "env_id": source.env_id,
        "version": source.version,
        "entry_point": source.entry_point,
        "sdk_version": sdk_version,
        "description": description,
    }
    low, high = source.reward_range
    requirements = "\n".join(source.requirements)
    limit = source.max_episode_steps
    example = repr(to_json(source.action_space, source.sample_action, pictures=False))  # for the README
    return {
        "openenv.yaml": _MANIFEST.format(
            **{**values, "description": json.dumps(description)},
            low=low,
            high=high,
            margin=FLOOR_MARGIN,
            plans_note=_PLANS.format(seed=PLAN_SEED) if source.oracle else _NO_PLANS,
            execution="  execution: {probe_path: validation/oracle.json}\n" if source.oracle else "",
            capabilities=_capabilities(source),
            provenance=Provenance("gymnasium", source.env_id, source.version).manifest_line(),
            kind="gymnasium",
        ),
        "README.md": _README.format(
            **values,
            title=json.dumps(source.env_id),
            action_space=space_text(source.action_space),
            observation_space=space_text(source.observation_space),
            image_note=" as a base64 PNG" if is_image(source.observation_space) else "",
            time_limit=f" (after {limit} steps)" if limit else "",
            picture="the env's `rgb_array` frame, as PNG" if source.render else "none (the env renders no `rgb_array`)",
            requirements=", ".join(source.requirements),
            plans=(
                f"`validation/` holds an oracle ({len(source.oracle)} actions from seed {PLAN_SEED}, found by "
                f"searching the env's episodes) and {len(source.canaries)} canaries for RFC 008's semantic level."
                if source.oracle
                else "No oracle was found (`openenv.yaml` says what to add for the semantic level)."
            ),
            example_action=example if len(example) <= 60 else "...",
        ),
        "Dockerfile": _DOCKERFILE.format(**values),
        ".dockerignore": _DOCKER_IGNORES,
        ".gitignore": _IGNORES.replace(".git\n", ""),
        "pyproject.toml": _PYPROJECT.format(
            **values,
            description_toml=json.dumps(description),
            server_extra=json.dumps([f"openenv-hub[server]>={sdk_version}", *source.requirements]),
        ),
        "__init__.py": _INIT.format(**values),
        "client.py": _CLIENT.format(**values),
        "py.typed": "",
        "server/__init__.py": "",
        "server/app.py": _APP.format(**values),
        "server/environment.py": _ENVIRONMENT.format(**values, render=source.render),
        "server/requirements.txt": f"# What the server needs beyond the OpenEnv SDK (written by `openenv import`).\n{requirements}\n",
    }


def _capabilities(source: GymSource) -> str:
    if not source.oracle:
        return ""
    lines = "    oracle: {form: script, location: validation/oracle.json}\n"
    return lines + ("    canaries: validation/canaries.json\n" if source.canaries else "")


def write_folder(folder: Path, name: str, source: GymSource) -> list[str]:
    """Write the env folder for `source` into `folder` (empty) as the env `name`, then check that its
    models take the env's first observation and a sampled action. Returns the files written.

    Raises:
        RuntimeError: the written models refuse what the env gave (a bug of this command).
    """
    from openenv import __version__
    from openenv.cli.init import class_prefix

    prefix = class_prefix(name)
    models = models_source(
        prefix,
        source.env_id,
        source.version,
        source.observation_space,
        source.action_space,
        source.action_meanings,
    )
    files = {"models.py": models, **folder_files(name, prefix, source, __version__)}
    if source.oracle:
        files |= plan_files(source.oracle, source.canaries)
    for rel, text in sorted(files.items()):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    _check_models(folder / "models.py", prefix, source)
    return sorted(files)


def _check_models(path: Path, prefix: str, source: GymSource) -> None:
    from openenv.interop.gymnasium import jsonable, to_json

    module_name = f"_openenv_import_check_{id(path)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # pydantic resolves the annotations through it
    try:
        spec.loader.exec_module(module)
        getattr(module, f"{prefix}Observation")(
            observation=to_json(source.observation_space, source.first_observation), info=jsonable(source.first_info)
        )
        getattr(module, f"{prefix}Action")(action=to_json(source.action_space, source.sample_action, pictures=False))
    except Exception as exc:
        raise RuntimeError(f"the models written for {source.env_id} refuse what the env gave: {exc}") from exc
    finally:
        del sys.modules[module_name]
