"""Runtime checks against real servers: ours, upstream's, and servers that misbehave."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, field_validator
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from openenv import Action, Environment, Observation, State, create_app
from openenv.validation import validate, validate_url, validate_url_async
from tests.support.servers import ROOT, free_port, serve_app, serve_process


class PickAction(Action):
    choice: str = Field(pattern=r"^[a-c]$", description="One of a, b, c.")
    weight: float = Field(gt=0, le=1)
    tags: list[str] = Field(min_length=2)


class PickObservation(Observation):
    picked: str = ""


class PickEnv(Environment[PickAction, PickObservation, State]):
    """Accepts only well-formed picks; the validator must build one from the schema."""

    def __init__(self) -> None:
        self._steps = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> PickObservation:
        self._steps = 0
        return PickObservation()

    def step(self, action: PickAction, timeout_s: float | None = None, **kwargs: Any) -> PickObservation:
        self._steps += 1
        return PickObservation(picked=action.choice, reward=action.weight)

    @property
    def state(self) -> State:
        return State(episode_id="e", step_count=self._steps)


class CrashAction(Action):
    n: int = 0


class CrashEnv(PickEnv):
    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> PickObservation:
        raise RuntimeError("the env is broken")


class PickyAction(Action):
    code: str

    @field_validator("code")
    @classmethod
    def _never(cls, value: str) -> str:
        raise ValueError("no generated value is ever right")


def test_our_echo_server_passes_every_runtime_check(echo_url: str) -> None:
    report = validate_url(echo_url, latency_steps=10)
    assert report.status == "pass", [(c.id, c.message) for c in report.problems()]
    assert [c.id for c in report.checks] == [
        "runtime.reachable",
        "runtime.health",
        "runtime.metadata",
        "runtime.schema",
        "runtime.openapi",
        "runtime.reset",
        "runtime.step",
        "runtime.state",
        "runtime.errors",
        "runtime.latency",
    ]
    step = report.results("runtime.step")[0]
    assert step.details["action"] == {"message": "hello"} and step.details["reward"] == 0.5
    latency = report.results("runtime.latency")[0].details
    assert latency["steps"] == 10 and 0 < latency["p50_ms"] <= latency["p95_ms"]
    assert report.target.name == "echo_env"


def test_the_action_is_built_from_the_schema_constraints() -> None:
    with serve_app(create_app(PickEnv, PickAction, PickObservation)) as url:
        report = validate_url(url, latency_steps=3)
    step = report.results("runtime.step")[0]
    assert step.status == "pass", step
    assert PickAction.model_validate(step.details["action"])


def test_an_env_that_raises_on_every_step_fails() -> None:
    """The verdict rule (docs/validate.md): no step succeeded, so the env fails, with what was sent and what came back."""
    with serve_app(create_app(CrashEnv, CrashAction, PickObservation)) as url:
        report = validate_url(url)
    step = report.results("runtime.step")[0]
    assert step.status == "fail" and "no step succeeded" in step.message and "the env is broken" in step.message
    assert step.details["verdict"] == "NO_STEP_SUCCEEDED"
    sent = [r for r in step.details["steps"] if r["request"] == "step"]
    assert sent and all(r["code"] == "EXECUTION_ERROR" and r["sent"] for r in sent)
    assert report.results("runtime.latency")[0].status == "skip"
    assert report.exit_code == 1


def test_an_action_no_generator_can_satisfy_fails_with_the_refusals_shown() -> None:
    with serve_app(create_app(PickEnv, PickyAction, PickObservation)) as url:
        report = validate_url(url)
    step = report.results("runtime.step")[0]
    assert step.status == "fail" and "no step succeeded" in step.message and "VALIDATION_ERROR" in step.message


def test_a_server_that_is_not_an_openenv_server_is_unsupported() -> None:
    app = Starlette(routes=[Route("/health", lambda r: JSONResponse({"status": "healthy"}))])
    with serve_app(app) as url:
        report = validate_url(url)
    assert (report.status, report.exit_code) == ("unsupported", 2)
    assert "not an OpenEnv server" in (report.unsupported_reason or "")


def test_an_oversized_reply_is_cut_off_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A /metadata reply of 3 MB against a 1 MB cap: reported as such, and the other checks go on."""
    from openenv.validation import runtime

    monkeypatch.setattr(runtime, "MAX_REPLY_MB", 1)
    app = create_app(PickEnv, PickAction, PickObservation)

    @app.middleware("http")
    async def huge_metadata(request: Any, call_next: Any) -> Any:
        if request.url.path == "/metadata":
            return JSONResponse({"name": "pick", "padding": "x" * (3 << 20)})
        return await call_next(request)

    with serve_app(app) as url:
        report = validate_url(url, latency_steps=3)
    metadata = report.results("runtime.metadata")[0]
    assert metadata.status != "pass" and "over 1 MB, not read" in metadata.message, metadata
    assert report.results("runtime.schema")[0].status == "pass"
    assert report.results("runtime.step")[0].status == "pass"


def test_nothing_listening_is_a_failure_with_advice() -> None:
    report = validate_url(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    reach = report.results("runtime.reachable")[0]
    assert reach.status == "fail" and "cannot reach" in reach.message and "openenv serve" in (reach.remediation or "")
    assert report.exit_code == 1
    assert all(c.status == "skip" for c in report.checks if c.id != "runtime.reachable")


def _fragile_ws_app() -> Starlette:
    """Speaks the protocol for good frames, but drops the connection on a bad one."""

    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        steps = 0
        while True:
            text = await socket.receive_text()
            try:
                msg = json.loads(text)
            except ValueError:
                await socket.close(1011)
                return
            kind = msg.get("type")
            if kind in ("reset", "step"):
                steps += kind == "step"
                await socket.send_text(
                    json.dumps({"type": "observation", "data": {"observation": {}, "reward": 0.0, "done": False}})
                )
            elif kind == "state":
                await socket.send_text(json.dumps({"type": "state", "data": {"episode_id": "x", "step_count": steps}}))
            else:
                await socket.send_text(json.dumps({"type": "error", "data": {"code": "UNKNOWN_TYPE", "message": "?"}}))

    schema = {
        "action": {"type": "object", "properties": {}},
        "observation": {"type": "object"},
        "state": {"type": "object"},
    }
    return Starlette(
        routes=[
            Route("/health", lambda r: JSONResponse({"status": "healthy"})),
            Route("/metadata", lambda r: JSONResponse({"name": "fragile"})),
            Route("/schema", lambda r: JSONResponse(schema)),
            Route("/openapi.json", lambda r: JSONResponse({"info": {"version": "0.9"}})),
            WebSocketRoute("/ws", ws),
        ]
    )


def test_a_server_that_drops_the_session_on_a_bad_frame_fails() -> None:
    with serve_app(_fragile_ws_app()) as url:
        report = validate_url(url, latency_steps=2)
    errors = report.results("runtime.errors")[0]
    assert errors.status == "fail" and "ended the session" in errors.message
    assert report.results("runtime.openapi")[0].status == "warn"
    assert report.results("runtime.step")[0].status == "pass"
    assert report.exit_code == 1


async def test_the_async_variant_runs_inside_a_running_loop(echo_url: str) -> None:
    reports = await asyncio.gather(
        validate_url_async(echo_url, latency_steps=2), validate_url_async(echo_url, latency_steps=2)
    )
    assert [r.status for r in reports] == ["pass", "pass"]


@pytest.mark.interop
@pytest.mark.slow
def test_an_upstream_openenv_core_server_passes(upstream_python: str) -> None:
    with serve_process(
        [upstream_python, "-m", "uvicorn", "_upstream_echo:app", "--log-level", "warning"], cwd=ROOT / "benchmarks"
    ) as server:
        report = validate_url(server.url, latency_steps=5)
    assert report.exit_code == 0, [(c.id, c.status, c.message) for c in report.problems()]
    assert report.results("runtime.step")[0].status == "pass"
    assert report.results("runtime.errors")[0].status == "pass"


@pytest.mark.interop
@pytest.mark.slow
def test_an_upstream_env_folder_imports_and_runs_with_its_own_python(upstream_python: str, tmp_path: Path) -> None:
    env = tmp_path / "upstream_echo"
    (env / "server").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "_upstream_echo.py", env / "server" / "app.py")
    (env / "server" / "__init__.py").write_text("")
    (env / "openenv.yaml").write_text(
        "spec_version: 1\nname: upstream_echo\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n"
    )
    (env / "server" / "requirements.txt").write_text("openenv-core==0.3.0\n")
    (env / "README.md").write_text("---\nsdk: docker\napp_port: 8000\ntags: [openenv]\n---\n")
    (env / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY . /app\nRUN pip install -r /app/server/requirements.txt\nEXPOSE 8000\n"
    )
    here = validate(env, import_app=True)
    assert here.results("app.import")[0].status == "skip"  # our Python has no openenv.core
    there = validate(env, python=upstream_python, run=True, latency_steps=3)
    assert there.results("app.import")[0].status == "pass" and there.results("app.object")[0].status == "pass"
    assert there.results("runtime.starts")[0].status == "pass" and there.results("runtime.step")[0].status == "pass"
    assert there.exit_code == 0, [(c.id, c.status, c.message) for c in there.problems()]
    subprocess.run(
        [upstream_python, "-c", "import openenv.core"], check=True, cwd=tmp_path
    )  # it really was upstream's SDK
