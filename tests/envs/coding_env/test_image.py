"""coding_env in its Docker image: the sandbox holds inside the container too, both when the
server runs as root (the default) and as an unprivileged user, as on a Hugging Face Space."""

from __future__ import annotations

import asyncio
import time

import pytest
from coding_env import CodeAction, CodingEnv

from tests.envs.soak import health

SECRET = "container-secret-value"
CONTAINER_ENV = {"HUB_SECRET": SECRET, "CODING_ENV_TIMEOUT_S": "2"}


async def run(env: CodingEnv, code: str, persist: bool = False):
    return (await env.step(CodeAction(code=code, persist=persist))).observation


def denied(obs) -> bool:
    return obs.exit_code == 1 and ("PermissionError" in obs.stderr or "Operation not permitted" in obs.stderr)


async def check_contained(url: str, *, own_uid: bool) -> None:
    async with CodingEnv(url) as env, CodingEnv(url) as other:
        await env.reset(seed=1)
        await other.reset()
        state = await env.state()
        assert (
            state.isolation["seccomp"]
            and state.isolation["landlock_abi"] >= 1
            and state.isolation["own_uid"] is own_uid
        )
        who = await run(env, "import os; print(os.getuid(), sorted(os.environ))")
        assert (int(who.stdout.split()[0]) not in (0, 1000)) is own_uid and "HUB_SECRET" not in who.stdout
        for code in (
            "open('/etc/shadow').read()",
            "open('/app/env/server/app.py').read()",
            "open('/proc/1/environ').read()",
            "open('/tmp/escaped', 'w').write('x')",
            "import socket; socket.create_connection(('127.0.0.1', 8000))",
            "import os, signal; os.kill(1, signal.SIGKILL)",
        ):
            obs = await run(env, code)
            assert denied(obs) and SECRET not in obs.stdout, (code, obs)
        assert (await run(env, "x = 5", persist=True)).exit_code == 0
        assert (await run(env, "print(x * 2)", persist=True)).stdout == "10\n"
        bomb = asyncio.create_task(
            run(env, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
        )
        await asyncio.sleep(0.5)
        start = time.monotonic()
        assert (await asyncio.to_thread(health, url))["status"] == "healthy"
        assert time.monotonic() - start < 1  # the server answers at once: the bomb runs below its priority
        assert (await run(other, "print('served')")).stdout == "served\n"  # (sharing the 2 cores with it)
        assert (await bomb).timed_out
        loop = await run(env, "while True:\n    pass")
        assert loop.timed_out and loop.reward == -1.0
        assert (await run(env, "print('alive')")).stdout == "alive\n"


@pytest.mark.docker
@pytest.mark.slow
async def test_sandbox_holds_in_the_image_as_root(env_images) -> None:
    with env_images.run("coding_env", environment=CONTAINER_ENV) as url:
        await check_contained(url, own_uid=True)


@pytest.mark.docker
@pytest.mark.slow
async def test_sandbox_holds_in_the_image_as_an_unprivileged_user(env_images) -> None:
    with env_images.run("coding_env", environment=CONTAINER_ENV, user="1000:1000") as url:
        await check_contained(url, own_uid=False)
