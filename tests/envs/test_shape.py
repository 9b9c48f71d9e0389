"""Every reference env is shaped like a Space (like envs/echo_env), and its README's example runs."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import io
import re

import pytest
import yaml

import openenv
from openenv import EnvClient
from tests.envs.conftest import serve_env
from tests.envs.images import ENV_NAMES
from tests.support.servers import ROOT


def front_matter(readme: str) -> dict:
    match = re.match(r"^---\n(.*?)\n---\n", readme, re.S)
    assert match, "README.md must start with Hugging Face front matter"
    return yaml.safe_load(match.group(1))


@pytest.mark.parametrize("name", ENV_NAMES)
def test_env_folder_is_shaped_like_a_space(name: str) -> None:
    folder = ROOT / "envs" / name
    manifest = yaml.safe_load((folder / "openenv.yaml").read_text())
    assert manifest["name"] == name and manifest["app"] == "server.app:app" and manifest["port"] == 8000
    assert manifest["spec_version"] == 1 and manifest["type"] == "space" and manifest["runtime"] == "fastapi"
    meta = front_matter((folder / "README.md").read_text())
    assert meta["sdk"] == "docker" and meta["app_port"] == 8000 and "openenv" in meta["tags"]
    dockerfile = (folder / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim" in dockerfile
    assert f'ARG OPENENV_SDK="openenv-hub[server]=={openenv.__version__}"' in dockerfile
    assert "server/requirements.txt" in dockerfile and (folder / "server" / "requirements.txt").is_file()
    package = importlib.import_module(name)
    clients = [
        getattr(package, n)
        for n in package.__all__
        if isinstance(getattr(package, n), type) and issubclass(getattr(package, n), EnvClient)
    ]
    assert len(clients) == 1 and clients[0]._action_cls is not None and clients[0]._observation_cls is not None


def test_env_requirements_are_in_the_envs_extra() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    extra = pyproject[pyproject.index("envs = [") :]
    extra = extra[: extra.index("]")]
    for name in ENV_NAMES:
        for line in (ROOT / "envs" / name / "server" / "requirements.txt").read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                package = re.split(r"[<>=!~\[ ]", line.strip())[0]
                assert f'"{package}' in extra, f"{package} ({name}) is missing from the envs extra"


@pytest.mark.parametrize("name", ENV_NAMES)
async def test_readme_example_runs(name: str) -> None:
    readme = (ROOT / "envs" / name / "README.md").read_text()
    code = re.search(r"## Use it\n\n```python\n(.*?)```", readme, re.S)
    assert code, "README.md needs a python example under '## Use it'"
    with serve_env(name) as url:
        source = code.group(1).replace("http://127.0.0.1:8000", url)
        out = io.StringIO()

        def run() -> None:
            with contextlib.redirect_stdout(out):
                exec(compile(source, f"{name}/README.md", "exec"), {"__name__": "__readme__"})

        await asyncio.to_thread(run)
    printed = " ".join(out.getvalue().split())
    for comment in re.findall(r"^\s*print\(.*\)\s+#\s+(.+)$", source, re.M):  # `print(...)   # what it prints`
        assert " ".join(comment.split()) in printed, f"README says {comment!r}; the example printed {printed!r}"
