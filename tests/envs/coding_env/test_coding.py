"""coding_env: running code, output, exit codes, persistence, limits, seeding, the wire and the soak."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from coding_env import CodeAction, CodingEnv
from coding_env.models import CodeObservation
from coding_env.server.coding_environment import CodingEnvironment
from coding_env.server.settings import SandboxSettings

from openenv import InvalidActionError, create_app
from tests.envs.coding_env.conftest import TIMEOUT_S
from tests.envs.soak import describe, soak, wait_sessions_closed
from tests.support.servers import serve_app


async def run(env: CodingEnv, code: str, persist: bool = False, **kw):
    return await env.step(CodeAction(code=code, persist=persist), **kw)


async def test_output_exit_codes_and_rewards(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        ok = await run(env, "import sys\nprint('hello', 6 * 7)\nprint('warn', file=sys.stderr)")
        assert (ok.observation.stdout, ok.observation.stderr, ok.observation.exit_code) == ("hello 42\n", "warn\n", 0)
        assert ok.reward == 1.0 and not ok.done and ok.observation.duration_s > 0
        boom = await run(env, "def f():\n    return 1 / 0\nf()")
        assert boom.observation.exit_code == 1 and boom.reward == 0.0
        assert (
            "ZeroDivisionError: division by zero" in boom.observation.stderr
            and 'File "<cell>", line 2' in boom.observation.stderr
        )
        assert (await run(env, "raise SystemExit(3)")).observation.exit_code == 3
        assert (await run(env, "import sys; sys.exit()")).observation.exit_code == 0
        syntax = await run(env, "def (:")
        assert syntax.observation.exit_code == 1 and "SyntaxError" in syntax.observation.stderr
        child = await run(
            env,
            "import subprocess\nprint(subprocess.run(['echo', 'from a child'], capture_output=True, text=True).stdout.strip())\nimport os\nos.system('echo straight to fd 1')",
        )
        assert child.observation.stdout.splitlines() == ["from a child", "straight to fd 1"]
        for blank in ("", "  \n\t"):  # no code runs cleanly, but earns nothing
            empty = await run(env, blank)
            assert empty.observation.exit_code == 0 and empty.reward == 0.0


async def test_state_persists_only_when_asked(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        await run(env, "import math\nx = 41\ndef inc(v):\n    return v + 1", persist=True)
        again = await run(env, "print(inc(x), math.pi > 3)", persist=True)
        assert again.observation.stdout == "42 True\n" and not again.observation.interpreter_restarted
        fresh = await run(env, "print(x)")
        assert fresh.observation.exit_code == 1 and "NameError" in fresh.observation.stderr
        assert (await run(env, "print(x)", persist=True)).observation.stdout == "41\n"
        await run(env, "import os; os._exit(9)", persist=True)  # the interpreter dies: state is lost
        lost = await run(env, "print(x)", persist=True)
        assert lost.observation.interpreter_restarted and "NameError" in lost.observation.stderr
        await env.reset()  # a new episode starts from nothing
        assert "NameError" in (await run(env, "print(x)", persist=True)).observation.stderr


async def test_files_live_in_a_private_folder_for_the_episode(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        where = await run(env, "import os\nopen('notes.txt', 'w').write('kept')\nprint(os.getcwd())")
        folder = where.observation.stdout.strip()
        assert (await run(env, "print(open('notes.txt').read())")).observation.stdout == "kept\n"
        async with CodingEnv(url) as other:  # another session cannot see it
            await other.reset()
            peek = await run(other, f"print(open({folder + '/notes.txt'!r}).read())")
            assert peek.observation.exit_code == 1 and "PermissionError" in peek.observation.stderr
        await env.reset()
        assert "FileNotFoundError" in (await run(env, "open('notes.txt')")).observation.stderr


async def test_long_output_is_cut_at_the_limit(url: str) -> None:
    limit = SandboxSettings().max_output_bytes
    async with CodingEnv(url) as env:
        await env.reset()
        big = await run(env, "print('x' * 300_000)")
        assert big.observation.truncated and len(big.observation.stdout) == limit and big.observation.exit_code == 0


async def test_a_seed_fixes_hash_order(url: str) -> None:
    code = "print(list({'apple', 'pear', 'fig', 'kiwi', 'plum', 'lime', 'date', 'yuzu'}))"

    async def order(seed: int) -> str:
        async with CodingEnv(url) as env:
            await env.reset(seed=seed)
            return (await run(env, code)).observation.stdout

    first, second = await asyncio.gather(order(5), order(5))
    assert first == second
    assert len({await order(s) for s in range(6)}) > 1


async def test_a_client_step_timeout_is_honoured(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        start = time.monotonic()
        slow = await run(env, "import time; print('before', flush=True); time.sleep(30)", timeout_s=1.0)
        assert slow.observation.timed_out and slow.reward == -1.0 and slow.observation.exit_code == -9
        assert slow.observation.stdout == "before\n"  # output up to the kill is kept
        assert time.monotonic() - start < 3


async def test_bad_actions_are_refused_clearly(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset()
        with pytest.raises(InvalidActionError, match="code"):
            await env.step({"source": "print(1)"})
        with pytest.raises(InvalidActionError, match="at most 200000"):
            await env.step({"code": "#" * 200_001})
        assert (await run(env, "print('still here')")).observation.stdout == "still here\n"
        state = await env.state()
        assert state.step_count == 1 and state.timeout_s == TIMEOUT_S
        assert state.isolation["seccomp"] and state.isolation["landlock_abi"] >= 1


SNIPPETS = [
    ("print(sum(range(100)))", False),
    ("n = globals().get('n', 0) + 1\nprint(n)", True),
    ("import json; print(json.dumps({'a': [1, 2]}))", True),
    ("raise ValueError('nope')", True),
    ("import sys; sys.exit(2)", False),
    ("print(undefined_name)", False),
    ("import random; random.seed(1); print(random.random())", True),
    ("open('f.txt', 'a').write('x'); print(len(open('f.txt').read()))", True),
    ("import socket; socket.socket()", True),
]


@pytest.mark.slow
async def test_soak_1000_random_steps_over_4_sessions(url: str, server_errors: list) -> None:
    def choose(rng, obs):
        code, persist = rng.choice(SNIPPETS)
        return CodeAction(code=code, persist=persist and rng.random() < 0.8)

    report = await soak(url, CodingEnv, choose)
    assert report.steps == 1000 and {0.0, 1.0} <= set(report.rewards)
    assert (await wait_sessions_closed(url))["status"] == "healthy"
    assert not server_errors, describe(server_errors)


async def test_a_machine_that_cannot_sandbox_says_so_at_start_up() -> None:
    def factory() -> CodingEnvironment:
        return CodingEnvironment(SandboxSettings(python="/nonexistent/python3"))

    app = create_app(factory, CodeAction, CodeObservation, env_name="coding_env")
    with serve_app(app) as base:
        async with httpx.AsyncClient() as http:
            health = await http.get(base + "/health")
    assert health.status_code == 503 and health.json()["status"] == "unhealthy"
    assert "no Python interpreter the sandbox user can run" in health.json()["error"]
    assert "/nonexistent/python3: no such file" in health.json()["error"]


def test_settings_from_the_environment_name_the_bad_variable() -> None:
    settings = SandboxSettings.from_env({"CODING_ENV_TIMEOUT_S": "2.5", "CODING_ENV_MEMORY_MB": "128"})
    assert settings.timeout_s == 2.5 and settings.memory_mb == 128
    with pytest.raises(ValueError, match="CODING_ENV_TIMEOUT_S='soon' is not a valid float"):
        SandboxSettings.from_env({"CODING_ENV_TIMEOUT_S": "soon"})
    with pytest.raises(ValueError, match="CODING_ENV_MEMORY_MB must be at least 64"):
        SandboxSettings.from_env({"CODING_ENV_MEMORY_MB": "16"})


async def test_render_shows_the_last_run_as_a_terminal_and_max_steps_ends_the_episode(url: str) -> None:
    async with CodingEnv(url) as env:
        await env.reset(max_steps=2)
        first = await env.render()
        assert first is not None and first.media_type == "text/x-ansi" and "no code run yet" in first.text()
        result = await env.step(CodeAction(code="print('hi')\n1/0"))
        assert result.done is False
        text = (await env.render()).text()  # type: ignore[union-attr]
        assert text.startswith("\x1b[1;36m>>>\x1b[0m print('hi')\n\x1b[1;36m>>>\x1b[0m 1/0\nhi\n\x1b[31mTraceback")
        assert "ZeroDivisionError" in text and "\x1b[1;31mexit 1\x1b[0m" in text
        result = await env.step(CodeAction(code="print(2)"))
        assert result.done is True and "\x1b[32mexit 0\x1b[0m" in (await env.render()).text()  # type: ignore[union-attr]
        with pytest.raises(Exception, match="max_steps must be a positive integer"):
            await env.reset(max_steps=0)
