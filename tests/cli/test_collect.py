"""`openenv collect`: rollouts on the engine into results.jsonl + metadata.json, read back by upstream
openenv 0.10.0's own reader and by pyarrow's JSON reader (what `datasets.load_dataset("json")` uses);
resume after a crash; an OpenAI-compatible policy (the stand-in); `--push` to the stand-in Hub."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.openai_standin import openai_standin
from tests.support.servers import serve_app


@pytest.fixture(scope="module")
def blackjack() -> Iterator[str]:
    from blackjack_env.server.app import app

    with serve_app(app) as url:
        yield url


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]


_UPSTREAM_READER = """
import dataclasses, json, sys
from openenv.core.harness.collect import EpisodeRecord, RolloutSerializer
folder = sys.argv[1]
ids = RolloutSerializer(folder).collected_episode_ids()
names = {f.name for f in dataclasses.fields(EpisodeRecord)}
rows = [json.loads(line) for line in open(folder + "/results.jsonl") if line.strip()]
records = [EpisodeRecord(**row) for row in rows]
print(json.dumps({"ids": sorted(ids), "fields": sorted(names), "rewards": [r.reward for r in records]}))
"""


def test_random_collection_resumes_and_upstream_and_arrow_read_it(
    run_cli, blackjack: str, tmp_path: Path, upstream010_python: str
) -> None:
    out = tmp_path / "bj"
    first = run_cli("collect", blackjack, "-n", "12", "-o", str(out), "--concurrency", "4", "--seed", "7", "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert "collected 12/12 episodes (" in first.stderr and "episodes/s)" in first.stderr  # progress, for people
    assert (summary["collected"], summary["skipped"], summary["episodes"]) == (12, 0, 12)
    rows = _rows(out)
    assert [r["episode_id"] for r in rows] == [f"ep-{i:06d}" for i in range(12)]
    assert all(r["metrics"]["status"] == "done" and r["tool_trace"] for r in rows)
    assert {json.loads(t["arguments"])["action"] for r in rows for t in r["tool_trace"]} <= {"hit", "stand"}
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["env_base_url"] == blackjack and meta["provider"] == "random" and meta["num_episodes_requested"] == 12

    # A crash: the last rows lost, one cut mid-line. Resuming plays exactly those, with their seeds.
    lines = (out / "results.jsonl").read_bytes().splitlines(keepends=True)
    (out / "results.jsonl").write_bytes(b"".join(lines[:9]) + lines[9][:25])
    again = run_cli("collect", blackjack, "-n", "14", "-o", str(out), "--concurrency", "4", "--seed", "7", "--json")
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["collected"], json.loads(again.stdout)["skipped"]) == (5, 9)
    resumed = {r["episode_id"]: r for r in _rows(out)}
    assert sorted(resumed) == [f"ep-{i:06d}" for i in range(14)] and len(_rows(out)) == 14
    for before in rows[9:]:
        after = resumed[before["episode_id"]]
        assert (after["messages"], after["reward"], after["task"]) == (
            before["messages"],
            before["reward"],
            before["task"],
        )
    refused = run_cli("collect", blackjack, "-n", "2", "-o", str(out), "--no-resume")
    assert refused.returncode == 2 and "already holds 14 episodes" in refused.stderr

    read = subprocess.run(
        [upstream010_python, "-c", _UPSTREAM_READER, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert read.returncode == 0, read.stderr[-3000:]
    upstream = json.loads(read.stdout.strip().splitlines()[-1])
    assert upstream["ids"] == sorted(resumed)
    assert set(upstream["fields"]) == set(rows[0])  # exactly upstream's record, no more, no less
    assert sorted(upstream["rewards"]) == sorted(r["reward"] for r in resumed.values())

    import pyarrow.json

    table = pyarrow.json.read_json(out / "results.jsonl")
    assert table.num_rows == 14 and set(table.column_names) == set(rows[0])


def test_openai_policy_collects_and_pushes_a_dataset(run_cli, blackjack: str, tmp_path: Path, hf_hub) -> None:
    out = tmp_path / "llm"
    with serve_app(openai_standin()) as llm:
        done = run_cli(
            *("collect", blackjack, "-n", "6", "-o", str(out), "--policy", "openai", "--model", "tiny-blackjack"),
            *("--base-url", f"{llm}/v1", "--api-key", "test-key", "--push", "alice/bj-rollouts", "--json"),
            env=hf_hub.client_env(),
        )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["episodes"] == 6 and summary["errors"] == 0 and summary["pushed"].endswith("alice/bj-rollouts")
    rows = _rows(out)
    # The stand-in answers "hit" under 17 and "stand" otherwise: its words became the actions.
    answers = [m["content"] for r in rows for m in r["messages"] if m["role"] == "assistant"]
    assert answers and set(answers) <= {"hit", "stand"}

    from huggingface_hub import HfApi

    api = HfApi(endpoint=hf_hub.url, token=hf_hub.token)
    files = set(api.list_repo_files("alice/bj-rollouts", repo_type="dataset"))
    assert {"README.md", "results.jsonl", "metadata.json"} <= files
    pulled = Path(api.hf_hub_download("alice/bj-rollouts", "results.jsonl", repo_type="dataset", cache_dir=tmp_path))
    assert pulled.read_bytes() == (out / "results.jsonl").read_bytes()
    card = Path(api.hf_hub_download("alice/bj-rollouts", "README.md", repo_type="dataset", cache_dir=tmp_path))
    assert "path: results.jsonl" in card.read_text()


def test_policies_that_need_finite_actions_say_so_on_a_free_form_env(run_cli, echo_app, tmp_path: Path) -> None:
    with serve_app(echo_app) as echo:
        done = run_cli("collect", echo, "-n", "2", "-o", str(tmp_path / "e"), "--policy", "scripted")
    assert done.returncode == 2 and "free-form" in done.stderr and "OpenAI-compatible" in done.stderr
    missing = run_cli("collect", "http://127.0.0.1:9", "-o", str(tmp_path / "x"), "--policy", "openai")
    assert missing.returncode == 2 and "--model and --base-url" in missing.stderr


def test_a_terminal_gets_a_progress_bar_with_the_rate(run_cli, blackjack: str, tmp_path: Path) -> None:
    done = run_cli(
        "collect", blackjack, "-n", "3", "-o", str(tmp_path / "bar"), env={"OPENENV_COLOR": "always", "NO_COLOR": ""}
    )
    assert done.returncode == 0, done.stderr
    assert "collecting" in done.stdout and "3/3" in done.stdout and "episodes/s" in done.stdout
    assert "3 episodes collected, 0 already there" in done.stdout
