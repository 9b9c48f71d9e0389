"""`openenv eval` for real: the command resolves echo_env through a Hub service on 127.0.0.1, plays
it with a stand-in OpenAI-compatible model, prints the mean return with its interval, submits it
with a Hugging Face token (checked against a stand-in Hugging Face Hub), and the env's leaderboard
then holds the run beside the random baseline. Each way it can fail says what to do."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from hub_service.app import create_app
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.evals.models import Eval
from hub_service.evals.service import record_eval
from hub_service.settings import HubSettings
from tests.support.cli import Run
from tests.support.hf_hub import HubStandIn
from tests.support.openai_standin import openai_standin
from tests.support.servers import serve_app

SHA = "5e" * 20
FAILED = "fa" * 20
KEY = "sk-eval-key-123"


@dataclass
class Setup:
    hub: str  # the OpenEnv Hub service
    llm: str  # the model's base URL
    token: str  # alice's Hugging Face token
    app: object
    standin: object

    def stored(self) -> int:
        with self.app.state.sessionmaker() as s:
            return s.scalar(select(func.count()).select_from(Eval))


def _answer(episodes: list[int]):
    """Step 1: a message as long as the episode's number; step 2: an unusable answer; then "hey"."""

    def reply(text: str) -> str:
        step = int(re.findall(r"Step (\d+)\.", text)[-1])
        if step == 1:
            episodes.append(1)
            return json.dumps({"message": "a" * len(episodes)})
        if step == 2:  # episode 1: no JSON at all; then an action the env refuses (message must be text)
            return "no idea, sorry" if len(episodes) == 1 else '{"message": 5}'
        return 'Sure: ```json\n{"message": "hey"}\n```'

    return reply


@pytest.fixture()
def setup(tmp_path: Path, echo_url: str) -> Iterator[Setup]:
    standin = openai_standin(api_key=KEY, models={"tiny-model"}, replies=_answer([]))
    with HubStandIn(tmp_path / "hf") as hf, serve_app(standin) as llm:
        settings = HubSettings(data_dir=tmp_path / "hub", website=False, hf_endpoint=hf.url, local_source=None)
        app = create_app(settings)
        with app.state.sessionmaker.begin() as s:  # echo_env passed the Hub's checks and runs at echo_url
            env = EnvRecord(
                source="local",
                owner="local",
                name="echo_env",
                stage="RUNNING",
                host=echo_url,
                sha=SHA,
                status="passing",
            )
            s.add(env)
            s.flush()
            version = EnvVersion(env_id=env.id, sha=SHA, state="passed")
            s.add(version)
            s.flush()
            env.latest_version_id = version.id
            s.add(EnvVersion(env_id=env.id, sha=FAILED, state="failed", failure_stage="smoke"))
            record_eval(s, env, version, source="baseline", model="random", returns=[0.3, 0.6, 0.9])
        with serve_app(app) as hub:
            yield Setup(hub, f"{llm}/v1", hf.token, app, standin)


def _eval(
    run_cli: Run,
    setup: Setup,
    *more: str,
    env: dict[str, str] | None = None,
    episodes: int = 2,
    max_steps: int = 3,
    token: bool = True,
):
    args = [
        "eval",
        "local/echo_env",
        "--model",
        "tiny-model",
        "--base-url",
        setup.llm,
        "--api-key",
        KEY,
        "--episodes",
        str(episodes),
        "--max-steps",
        str(max_steps),
        "--hub",
        setup.hub,
        *more,
    ]
    return run_cli(*args, env={**({"HF_TOKEN": setup.token} if token else {}), **(env or {})})


def test_eval_plays_prints_the_score_and_the_leaderboard_then_holds_it(run_cli: Run, setup: Setup) -> None:
    done = _eval(run_cli, setup, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # episode 1: "a" (0.1) + an unusable answer + "hey" (0.3); episode 2: "aa" (0.2) + 0 + 0.3
    assert result["returns"] == pytest.approx([0.4, 0.5]) and result["mean_return"] == pytest.approx(0.45)
    assert result["ci_low"] < 0.45 < result["ci_high"] and result["invalid_turns"] == 2 and result["revision"] == SHA
    assert result["submitted"]["submitted_by"] == "alice" and result["submitted"]["source"] == "cli"
    assert "episode 2/2" in done.stderr
    # the model was told why its answers were not taken
    told = " ".join(str(m["content"]) for r in setup.standin.state.requests for m in r["body"]["messages"])
    assert "That answer was not accepted: no JSON object" in told and "the env refused the action" in told
    # the model got the env's action schema and its key; the Hub got only the endpoint's host
    first = setup.standin.state.requests[0]
    assert first["headers"]["authorization"] == f"Bearer {KEY}" and "message" in first["body"]["messages"][0]["content"]

    board = httpx.get(f"{setup.hub}/api/v1/envs/local/echo_env/leaderboard").json()["entries"]
    assert [(e["model"], e["source"]) for e in board] == [("random", "baseline"), ("tiny-model", "cli")]
    ours = board[1]
    assert ours["mean_return"] == pytest.approx(0.45) and ours["episodes"] == 2 and ours["submitted_by"] == "alice"
    assert ours["endpoint_host"] == setup.llm.split("//")[1].split("/")[0] and ours["revision"] == SHA
    assert KEY not in json.dumps(board) and setup.token not in json.dumps(board)

    # for people: the score with its interval, and where to see it
    human = _eval(run_cli, setup)
    assert human.returncode == 0, human.stderr
    assert re.search(r"mean return [\d.]+ ± [\d.]+ \(95% interval", human.stdout)
    assert "submitted as alice" in human.stdout and "/leaderboard" in human.stdout
    assert setup.stored() == 3


def test_each_failure_says_what_to_do_and_submits_nothing(run_cli: Run, setup: Setup, tmp_path: Path) -> None:
    bad_token = _eval(run_cli, setup, env={"HF_TOKEN": "hf_forged"})
    assert bad_token.returncode == 1 and "token was not accepted" in bad_token.stderr
    assert "mean return" in bad_token.stdout  # the score is still shown
    no_token = run_cli("eval", "local/echo_env", "--model", "m", "--base-url", setup.llm, "--hub", setup.hub)
    assert no_token.returncode == 2 and "HF_TOKEN" in no_token.stderr and "--no-submit" in no_token.stderr
    unknown = run_cli(
        "eval", "local/echo_envv", "--model", "tiny-model", "--base-url", setup.llm, "--hub", setup.hub, "--no-submit"
    )
    assert (
        unknown.returncode == 1
        and "does not know local/echo_envv" in unknown.stderr
        and "api/v1/envs?q=" in unknown.stderr
    )
    closed = _eval(run_cli, setup, "--base-url", "http://127.0.0.1:9/v1")
    assert closed.returncode == 1 and "could not be reached" in closed.stderr and "--base-url" in closed.stderr
    wrong_model = _eval(run_cli, setup, "--model", "no-such-model")
    assert wrong_model.returncode == 1 and "HTTP 404" in wrong_model.stderr and "--model" in wrong_model.stderr
    wrong_key = _eval(run_cli, setup, "--api-key", "sk-wrong")
    assert wrong_key.returncode == 1 and "HTTP 401" in wrong_key.stderr and "--api-key" in wrong_key.stderr
    failed = _eval(run_cli, setup, "--revision", FAILED[:9])
    assert failed.returncode == 1 and "is failed" in failed.stderr and "--no-submit" in failed.stderr
    assert "episode" not in failed.stdout + failed.stderr  # refused before playing
    no_hub = run_cli("eval", "local/echo_env", "--model", "m", "--base-url", setup.llm, "--no-submit")
    assert no_hub.returncode == 2 and "OPENENV_HUB_URL" in no_hub.stderr
    assert setup.stored() == 1  # only the baseline

    # --no-submit needs no token and stores nothing
    local = _eval(run_cli, setup, "--no-submit", "--json", episodes=1, max_steps=1, token=False)
    assert local.returncode == 0, local.stderr
    assert json.loads(local.stdout)["submitted"] is None and setup.stored() == 1
