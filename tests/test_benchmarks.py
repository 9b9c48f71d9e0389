"""The benchmark scripts still run (tiny durations; the numbers are not asserted: not a timed test).

Each short run writes its results document to a temporary path, never over the published files in
benchmarks/results/ (tests/test_benchmark_tables.py checks those).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import ROOT

BENCH = ROOT / "benchmarks"


def _run(
    name: str, settings: str, *, tmp_path: Path, upstream: str | None = None, timeout: float = 600
) -> dict[str, Any]:
    """Run benchmarks/NAME.py with `settings` (and upstream's python); it must exit 0 and write a valid results document."""
    args = [*settings.split(), *(["--upstream-python", upstream] if upstream else [])]
    output = tmp_path / f"{name}.json"
    published = BENCH / "results" / f"{name}.json"
    before = published.read_bytes() if published.exists() else None
    out = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *args, "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (published.read_bytes() if published.exists() else None) == before, (
        "a test run overwrote the published results"
    )
    doc = json.loads(output.read_text())
    assert doc["benchmark"] == name
    machine = doc["machine"]
    assert (
        machine["cores"] >= 1 and machine["cpu_model"] and machine["command"].startswith(f"python benchmarks/{name}.py")
    )
    loops = {loop for sides in machine["event_loops"].values() for loop in sides.values() if loop is not None}
    assert loops == {"uvloop"}, machine["event_loops"]
    return doc


@pytest.mark.slow
def test_step_throughput_benchmark_runs(upstream_python: str, tmp_path: Path) -> None:
    doc = _run(
        "step_throughput",
        "--seconds 0.3 --rounds 1 --sessions 1 4 --idle 50",
        upstream=upstream_python,
        tmp_path=tmp_path,
    )
    report = doc["results"]
    for stack in ("limit", "ceiling", "upstream", "upstream_equal", "ours"):
        for n in ("1", "4"):
            assert report["throughput"][stack][n]["steps_per_s"] > 0
        assert doc["machine"]["event_loops"][stack] == {"client": "uvloop", "server": "uvloop"}
    assert set(report["ratios"]["4"]) == {
        "ours_vs_upstream",
        "ours_vs_upstream_equal",
        "ours_vs_ceiling",
        "ours_vs_limit",
    }
    # The contest with equal transports is named in the file: upstream's server on our settings.
    assert "--http h11" in report["stacks"]["upstream"]["server"]
    assert "--ws-per-message-deflate false" in report["stacks"]["upstream_equal"]["server"]
    assert report["idle_sessions"]["sessions"] == 50
    assert report["idle_sessions"]["threads_after"] < 50
    assert doc["machine"]["packages"]["upstream"]["openenv-core"] == "0.3.0"


@pytest.mark.slow
def test_step_commits_benchmark_runs(upstream_python: str, tmp_path: Path) -> None:
    doc = _run(
        "step_commits",
        "--commits HEAD --sessions 2 --seconds 0.2 --rounds 1",
        upstream=upstream_python,
        tmp_path=tmp_path,
    )
    report = doc["results"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    label = f"ours@{head.stdout.strip()[:7]}"
    assert report["commits"] == {label: head.stdout.strip()}
    for stack in ("upstream", label):
        row = report["by_stack"][stack]["2"]
        assert row["steps_per_s"] > 0 and row["server_cpu_us_per_step"] > 0 and row["client_cpu_us_per_step"] > 0
    assert report["ours_vs_upstream"][label]["2"] > 0


@pytest.mark.slow
def test_rollouts_benchmark_runs(upstream_python: str, tmp_path: Path) -> None:
    doc = _run("rollouts", "--seconds 0.3 --rounds 1 --sessions 1 4", upstream=upstream_python, tmp_path=tmp_path)
    report = doc["results"]
    for stack in ("engine", "ours", "upstream", "upstream_equal"):
        for n in ("1", "4"):
            row = report["episodes_per_s"][stack][n]
            assert row["episodes_per_s"] > 0
            assert 1.0 <= row["steps_per_episode"] < 3.0  # the same game and policy on every stack
        assert doc["machine"]["event_loops"][stack] == {"client": "uvloop", "server": "uvloop"}
    assert set(report["ratios"]) == {"1", "4"}


@pytest.mark.slow
def test_sessions_scale_benchmark_runs(upstream_python: str, tmp_path: Path) -> None:
    doc = _run(
        "sessions_scale",
        "--sizes 24 --client-sizes 12 --steps 3 --rounds 1 --cap 60",
        upstream=upstream_python,
        tmp_path=tmp_path,
    )
    report = doc["results"]
    contestants = {"servers": (("upstream", "upstream_equal", "ours"), 24), "clients": (("upstream", "ours"), 12)}
    for part, (names, n) in contestants.items():
        for name in names:
            run = report[part][name][str(n)]
            assert run["success_rate"] == 1.0 and run["failures"] == {}, run
            assert run["succeeded"] == run["connected"] == n and run["steps"] == 3 * n
            assert run["steps_per_s"] > 0 and run["connect_p99_ms"] >= run["connect_p50_ms"] > 0
            assert run["server_peak_rss_mb"] > 10 and run["server_cpu_s"] > 0
            assert doc["machine"]["event_loops"][f"{part}: {name}"] == {"client": "uvloop", "server": "uvloop"}
        assert set(report["ratios"][part]) == {str(n)}
    # One driver for every server; each client against the same server (ours).
    assert {s["client"] for s in report["stacks"]["servers"].values()} == {"neutral"}
    assert {s["server"] for s in report["stacks"]["clients"].values()} == {
        report["stacks"]["servers"]["ours"]["server"]
    }
    assert report["open_files_limit"] >= 1024
    assert doc["machine"]["packages"]["upstream"]["openenv-core"] == "0.3.0"


@pytest.mark.slow
def test_cli_latency_benchmark_runs(upstream_python: str, upstream010_python: str, tmp_path: Path) -> None:
    doc = _run("cli_latency", "--rounds 1", tmp_path=tmp_path)
    medians = doc["results"]["median_ms"]
    assert set(medians) == {
        f"{side} {case}" for side in ("ours", "upstream") for case in ("--help", "validate echo_env", "validate --url")
    } | {"upstream 0.10.0 validate --level static"}
    assert all(ms > 0 for ms in medians.values())
    assert any("uv.lock" in added for added in doc["results"]["added_to_the_copy"])


@pytest.mark.slow
def test_env_steps_benchmark_runs(tmp_path: Path) -> None:
    doc = _run("env_steps", "--seconds 0.2", tmp_path=tmp_path)
    assert doc["results"]["steps"]["blackjack"]["4"]["steps_per_s"] > 0


@pytest.mark.slow
def test_imported_steps_benchmark_runs(tmp_path: Path) -> None:
    doc = _run("imported_steps", "--seconds 0.3 --rounds 1 --sessions 1", tmp_path=tmp_path)
    steps = doc["results"]["steps"]
    assert steps["imported"]["1"]["steps_per_s"] > 0 and steps["hand_written"]["1"]["steps_per_s"] > 0
    assert doc["results"]["ratios"]["1"] > 0


@pytest.mark.slow
def test_forks_benchmark_runs(tmp_path: Path) -> None:
    doc = _run("forks", "--rounds 3 --envs blackjack chess", tmp_path=tmp_path)
    assert doc["results"]["children"] == 8
    for env in ("blackjack", "chess"):
        timings = doc["results"]["envs"][env]
        assert set(timings) == {"snapshot", "restore", "fork_server", "fork_connected"}
        assert all(t["rounds"] == 3 and t["p50_ms"] > 0 for t in timings.values())


@pytest.mark.docker
def test_cold_start_benchmark_runs(upstream_python: str, tmp_path: Path) -> None:
    doc = _run("cold_start", "--rounds 1 --pool-sizes 1,2", upstream=upstream_python, tmp_path=tmp_path, timeout=1200)
    report = doc["results"]
    assert set(report["medians_s"]) == {
        "upstream client, upstream image",
        "ours, our image",
        "ours, upstream image",
        "floor, our image",
        "floor, upstream image",
        "ours, process (venv cached)",
    }
    assert all(s > 0 for s in report["medians_s"].values())
    assert [(p["size"], p["network"]) for p in report["pools"]] == [
        (1, "bridge"),
        (1, "host"),
        (2, "bridge"),
        (2, "host"),
    ]
    assert report["images"]["uvloop"]["our image"] == report["images"]["uvloop"]["upstream image"]


@pytest.mark.slow
def test_hub_benchmark_runs(tmp_path: Path) -> None:
    doc = _run("hub", "--spaces 300 --page-size 100 --search-rounds 2 --no-build", tmp_path=tmp_path)
    report = doc["results"]
    assert report["index"]["jobs_created"] == 300 and report["index"]["reindex_jobs"] == 0
    assert report["index"]["full_index_requests"] <= report["index"]["request_budget"]
    assert report["search"]["requests"] > 0


@pytest.mark.slow
def test_crawl_benchmark_runs(tmp_path: Path) -> None:
    doc = _run("crawl", "--spaces 300 --changes 20 --page-size 100", tmp_path=tmp_path)
    r = doc["results"]
    assert (r["full_crawl_pages"], r["full_crawl_jobs"]) == (3, 300)
    assert (r["changes_found"], r["changes_jobs"]) == (20, 20) and r["changes_pages"] < r["full_crawl_pages"]


@pytest.mark.docker
@pytest.mark.slow
def test_hub_benchmark_runs_the_pipeline_on_two_engines_sharing_one_queue(tmp_path: Path) -> None:
    from tests.support.systems import require_system

    second, base = os.environ.get("OPENENV_TEST_DOCKER2_TCP"), os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not second or not base:
        require_system("second Docker engine", "OPENENV_TEST_DOCKER2_TCP or OPENENV_TEST_BASE_IMAGE is not set")
    doc = _run(
        "hub",
        f"--parts engines --engine-envs echo_env --engine-copies 2 --engine-configs AB --light --no-warm-up "
        f"--second-engine {second}",
        tmp_path=tmp_path,
    )
    run = doc["results"]["engines"]["configs"]["AB"]
    assert run["passed"] == run["revisions"] == 2 and run["revisions_per_hour"] > 0
    assert run["per_engine"] == {"A": 1, "B": 1}  # each engine's worker took one revision from the queue
    assert (run["doubled"], run["build_and_smoke_apart"], run["image_elsewhere"]) == (0, 0, 0)


@pytest.mark.slow
def test_hub_load_benchmark_runs(tmp_path: Path) -> None:
    doc = _run("hub_load", "--envs 200 --concurrency 4 --seconds 0.5", tmp_path=tmp_path)
    (run,) = doc["results"]["runs"]
    assert (run["envs"], run["database"]) == (200, "sqlite")
    assert all(e["requests_per_s"] > 0 and e["non_2xx"] == 0 for e in run["endpoints"].values())


@pytest.mark.slow
def test_catalog_snapshot_benchmark_runs(upstream010_python: str, tmp_path: Path) -> None:
    settings = "--envs 300 --upstream-workers 1"
    doc = _run("catalog_snapshot", settings, tmp_path=tmp_path, upstream=upstream010_python)
    report = doc["results"]
    assert report["ours_envs"] == report["read"]["envs"] == 300 and report["shards"] == report["read"]["shards"] == 1
    assert report["read"]["upstream_openenv"] == "0.10.0" and report["read"]["seconds"] > 0


@pytest.mark.slow
def test_live_index_benchmark_runs(tmp_path: Path) -> None:
    doc = _run("live", "--spaces 120 --page-size 50 --webhooks 10", tmp_path=tmp_path)
    report = doc["results"]
    assert report["webhook"]["receive"]["n"] == 10 and report["end_to_end"]["n"] == 10
    assert report["health"]["poll"]["requests"] == report["health"]["poll"]["request_budget"] == 3
    assert report["health"]["per_space"]["requests"] == 120


# -- the harness: no silent fall-back, no hidden failure --------------------------------------------


def test_a_driver_without_uvloop_fails_instead_of_falling_back_to_asyncio() -> None:
    hide = (
        "import runpy, sys; sys.modules['uvloop'] = None; "  # `import uvloop` now raises ImportError
        f"sys.argv = [{str(BENCH / '_drivers.py')!r}, 'picows', 'http://127.0.0.1:9', '1', '0.1']; "
        f"sys.path.insert(0, {str(BENCH)!r}); runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    out = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60, cwd=BENCH)
    assert out.returncode == 1
    assert "has no uvloop" in out.stderr and out.stdout == ""


def test_a_server_that_exits_fails_the_benchmark_with_its_output(tmp_path: Path) -> None:
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); from _harness import serve, entry\n"
        "def main():\n"
        "    with serve([sys.executable, '-c', 'import sys; sys.exit(\"port in use, say\")'], '.'):\n"
        "        print('timed something')\n"
        "entry(main)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 1
    assert "did not come up" in out.stderr and "exited with 1" in out.stderr and "port in use, say" in out.stderr
    assert "timed something" not in out.stdout


def test_upstream_on_our_transport_settings_really_runs_without_compression(upstream_python: str) -> None:
    """The equal-transport contest claims what its server negotiates: a client offering per-message
    compression gets it from upstream's server on uvicorn's defaults, and not on our settings."""
    code = (
        "import asyncio, sys; sys.path.insert(0, 'benchmarks')\n"
        "from _harness import serve, upstream_stack\n"
        "from websockets.asyncio.client import connect\n"
        "async def offered(url):\n"
        "    async with connect(url.replace('http', 'ws', 1) + '/ws', compression='deflate') as ws:\n"
        "        return ws.response.headers.get('Sec-WebSocket-Extensions') or 'none'\n"
        "for transport in ('defaults', 'ours'):\n"
        f"    spec = upstream_stack({upstream_python!r}, '_upstream_echo', transport)\n"
        "    with serve(spec['server'], spec['cwd'], spec['env']) as srv:\n"
        "        print(transport, asyncio.run(offered(srv.url)), ' '.join(spec['server'][3:]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["defaults"].startswith("permessage-deflate"), lines
    assert lines["ours"].startswith("none ") and "--http httptools" in lines["ours"], lines


@pytest.mark.docker
def test_sandbox_runtime_benchmark_runs(tmp_path: Path) -> None:
    from tests.support.systems import require_runsc

    require_runsc()
    doc = _run("sandbox_runtime", "--rounds 1 --steps 20", tmp_path=tmp_path)
    for runtime in ("runc", "runsc"):
        result = doc["results"][runtime]
        assert result["cold_start"]["n"] == 1 and result["step"]["n"] == 20 and result["step"]["p50_ms"] > 0


@pytest.mark.slow
def test_hub_lane_benchmark_runs(tmp_path: Path) -> None:
    # 16 episodes a policy (the Hub's default): at 5, grid_world_env's tiers overlap, and the check
    # rightly says it cannot tell (skip)
    doc = _run("hub_lane", "--envs echo_env,grid_world_env --episodes 16", tmp_path=tmp_path)
    envs = doc["results"]["envs"]
    assert set(envs) == {"echo_env", "grid_world_env"} and doc["results"]["settings"]["statistical_episodes"] == 16
    for row in envs.values():
        assert row["seconds"] > 0 and len([k for k in row["hub_lane"] if k.startswith("statistical.")]) == 7
    assert envs["grid_world_env"]["hub_lane"]["statistical.difficulty_separation"] in ("pass", "fail")  # decided
