"""The published performance tables match the results files they come from; each file says where
and how its numbers were measured, and every contestant in it ran on the same event loop.
Fast: reads the files, runs no benchmark."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import ROOT

BENCH = ROOT / "benchmarks"
RESULTS = sorted((BENCH / "results").glob("*.json"))
PAGES = [ROOT / "README.md", ROOT / "docs" / "providers.md", ROOT / "docs" / "security.md"]
# Benchmarks with upstream openenv-core among their contestants.
UPSTREAM_CONTESTANTS = {"step_throughput", "rollouts", "cli_latency", "cold_start", "sessions_scale"}


def _tables(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "tables.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_the_pages_match_the_results_files() -> None:
    out = _tables("--check")
    assert out.returncode == 0, f"{out.stderr}\n{out.stdout[-4000:]}"


def test_every_table_names_a_benchmark_and_every_results_file_has_a_table() -> None:
    blocks = [name for page in PAGES for name in re.findall(r"<!-- bench:([a-z_]+) -->", page.read_text())]
    assert blocks, "no <!-- bench:NAME --> blocks in README.md, docs/providers.md or docs/security.md"
    assert len(blocks) == len(set(blocks)), f"a benchmark's table appears twice: {blocks}"
    for name in blocks:
        assert (BENCH / f"{name}.py").is_file(), f"the block bench:{name} names no benchmark"
    assert {p.stem for p in RESULTS} <= set(blocks)
    assert {"step_throughput", "rollouts", "cli_latency"} <= set(blocks)


def test_check_says_what_differs_when_a_number_changes(tmp_path: Path) -> None:
    source = BENCH / "results" / "step_throughput.json"
    if not source.exists():
        pytest.skip("no step_throughput results yet")
    for path in RESULTS:
        shutil.copy(path, tmp_path / path.name)
    doc = _load(source)
    doc["results"]["throughput"]["ours"][str(doc["machine"]["settings"]["sessions"][0])]["steps_per_s"] = 123457
    (tmp_path / source.name).write_text(json.dumps(doc))
    out = _tables("--check", "--results", tmp_path)
    assert out.returncode == 1
    assert "+| **ours** (echo_env + `EnvClient`) | **123,457**" in out.stdout
    assert "README.md differ" in out.stderr


@pytest.mark.parametrize(("start", "end", "noisy"), [(1.2, 1.9, False), (1.2, 2.4, True), (3.9, 2.5, True)])
def test_a_run_whose_load_moved_is_marked_noisy(tmp_path: Path, start: float, end: float, noisy: bool) -> None:
    for path in RESULTS:
        shutil.copy(path, tmp_path / path.name)
    source = BENCH / "results" / "step_throughput.json"
    doc = _load(source)
    doc["machine"]["load_avg_1m"] = {"start": start, "end": end}
    (tmp_path / source.name).write_text(json.dumps(doc))
    was_noisy = (
        abs(_load(source)["machine"]["load_avg_1m"]["end"] - _load(source)["machine"]["load_avg_1m"]["start"]) > 1
    )
    out = _tables("--check", "--results", tmp_path)
    marked = [line for line in out.stdout.splitlines() if line.startswith("+") and "Noisy run" in line]
    if noisy:
        assert marked and f"moved from {start:.1f} to {end:.1f}" in marked[0], out.stdout[-2000:]
    else:
        assert not marked, out.stdout[-2000:]
        assert out.returncode == (1 if was_noisy else 0), out.stdout[-2000:]


@pytest.mark.parametrize("path", RESULTS, ids=[p.stem for p in RESULTS])
def test_a_results_file_describes_the_machine_and_the_run(path: Path) -> None:
    doc = _load(path)
    assert doc["benchmark"] == path.stem and doc["results"]
    m = doc["machine"]
    for key in ("cpu_model", "os", "kernel", "python", "date", "settings", "loop"):
        assert m.get(key), f"{path.name}: machine.{key} is missing"
    assert m["cores"] >= 1 and m["memory_gib"] > 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["date"])
    assert m["command"].startswith(f"python benchmarks/{path.stem}.py")
    assert re.fullmatch(r"[0-9a-f]{40}", m["packages"]["ours"]["git_commit"])
    assert m["packages"]["ours"]["uvloop"]
    if path.stem in UPSTREAM_CONTESTANTS:
        assert m["packages"]["upstream"]["openenv-core"] == "0.3.0"
        assert m["packages"]["upstream"]["uvloop"] == m["packages"]["ours"]["uvloop"]


@pytest.mark.parametrize("path", RESULTS, ids=[p.stem for p in RESULTS])
def test_every_contestant_ran_on_the_same_event_loop(path: Path) -> None:
    m = _load(path)["machine"]
    assert m["event_loops"], f"{path.name} records no contestant"
    for name, sides in m["event_loops"].items():
        assert set(sides) <= {"client", "server"} and any(sides.values()), f"{path.name}: {name}: {sides}"
    # None: that side runs no asyncio loop (a blocking client, a command-line tool, wrk)
    loops = {loop for sides in m["event_loops"].values() for loop in sides.values() if loop is not None}
    assert loops == {m["loop"]}, f"{path.name}: contestants ran on {loops}"
