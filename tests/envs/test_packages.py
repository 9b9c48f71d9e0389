"""Every env folder is also a Python package: pip installs its typed client from the folder, from
the Space's git URL or from a wheel, into a fresh venv, without the server's dependencies; the
`server` extra adds them. Real pip, no index (a local wheelhouse), real servers on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from openenv.cli.init import render
from tests.envs.images import ENV_NAMES
from tests.support.hf_hub import HubStandIn
from tests.support.pip_venv import Venv
from tests.support.servers import ROOT, ProcessServer

pytestmark = pytest.mark.slow

ECHO = ROOT / "envs" / "echo_env"
# What only a server needs: none of it may come with a client install.
SERVER_ONLY = {
    "fastapi",
    "uvicorn",
    "starlette",
    "uvloop",
    "httptools",
    "pyyaml",
    "chess",
    "ale-py",
    "numpy",
    "huggingface-hub",
}

# Drives a server with the installed typed client, async and with .sync(); prints what it saw.
DRIVE_ECHO = textwrap.dedent("""
    import asyncio, json, sys
    import echo_env
    from echo_env import EchoAction, EchoEnv, EchoObservation, EchoState
    from openenv import EnvClient

    url = sys.argv[1]

    async def main():
        async with EchoEnv(url) as env:
            await env.reset()
            result = await env.step(EchoAction(message="hello"))
            state = await env.state()
        return result, state

    result, state = asyncio.run(main())
    with EchoEnv(url).sync() as env:
        env.reset()
        sync_result = env.step(EchoAction(message="hi"))
    print(json.dumps({
        "file": echo_env.__file__,
        "typed": [EchoEnv._action_cls is EchoAction, EchoEnv._observation_cls is EchoObservation, EchoEnv._state_cls is EchoState],
        "is_client": issubclass(EchoEnv, EnvClient),
        "inherited": [callable(getattr(EchoEnv, m)) for m in ("from_hub", "from_docker_image", "from_process")],
        "obs_type": type(result.observation).__name__, "echoed": result.observation.echoed_message, "reward": result.reward,
        "state": [type(state).__name__, state.step_count, state.total_length],
        "sync": [sync_result.observation.echoed_message, sync_result.observation.message_length],
    }))
""")


def _drive_echo(venv: Venv, url: str) -> dict:
    out = venv.run(DRIVE_ECHO, url)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert str(venv.path) in seen["file"], f"echo_env imported from {seen['file']}, not the venv"
    assert seen["typed"] == [True, True, True] and seen["is_client"] and seen["inherited"] == [True, True, True]
    assert seen["obs_type"] == "EchoObservation" and seen["echoed"] == "hello" and seen["reward"] == pytest.approx(0.5)
    assert seen["state"] == ["EchoState", 1, 5]
    assert seen["sync"] == ["hi", 2]
    return seen


def _assert_client_only(venv: Venv, *packages: str) -> dict[str, str]:
    installed = venv.installed()
    for package in packages:
        assert package.replace("_", "-") in installed, sorted(installed)
    assert {"openenv-hub", "pydantic", "orjson", "picows"} <= set(installed)
    leaked = SERVER_ONLY & set(installed)
    assert not leaked, f"a client install pulled in server dependencies: {sorted(leaked)}"
    return installed


def test_echo_env_installs_from_its_folder_and_its_server_extra_serves(tmp_path: Path, echo_url: str) -> None:
    env = Venv(tmp_path / "venv")
    env.pip("install", str(ECHO))
    _assert_client_only(env, "echo_env")
    _drive_echo(env, echo_url)
    assert not list(ECHO.glob("build")) and not list(ECHO.glob("*.egg-info")), "pip left build files in the env folder"

    # Without the extra, the server says which extra it needs.
    no_server = env.run("import echo_env.server.app")
    assert no_server.returncode != 0 and "'server' extra" in no_server.stderr, no_server.stderr[-2000:]

    env.pip("install", f"{ECHO}[server]")
    assert {"fastapi", "uvicorn"} <= set(env.installed())
    server = ProcessServer([env.python, "-m", "openenv.server", "echo_env.server.app:app"], cwd=tmp_path, env=env.env)
    try:
        server.wait(timeout=60)
        seen = _drive_echo(env, server.url)
        assert seen["echoed"] == "hello"
    finally:
        server.stop()


def test_echo_env_installs_from_the_git_url_of_its_space(tmp_path: Path, hf_hub: HubStandIn, echo_url: str) -> None:
    files = {
        str(p.relative_to(ECHO)): p.read_bytes()
        for p in ECHO.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    hf_hub.create_space("alice/echo_env", files=files)
    env = Venv(tmp_path / "venv")
    env.pip("install", f"git+{hf_hub.url}/spaces/alice/echo_env")
    installed = _assert_client_only(env, "echo_env")
    assert installed["echo-env"] == "0.1.0"
    _drive_echo(env, echo_url)


def test_every_env_and_a_new_one_build_wheels_whose_clients_install_without_the_server(tmp_path: Path) -> None:
    render(tmp_path / "fresh_env", "fresh_env")  # what `openenv init` makes has the same shape
    folders = {**{name: ROOT / "envs" / name for name in ENV_NAMES}, "fresh_env": tmp_path / "fresh_env"}
    names = sorted(folders)
    wheels = tmp_path / "wheels"
    env = Venv(tmp_path / "venv")
    env.pip("wheel", "--no-deps", "--wheel-dir", str(wheels), *(str(folder) for folder in folders.values()))
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert [w.split("-")[0] for w in built] == names, built
    env.pip("install", *(str(w) for w in wheels.glob("*.whl")))
    _assert_client_only(env, *names)
    check = textwrap.dedent("""
        import importlib, json, sys
        from importlib.metadata import requires
        from openenv import Action, EnvClient, Observation, State
        out = {}
        for name in sys.argv[1:]:
            package = importlib.import_module(name)
            [client] = [getattr(package, n) for n in package.__all__
                        if isinstance(getattr(package, n), type) and issubclass(getattr(package, n), EnvClient)]
            models = [client._action_cls, client._observation_cls, client._state_cls]
            out[name] = {
                "client": client.__name__,
                "models": [issubclass(m, base) for m, base in zip(models, (Action, Observation, State))],
                "exported": all(getattr(package, m.__name__, None) is m for m in models),
                "typed": (package.__path__[0] + "/py.typed"),
                "requires": requires(name),
            }
        print(json.dumps(out))
    """)
    script = wheels / "check.py"  # not beside fresh_env/: the installed package must be what imports
    script.write_text(check)
    proc = subprocess.run(
        [env.python, str(script), *names],
        capture_output=True,
        text=True,
        cwd=tmp_path / "wheels",
        env=env.env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    for name in names:
        assert seen[name]["models"] == [True, True, True] and seen[name]["exported"], (name, seen[name])
        assert Path(seen[name]["typed"]).is_file(), f"{name} ships no py.typed marker"
        assert seen[name]["typed"].startswith(str(env.path)), (
            f"{name} was imported from {seen[name]['typed']}, not the venv"
        )
        requires = [Requirement(r) for r in seen[name]["requires"]]
        base = {_key(r) for r in requires if r.marker is None}
        server = {_key(r) for r in requires if r.marker is not None and r.marker.evaluate({"extra": "server"})}
        assert base == {("openenv-hub", frozenset(), ">=0.1.0")}, base
        assert ("openenv-hub", frozenset({"server"}), ">=0.1.0") in server, server
        listed = (folders[name] / "server" / "requirements.txt").read_text().splitlines()
        for line in filter(None, (r.split("#")[0].strip() for r in listed)):
            assert _key(Requirement(line)) in server, (
                f"{name}: server/requirements.txt has {line}, the server extra does not"
            )


def _key(req: Requirement) -> tuple[str, frozenset[str], str]:
    return req.name.lower().replace("_", "-"), frozenset(req.extras), str(req.specifier)
