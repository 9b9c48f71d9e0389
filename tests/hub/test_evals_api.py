"""Leaderboards and submitted evals through the JSON API, on SQLite and PostgreSQL: best mean first,
runs of one model pooled, the random baseline always shown, yanked revisions marked; a submission
needs a Hugging Face token (asked of a stand-in Hub with the real client) and a sound body."""

from __future__ import annotations

import json
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
from hub_service.indexer.service import index_source
from hub_service.settings import HubSettings
from tests.hub.helpers import ListSource, space
from tests.support.hf_hub import HubStandIn
from tests.support.servers import serve_app

OLD_SHA = "a" * 40


@dataclass
class Board:
    url: str
    factory: object
    token: str  # alice's, on the stand-in Hugging Face Hub
    repo: str
    sha: str  # the current passing revision
    hf: HubStandIn

    def submit(self, body: dict, token: str | None = None, raw: bytes | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token or self.token}"} if token != "" else {}
        if raw is not None:
            return httpx.post(
                f"{self.url}/api/v1/envs/{self.repo}/evals",
                content=raw,
                headers={**headers, "Content-Type": "application/json"},
            )
        return httpx.post(f"{self.url}/api/v1/envs/{self.repo}/evals", json=body, headers=headers)

    def board(self, **params: object) -> dict:
        reply = httpx.get(f"{self.url}/api/v1/envs/{self.repo}/leaderboard", params=params)
        assert reply.status_code == 200, reply.text
        return reply.json()

    def stored(self) -> int:
        with self.factory() as s:
            return s.scalar(select(func.count()).select_from(Eval))


@pytest.fixture()
def api(clean_factory, hub_settings: HubSettings, tmp_path: Path) -> Iterator[Board]:
    index_source(clean_factory, ListSource([space(1), space(2)]))
    with clean_factory.begin() as s:
        env = s.scalar(select(EnvRecord).where(EnvRecord.name == "env_00001"))
        current = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
        current.state = "passed"
        old = EnvVersion(env_id=env.id, sha=OLD_SHA, ref="main", state="passed")
        failed = EnvVersion(env_id=env.id, sha="b" * 40, ref="main", state="failed", failure_stage="smoke")
        s.add_all([old, failed])
        s.flush()
        env.latest_version_id, env.status = current.id, "passing"
        # the random baseline the pipeline plays on every passing revision
        record_eval(s, env, current, source="baseline", model="random", returns=[0.0, 1.0, 0.0, 1.0])
        record_eval(s, env, old, source="baseline", model="random", returns=[0.2, 0.4])
        repo, sha = env.repo_id, current.sha
    with HubStandIn(tmp_path / "hf") as hf:
        settings = hub_settings.model_copy(update={"hf_endpoint": hf.url})
        with serve_app(create_app(settings, run_migrations=False)) as url:
            yield Board(url, clean_factory, hf.token, repo, sha, hf)


def test_submitted_runs_rank_by_mean_return_beside_the_random_baseline(api: Board) -> None:
    good = api.submit(
        {
            "model": "org/strong-model",
            "base_url": "https://user:pw@models.example:8443/v1?key=x",
            "revision": api.sha[:10],
            "episodes": 3,
            "returns": [2.0, 3.0, 4.0],
            "max_steps": 50,
        }
    )
    assert good.status_code == 201, good.text
    stored = good.json()
    assert stored["submitted_by"] == "alice" and stored["source"] == "cli" and stored["revision"] == api.sha
    assert stored["endpoint_host"] == "models.example:8443"  # no path, query or credentials
    assert stored["mean_return"] == pytest.approx(3.0) and stored["ci_low"] < 3.0 < stored["ci_high"]
    assert api.submit({"model": "tiny", "revision": api.sha, "episodes": 1, "returns": [-1.0]}).status_code == 201
    # a second run of the same model by the same user, through the same host, joins its entry
    assert (
        api.submit(
            {
                "model": "org/strong-model",
                "base_url": "https://models.example:8443/v1",
                "revision": api.sha,
                "episodes": 1,
                "returns": [5.0],
            }
        ).status_code
        == 201
    )

    # whose the token is was asked of the Hugging Face Hub once, not per submission
    assert api.hf.request_count("GET", "/api/whoami-v2") == 1

    board = api.board()
    entries = board["entries"]
    assert board["env"] == api.repo and board["total"] == 4
    assert [(e["model"], e["source"]) for e in entries] == [
        ("org/strong-model", "cli"),
        ("random", "baseline"),
        ("random", "baseline"),
        ("tiny", "cli"),
    ]
    assert [e["rank"] for e in entries] == [1, 2, 3, 4]
    assert [e["mean_return"] for e in entries] == sorted((e["mean_return"] for e in entries), reverse=True)
    top = entries[0]
    assert (top["runs"], top["episodes"], top["mean_return"]) == (2, 4, pytest.approx(3.5))
    assert (
        top["submitted_by"] == "alice" and top["endpoint_host"] == "models.example:8443" and top["revision"] == api.sha
    )
    assert top["ci_low"] < 3.5 < top["ci_high"] and top["yanked"] is False and top["date"]
    assert entries[3]["ci_low"] == entries[3]["ci_high"] == -1.0  # one episode: no interval to speak of
    assert "user:pw" not in json.dumps(board) and "key=x" not in json.dumps(board)

    # a short board still shows what a random policy scores
    short = api.board(limit=1)
    assert [(e["model"], e["rank"]) for e in short["entries"]] == [("org/strong-model", 1), ("random", 2)]
    # the board of one revision
    old = api.board(revision=OLD_SHA[:8])
    assert old["revision"] == OLD_SHA and [(e["model"], e["episodes"]) for e in old["entries"]] == [("random", 2)]


def test_runs_on_a_yanked_revision_are_marked(api: Board) -> None:
    assert api.submit({"model": "m", "revision": OLD_SHA, "episodes": 2, "returns": [9.0, 9.0]}).status_code == 201
    assert all(not e["yanked"] for e in api.board()["entries"])
    with api.factory.begin() as s:
        s.scalar(select(EnvVersion).where(EnvVersion.sha == OLD_SHA)).yanked = True
    entries = api.board()["entries"]
    assert {(e["model"], e["revision"][:1], e["yanked"]) for e in entries} == {
        ("m", "a", True),
        ("random", "a", True),
        ("random", "0", False),
    }
    assert entries[0]["model"] == "m" and entries[0]["yanked"] is True


def test_a_submission_needs_a_token_the_hugging_face_hub_accepts(api: Board, hub_settings: HubSettings) -> None:
    body = {"model": "m", "revision": api.sha, "episodes": 1, "returns": [1.0]}
    missing = api.submit(body, token="")
    assert missing.status_code == 401 and "Bearer" in missing.json()["error"]["message"]
    wrong = api.submit(body, token="hf_not_a_token")
    assert wrong.status_code == 401 and "does not accept this token" in wrong.json()["error"]["message"]
    odd = api.submit(body, token="x" * 600)
    assert odd.status_code == 401 and "not a Hugging Face token" in odd.json()["error"]["message"]
    basic = httpx.post(
        f"{api.url}/api/v1/envs/{api.repo}/evals", json=body, headers={"Authorization": f"Basic {api.token}"}
    )
    assert basic.status_code == 401
    # the Hugging Face Hub cannot be asked: say so, store nothing
    down = hub_settings.model_copy(update={"hf_endpoint": "http://127.0.0.1:9"})
    with serve_app(create_app(down, run_migrations=False)) as url:
        unreachable = httpx.post(
            f"{url}/api/v1/envs/{api.repo}/evals", json=body, headers={"Authorization": f"Bearer {api.token}"}
        )
    assert unreachable.status_code == 502 and "try again later" in unreachable.json()["error"]["message"]
    assert api.stored() == 2  # the two baselines, nothing else
    assert [e["source"] for e in api.board()["entries"]] == ["baseline", "baseline"]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"episodes": 2, "returns": [1.0]}, 422, "one return per episode"),
        ({"episodes": 0, "returns": []}, 422, ""),
        ({"episodes": 1001, "returns": [1.0] * 1001}, 422, ""),
        ({"model": "  "}, 422, "printable"),
        ({"model": "bad\x00name"}, 422, "printable"),
        ({"model": "m" * 257}, 422, ""),
        ({"base_url": "ftp://models.example/v1"}, 422, "http(s) URL"),
        ({"base_url": "http://mod\x00els.example/v1"}, 422, "control characters"),
        ({"returns": [1e13], "episodes": 1}, 422, ""),
        ({"revision": "b" * 40}, 409, "not passed"),
        ({"revision": "c" * 40}, 404, "no indexed revision"),
        ({"revision": "xyz1234"}, 400, "hex digits"),
    ],
)
def test_bad_submissions_are_refused_with_what_is_wrong(api: Board, body: dict, status: int, words: str) -> None:
    full = {"model": "m", "revision": api.sha, "episodes": 1, "returns": [1.0], **body}
    reply = api.submit(full)
    assert reply.status_code == status, reply.text
    assert words in json.dumps(reply.json())
    assert api.stored() == 2


def test_returns_must_be_finite_numbers_and_the_env_must_exist(api: Board) -> None:
    for raw in (
        b'{"model":"m","revision":"%s","episodes":1,"returns":[NaN]}',
        b'{"model":"m","revision":"%s","episodes":1,"returns":[Infinity]}',
        b'{"model":"m","revision":"%s","episodes":1,"returns":["1"]}',
    ):
        reply = api.submit({}, raw=raw % api.sha.encode())
        assert reply.status_code == 422, reply.text
    unknown = httpx.post(
        f"{api.url}/api/v1/envs/user1/env_0001/evals",
        json={"model": "m", "revision": api.sha, "episodes": 1, "returns": [1.0]},
        headers={"Authorization": f"Bearer {api.token}"},
    )
    assert unknown.status_code == 404 and "did you mean user1/env_00001" in unknown.json()["error"]["message"]
    assert httpx.get(f"{api.url}/api/v1/envs/user1/nope/leaderboard").status_code == 404
    assert api.stored() == 2


def test_the_schemas_are_in_the_openapi_document(api: Board) -> None:
    doc = httpx.get(f"{api.url}/openapi.json", timeout=60).json()
    assert "post" in doc["paths"]["/api/v1/envs/{owner}/{name}/evals"]
    assert "get" in doc["paths"]["/api/v1/envs/{owner}/{name}/leaderboard"]
    assert {"Leaderboard", "LeaderboardEntry", "EvalSubmission", "SubmittedEval"} <= set(doc["components"]["schemas"])
