"""Playing in the website stays quick: benchmarks/play_latency.py runs (a tiny size, in Chromium;
its numbers are not asserted: not a timed test), a step is one round trip to the Hub, and the
actions table drawn at every step does not grow with the episode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hub_service.ui import views
from tests.test_benchmarks import _run


@pytest.mark.slow
@pytest.mark.pages
def test_the_play_latency_benchmark_plays_with_keys_clicks_and_forms_one_round_trip_a_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_OFFLINE", "1")  # env venvs come from uv's cache (scripts/bootstrap fills it)
    doc = _run("play_latency", "--steps 3 --envs grid_world_env,echo_env", tmp_path=tmp_path, timeout=300)
    envs = doc["results"]["envs"]
    assert set(envs) == {"grid_world_env", "echo_env"}
    for env, by_width in envs.items():
        assert set(by_width) == {"390", "1280"}
        for width, run in by_width.items():
            assert run["steps"] == 3 and len(run["latencies_ms"]) == 3, (env, width)
            assert 0 < run["p50_ms"] <= run["p90_ms"] <= run["p99_ms"], (env, width, run)
            assert run["first_p50_ms"] > 0 and run["last_p50_ms"] > 0
            # What the visitor waits on: one request to the Hub per step (a queue join and an
            # event stream before: two, each a round trip and work in the page).
            assert run["requests_per_step"] == 1.0, (env, width, run["requests_per_step"])
    # As a visitor plays: arrow keys on a desktop, taps on a phone, the form for free-form actions.
    assert envs["grid_world_env"]["1280"]["inputs"] == {"key": 3}
    assert envs["grid_world_env"]["390"]["inputs"] == {"click": 3}
    assert envs["echo_env"]["1280"]["inputs"] == {"form": 3}
    assert doc["results"]["worst_p50_ms"] == max(r["p50_ms"] for w in envs.values() for r in w.values())


def test_the_actions_table_shows_the_latest_actions_and_says_how_many_earlier_are_not_shown() -> None:
    history = [{"action": {"move": i}, "reward": 0.0, "done": False} for i in range(1, 251)]
    table = views.history_table(history)
    rows = re.findall(r"<tr><td>(\d+)</td>", table)
    assert len(rows) == views.HISTORY_SHOWN == 100  # the same size at step 250 as at step 100
    assert rows[0] == "151" and rows[-1] == "250"  # numbered as played
    assert "The first 150 actions of this episode are not shown." in table
    short = views.history_table(history[:7])
    assert re.findall(r"<tr><td>(\d+)</td>", short) == [str(i) for i in range(1, 8)]
    assert "not shown" not in short
