"""The public surface: what `import openenv` offers, and what a client-only install costs."""

from __future__ import annotations

import subprocess
import sys

import pytest

import openenv
from tests.support.servers import ROOT


def test_all_is_sorted_and_every_name_imports() -> None:
    assert openenv.__all__ == sorted(openenv.__all__)
    for name in openenv.__all__:
        assert getattr(openenv, name) is not None, name
    assert {
        "Action",
        "Observation",
        "State",
        "StepResult",
        "Environment",
        "create_app",
        "EnvClient",
        "SyncEnvClient",
        "GenericEnvClient",
    } <= set(openenv.__all__)


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = openenv.Nope  # type: ignore[attr-defined]


def test_importing_the_client_does_not_import_the_server_stack() -> None:
    code = "import sys, openenv; openenv.EnvClient; openenv.GenericEnvClient; openenv.Action; print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_client_only_install_drives_a_server(tmp_path, echo_url: str) -> None:
    """`pip install openenv-hub` (no extras) is enough to drive any server, and stays light."""
    venv = tmp_path / "client-venv"
    uv = str(ROOT / ".venv" / "bin" / "uv")
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([uv, "pip", "install", "-q", "--python", py, str(ROOT)], check=True, timeout=600)
    listed = subprocess.run(
        [uv, "pip", "list", "--python", py], capture_output=True, text=True, check=True
    ).stdout.lower()
    for heavy in ("fastapi", "uvicorn", "starlette", "huggingface-hub", "docker", "gradio", "torch"):
        assert f"\n{heavy} " not in listed, f"{heavy} is in the client's base install"
    script = (
        "import asyncio, sys\n"
        "from openenv import GenericEnvClient\n"
        "async def main():\n"
        "    async with GenericEnvClient(sys.argv[1]) as env:\n"
        "        await env.reset()\n"
        "        print((await env.step({'message': 'light'})).observation['echoed_message'])\n"
        "asyncio.run(main())\n"
        "try:\n"
        "    import openenv; openenv.create_app\n"
        "except ModuleNotFoundError as e:\n"
        "    print('hint:', e)\n"
    )
    out = subprocess.run([py, "-c", script, echo_url], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "light"
    assert "pip install 'openenv-hub[server]'" in lines[1]
