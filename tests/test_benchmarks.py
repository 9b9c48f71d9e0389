"""The benchmark scripts still run (tiny durations; the numbers are not asserted: not a timed test)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.servers import ROOT


@pytest.mark.slow
def test_step_throughput_benchmark_runs(upstream_python: str) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "step_throughput.py"), "--seconds", "0.3", "--rounds", "1",
         "--sessions", "1", "4", "--idle", "50", "--upstream-python", upstream_python, "--json"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    for stack in ("ceiling", "upstream", "ours"):
        for n in ("1", "4"):
            assert report["throughput"][stack][n]["steps_per_s"] > 0
    assert report["idle_sessions"]["sessions"] == 50
    assert report["idle_sessions"]["threads_after"] < 50


@pytest.mark.slow
def test_rollouts_benchmark_runs(upstream_python: str) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "rollouts.py"), "--seconds", "0.3", "--rounds", "1",
         "--sessions", "1", "4", "--upstream-python", upstream_python, "--json"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    for stack in ("engine", "ours", "upstream"):
        for n in ("1", "4"):
            row = report["episodes_per_s"][stack][n]
            assert row["episodes_per_s"] > 0
            assert 1.0 <= row["steps_per_episode"] < 3.0  # the same game and policy on every stack
    assert set(report["ratios"]) == {"1", "4"}


@pytest.mark.docker
def test_cold_start_benchmark_runs(upstream_python: str) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cold_start.py"), "--rounds", "1", "--pool-sizes", "1,2",
         "--upstream-python", upstream_python, "--json"],
        capture_output=True, text=True, timeout=1200, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert set(report["medians_s"]) == {
        "upstream client, upstream image", "ours, our image", "ours, upstream image",
        "floor, our image", "floor, upstream image", "ours, process (venv cached)",
    }
    assert all(s > 0 for s in report["medians_s"].values())
    assert [(p["size"], p["network"]) for p in report["pools"]] == [(1, "bridge"), (1, "host"), (2, "bridge"), (2, "host")]


@pytest.mark.slow
def test_hub_benchmark_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "hub.py"), "--spaces", "300", "--page-size", "100", "--search-rounds", "2", "--no-build", "--json"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["index"]["jobs_created"] == 300 and report["index"]["reindex_jobs"] == 0
    assert report["index"]["full_index_requests"] <= report["index"]["request_budget"]
    assert report["search"]["requests"] > 0
