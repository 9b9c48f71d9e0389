"""The published performance tables, generated from the results files the benchmarks write.

    python benchmarks/tables.py           # rewrite the tables in README.md, docs/providers.md and docs/security.md
    python benchmarks/tables.py --check   # exit 1, showing the difference, when a page is stale

A table lives between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->` in a page and is rendered
from benchmarks/results/NAME.json (which `python benchmarks/NAME.py` writes); it states the
machine, the date, the settings and the software the numbers come from. `--check` also fails
when a results file has no table in any page. `bash benchmarks/run_all.sh` reruns every benchmark
and then this script.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _results

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", ROOT / "docs" / "providers.md", ROOT / "docs" / "security.md")
BLOCK = re.compile(
    r"(?P<open><!-- bench:(?P<name>[a-z_]+) -->\n)(?P<body>.*?)(?P<close><!-- /bench:(?P=name) -->)", re.S
)

Doc = dict[str, Any]
X = "\u00d7"  # the multiplication sign the README writes ratios with


# -- formatting -----------------------------------------------------------------------------------


def _n(value: float) -> str:
    return f"{round(value):,}"


def _duration(ms: float) -> str:
    """35 ms, 0.97 s, 6.9 s, 12 s: two significant digits, as a reader compares them."""
    if ms < 100:
        return f"{ms:.0f} ms"
    s = ms / 1000
    return f"{s:.2f} s" if s < 1 else f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}{X}"


def _sessions(n: int | str) -> str:
    return f"{n} session" if int(n) == 1 else f"{n} sessions"


def _rounds(settings: dict[str, Any]) -> str:
    rounds = settings["rounds"]
    return f"median of {rounds} round{'s' if rounds != 1 else ''}"


def _provenance(doc: Doc, what: str, loop: str | None = None) -> str:
    """One line: which script with which settings, the machine, the date, the versions, the loops."""
    m = doc["machine"]
    ours = m["packages"]["ours"]
    commit = (ours.get("git_commit") or "unknown")[:7] + (" with local changes" if ours.get("git_dirty") else "")
    versions = f"ours at {commit}"
    upstream = m["packages"].get("upstream")
    if upstream:
        versions += f", upstream openenv-core {upstream['openenv-core']}"
    if loop is None:
        loops = sorted({found for sides in m["event_loops"].values() for found in sides.values() if found})
        loop = f"every event loop {loops[0]}" if len(loops) == 1 else f"event loops {', '.join(loops)}"
    memory = f", {m['memory_gib']:g} GiB" if m.get("memory_gib") else ""
    return (
        f"<sub>`{m['command']}` ({what}; {loop}): {m['cores']} cores ({m['cpu_model']}){memory}, {m['os']}, "
        f"Python {m['python']}, {versions}; {m['date'][:10]}.{_noise(m)}</sub>"
    )


NOISY_LOAD_MOVE = 1.0  # a 1-minute load average that moved more than this during a run marks it noisy


def _noise(m: dict[str, Any]) -> str:
    """' **Noisy run** ...' when the machine's load moved by more than NOISY_LOAD_MOVE during it."""
    load = m.get("load_avg_1m")
    if not load or abs(load["end"] - load["start"]) <= NOISY_LOAD_MOVE:
        return ""
    return (
        f" **Noisy run:** the 1-minute load average moved from {load['start']:.1f} to {load['end']:.1f} "
        "during it (the benchmark's own work counts too)."
    )


def _table(intro: str, header: list[str], rows: list[str], provenance: str) -> str:
    """An introducing line, a markdown table, and the provenance line under it."""
    head = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    return "\n".join([intro, "", *head, *rows, "", provenance])


# -- one renderer per benchmark ---------------------------------------------------------------------


TRANSPORTS = (
    "uvicorn's defaults, as upstream's server runs: h11, per-message compression on, a backlog of 2,048. "
    "Our transport settings: httptools, sans-I/O websockets, no compression, the kernel's longest backlog. "
    "The row between puts upstream's server on our settings, so the gap left beside it is the stacks "
    "above the transport (server app and client)."
)


def step_throughput(doc: Doc) -> str:
    r, s = doc["results"], doc["machine"]["settings"]
    levels = [str(n) for n in s["sessions"]]
    t = r["throughput"]
    upstream = doc["machine"]["packages"]["upstream"]["openenv-core"]
    unit = {
        k: [_n(t[k][n]["steps_per_s"]) + (" steps/s" if k == "limit" and i == 0 else "") for i, n in enumerate(levels)]
        for k in ("limit", "ceiling")
    }
    up = [_n(t["upstream"][n]["steps_per_s"]) for n in levels]
    equal = [_n(t["upstream_equal"][n]["steps_per_s"]) for n in levels]
    ours = []
    for i, n in enumerate(levels):
        ratio = r["ratios"][n]
        detail = (
            f"{ratio['ours_vs_upstream']:.1f}{X} upstream, {ratio['ours_vs_upstream_equal']:.1f}{X} on equal transport, "
            f"{ratio['ours_vs_ceiling']:.0%} of ceiling, {ratio['ours_vs_limit']:.0%} of the limit"
            if i == 0
            else f"{ratio['ours_vs_upstream']:.1f}{X}, {ratio['ours_vs_upstream_equal']:.1f}{X}, "
            f"{ratio['ours_vs_ceiling']:.0%}, {ratio['ours_vs_limit']:.0%}"
        )
        ours.append(f"**{_n(t['ours'][n]['steps_per_s'])}** ({detail})")
    lines = [
        "Steps per second, one WebSocket session per client coroutine (`benchmarks/step_throughput.py`):",
        "",
        "| stack | " + " | ".join(_sessions(n) for n in levels) + " |",
        "|---" * (len(levels) + 1) + "|",
        "| limit: the same echo over raw frames, a picows server, no framework | " + " | ".join(unit["limit"]) + " |",
        "| ceiling: bare Starlette WS echo + raw picows client | " + " | ".join(unit["ceiling"]) + " |",
        f"| upstream openenv-core {upstream} + its client, uvicorn's defaults | " + " | ".join(up) + " |",
        f"| upstream openenv-core {upstream} + its client, on our transport settings | " + " | ".join(equal) + " |",
        "| **ours** (echo_env + `EnvClient`) | " + " | ".join(ours) + " |",
        "",
        TRANSPORTS,
        "",
    ]
    idle = r.get("idle_sessions")
    if idle:
        lines += [
            f"{_n(idle['sessions'])} idle sessions cost {idle['kb_per_session']:g} KB of server memory each; the server's "
            f"threads went from {idle['threads_before']} to {idle['threads_after']}.",
            "",
        ]
    lines.append(_provenance(doc, f"{_rounds(s)} of {s['seconds']:g} s, interleaved"))
    return "\n".join(lines)


def rollouts(doc: Doc) -> str:
    r, s = doc["results"], doc["machine"]["settings"]
    levels = [str(n) for n in s["sessions"]]
    e = r["episodes_per_s"]
    up = [_n(e["upstream"][n]["episodes_per_s"]) + (" episodes/s" if i == 0 else "") for i, n in enumerate(levels)]
    equal = [_n(e["upstream_equal"][n]["episodes_per_s"]) for n in levels]
    ours = [_n(e["ours"][n]["episodes_per_s"]) for n in levels]
    engine = []
    for i, n in enumerate(levels):
        ratio = (
            f"{r['ratios'][n]['engine_vs_upstream']:.1f}{X}, {r['ratios'][n]['engine_vs_upstream_equal']:.1f}{X}"
            + (" upstream (defaults, our transport)" if i == len(levels) - 1 else "")
        )
        engine.append(f"**{_n(e['engine'][n]['episodes_per_s'])}** ({ratio})")
    return "\n".join(
        [
            "Rollouts: blackjack episodes per second with a trivial policy, the same game code on both servers "
            "(`benchmarks/rollouts.py`):",
            "",
            "| stack | " + " | ".join(_sessions(n) for n in levels) + " |",
            "|---" * (len(levels) + 1) + "|",
            "| upstream client loop, upstream server, uvicorn's defaults | " + " | ".join(up) + " |",
            "| upstream client loop, upstream server on our transport settings | " + " | ".join(equal) + " |",
            "| our client, hand-written loop | " + " | ".join(ours) + " |",
            "| **`RolloutEngine`** (records, retries, timeouts) | " + " | ".join(engine) + " |",
            "",
            TRANSPORTS,
            "",
            _provenance(doc, f"{_rounds(s)} of {s['seconds']:g} s, interleaved"),
        ]
    )


def cli_latency(doc: Doc) -> str:
    m, s = doc["results"]["median_ms"], doc["machine"]["settings"]
    return "\n".join(
        [
            f"`openenv --help` answers in {_duration(m['ours --help'])} (upstream's: {_duration(m['upstream --help'])}), "
            f"`openenv validate envs/echo_env` (every static check, the app imported in a child process) in "
            f"{_duration(m['ours validate echo_env'])} (upstream's, which checks far less, on the same folder given the "
            f"`uv.lock` and entry point it requires: {_duration(m['upstream validate echo_env'])}), and "
            f"`openenv validate --url` (a live episode, 20 timed steps) in {_duration(m['ours validate --url'])} "
            f"(upstream's, against the same server: {_duration(m['upstream validate --url'])}); each a fresh process, every "
            "run checked to succeed (`benchmarks/cli_latency.py`)."
            + (
                f" RFC 008's static level of that folder, ours (all ten static check ids) against upstream 0.10.0's "
                f"(`--level static`, the one it implements): {_duration(m['ours validate echo_env'])} and "
                f"{_duration(m['upstream 0.10.0 validate --level static'])}."
                if "upstream 0.10.0 validate --level static" in m
                else ""
            ),
            "",
            _provenance(
                doc,
                f"{_rounds(s)}, interleaved",
                loop=f"the server on {doc['machine']['event_loops']['ours']['server']}, each CLI as shipped",
            ),
        ]
    )


def cold_start(doc: Doc) -> str:
    r, s = doc["results"], doc["machine"]["settings"]
    med, rounds = r["medians_s"], r["all_s"]

    def paired(a: str, b: str) -> float:
        return sorted(x - y for x, y in zip(rounds[a], rounds[b], strict=True))[len(rounds[a]) // 2]

    up = med["upstream client, upstream image"]
    rows = [
        ("upstream openenv-core 0.3.0 `from_docker_image`, upstream image", f"{up:.2f}"),
        (
            "ours, our echo image (same base image)",
            f"{med['ours, our image']:.2f} ({med['ours, our image'] / up:.0%} of upstream)",
        ),
        ("ours, upstream's image", f"{med['ours, upstream image']:.2f}"),
        (
            "floor (`docker run` + 5 ms /health poll + one reset), our image / upstream image",
            f"{med['floor, our image']:.2f} / {med['floor, upstream image']:.2f}",
        ),
        ("ours, `from_process` with the venv cached", f"{med['ours, process (venv cached)']:.2f}"),
    ]
    pools = "; ".join(
        f"N={p['size']} {p['network']}: {p['seconds']:.2f} s ({_ratio(p['ratio'])} the bound)" for p in r["pools"]
    )
    return "\n".join(
        [
            "| contestant | seconds |",
            "|---|---|",
            *(f"| {name} | {value} |" for name, value in rows),
            "",
            f"Our client is {paired('ours, our image', 'floor, our image'):+.2f} s (our image) and "
            f"{paired('ours, upstream image', 'floor, upstream image'):+.2f} s (upstream image) from each image's floor "
            "(median per-round differences). Pools of our image, against the bound of "
            f"{r['one_start_cpu_s']:.2f} CPU-s per start {X} N ÷ {r['cores']} cores: {pools}.",
            "",
            _provenance(
                doc,
                f"{_rounds(s)}; load average {r['load_avg_1m_at_end']:.1f} after the timed starts, before the pools",
            ),
        ]
    )


def env_steps(doc: Doc) -> str:
    steps, s = doc["results"]["steps"], doc["machine"]["settings"]
    rows = []
    for name, per in steps.items():
        cells = [f"{_n(per[n]['steps_per_s'])} (p50 {per[n]['p50_ms']:.2f} ms)" if n in per else "" for n in ("1", "4")]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return _table(
        "Steps per second of the reference environments, each driven by its typed client with a random policy "
        "(`benchmarks/env_steps.py`):",
        ["env", "1 session", "4 sessions"],
        rows,
        _provenance(doc, f"{s['seconds']:g} s per cell"),
    )


def imported_steps(doc: Doc) -> str:
    r, s = doc["results"], doc["machine"]["settings"]
    levels = [str(n) for n in s["sessions"]]
    labels = {
        "imported": f"imported: `openenv import {r['gymnasium_id']}`, Gymnasium's env behind `openenv.interop.gymnasium`",
        "hand_written": "hand-written: the same game in plain Python (`benchmarks/_cartpole_app.py`)",
    }
    rows = [
        f"| {labels[name]} | "
        + " | ".join(
            f"{_n(r['steps'][name][n]['steps_per_s'])} (p50 {r['steps'][name][n]['p50_ms']:.2f} ms)" for n in levels
        )
        + " |"
        for name in ("imported", "hand_written")
    ]
    ratios = ", ".join(f"{_ratio(r['ratios'][n])} at {_sessions(n)}" for n in levels)
    target = 1 / r["target_ratio"]
    met = all(r["ratios"][n] >= r["target_ratio"] for n in levels)
    return _table(
        f"Steps per second of CartPole imported from Gymnasium beside the same CartPole written by hand, one server "
        f"and one client (`GenericEnvClient`, random pushes) for both (`benchmarks/imported_steps.py`): the imported "
        f"one runs at {ratios} of the hand-written one's rate (target: within {target:g}{X}, "
        f"{'met' if met else '**not met**'}):",
        ["contestant", *(_sessions(n) for n in levels)],
        rows,
        _provenance(doc, f"{_rounds(s)} of {s['seconds']:g} s, interleaved"),
    )


def forks(doc: Doc) -> str:
    res, s = doc["results"], doc["machine"]["settings"]
    rows = []
    for name, t in res["envs"].items():
        cells = [
            f"{t[k]['p50_ms']:.2f} ms (p90 {t[k]['p90_ms']:.1f})"
            for k in ("snapshot", "restore", "fork_server", "fork_connected")
        ]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    n = res["children"]
    return _table(
        f"Snapshots and forks of one mid-episode session, p50 (`benchmarks/forks.py`): a fork makes {n} sessions in one "
        'round trip; "connected" adds a client per child, its WebSocket attached:',
        ["env", "snapshot", "restore", f"fork ×{n}, server", f"fork ×{n}, connected"],
        rows,
        _provenance(doc, f"{s['rounds']} rounds, Atari {s['atari_rounds']}"),
    )


def hub(doc: Doc) -> str:
    r = doc["results"]
    i, q, p = r["index"], r["search"], r["pipeline"]
    if "skipped" in i or "skipped" in q:
        return _failure(f"hub.py's index and search parts did not run ({i.get('skipped') or q.get('skipped')})")
    text = (
        f"The Hub indexes {_n(i['spaces'])} Spaces in {i['full_index_s']:g} s with {i['full_index_requests']} requests "
        f"(budget {i['request_budget']}) and re-indexes them unchanged in {i['reindex_s']:g} s with {i['reindex_jobs']} jobs; "
        f"catalog queries over HTTP answer in {q['p50_ms']:g} ms (p50), {q['p95_ms']:g} ms (p95)"
    )
    if "skipped" in p:
        text += f"; building was not measured ({p['skipped']})."
    else:
        text += (
            f"; echo_env builds in {p['cold']['build_s']:g} s cold, {p['warm']['build_s']:g} s warm, and its smoke test "
            f"takes {p['warm']['smoke_s']:g} s."
        )
        t = p.get("trust")
        if t:
            each = ", ".join(f"{c.replace('_', ' ')} {v:g} s" for c, v in t["checks_s"].items())
            text += (
                f" The trust checks take its smoke test from {t['smoke_off_s']:g} s to {t['smoke_on_s']:g} s "
                f"({each}; the target is at most {t['target_s']:g} s each)."
            )
    lines = [text + " (`benchmarks/hub.py`)"]
    e = r.get("engines")
    if e and "skipped" not in e:
        lines += ["", *_engines_table(e)]
    return "\n".join([*lines, "", _provenance(doc, "SQLite, the local Hub stand-in")])


def _engines_table(e: dict[str, Any]) -> list[str]:
    """The pipeline's throughput per configuration of workers and engines (hub.py's engines part)."""
    names = {"A": "1 engine, 1 worker", "AA": "1 engine, 2 workers", "AB": "2 engines, a worker on each"}
    rows = [
        f"| {names.get(c, c)} | {r['revisions']} | {r['wall_s']:g} s | {_n(r['revisions_per_hour'])} | "
        + ", ".join(f"{k} {v}" for k, v in r["per_engine"].items())
        + f" | {r['doubled']} |"
        for c, r in e["configs"].items()
    ]
    envs = ", ".join(e["envs"])
    light = "; trust checks and RFC 008's statistical level off" if e.get("light") else ""
    return [
        f"The whole pipeline (fetch, validate, build, smoke) on the same work, {len(e['envs'])} bundled envs ({envs}) "
        f"{e['copies']} times each as distinct revisions, with workers sharing one queue; the second engine stands in "
        f"for a second machine but runs on the same {e['cores']} cores{light}:",
        "",
        "| workers | revisions | wall time | env-revisions per hour | revisions per engine | run twice |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def step_commits(doc: Doc) -> str:
    r = doc["results"]
    levels = sorted({int(n) for per in r["by_stack"].values() for n in per})
    header = ["stack", *(f"{_sessions(n)}: steps/s (server CPU per step)" for n in levels)]
    rows = []
    for name, per in r["by_stack"].items():
        cells = []
        for n in levels:
            row = per[str(n)]
            ratio = r["ours_vs_upstream"].get(name, {}).get(str(n))
            versus = f", {_ratio(ratio)} upstream" if ratio is not None else ""
            cells.append(f"{_n(row['steps_per_s'])}{versus} ({row['server_cpu_us_per_step']:g} µs)")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return _table(
        "Our step path at the commits of earlier turns, each commit's own server and client, beside upstream in "
        f"one run ({_rounds(doc['machine']['settings'])}) (`benchmarks/step_commits.py`):",
        header,
        rows,
        _provenance(doc, "the echo env, interleaved rounds"),
    )


def crawl(doc: Doc) -> str:
    r = doc["results"]
    t = r["targets"]
    rows = [
        f"| full crawl of {_n(r['spaces'])} Spaces | {r['full_crawl_s']:g} s | {r['full_crawl_pages']} pages, "
        f"{_n(r['full_crawl_jobs'])} jobs queued | at most {t['full_crawl_s']:g} s |",
        f"| incremental re-index, {r['changes']} Spaces changed | {r['changes_s']:g} s | {r['changes_pages']} pages, "
        f"{r['changes_found']} revisions found | at most {t['changes_s']:g} s |",
    ]
    return _table(
        f"The Hub's crawl of a Hugging Face Hub stand-in over HTTP (listing pages of {_n(r['page_size'])}, the real "
        f"huggingface_hub client, SQLite) (`benchmarks/crawl.py`):",
        ["pass", "wall time", "what it did", "target"],
        rows,
        _provenance(doc, "SQLite, the local Hub stand-in"),
    )


def hub_load(doc: Doc) -> str:
    r = doc["results"]
    # Results written before runs of several sizes and databases held one SQLite run.
    runs = r.get("runs") or [{"envs": r["envs"], "database": "sqlite", "endpoints": r["endpoints"]}]
    targets = r.get("targets", {})
    header = ["endpoint", *(f"{_n(run['envs'])} envs, {run['database']}" for run in runs)]
    if targets:
        header.append("target at 50,000 envs")
    rows = []
    for name in runs[0]["endpoints"]:
        cells = [
            f"{_n(run['endpoints'][name]['requests_per_s'])}/s (p50 {run['endpoints'][name]['p50_ms']:g} ms, "
            f"p99 {run['endpoints'][name]['p99_ms']:g} ms)"
            for run in runs
        ]
        if targets:
            t = targets[name]
            cells.append(f"{_n(t['requests_per_s'])}/s" + (f", p99 at most {t['p99_ms']:g} ms" if t["p99_ms"] else ""))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return _table(
        f"The Hub API under load, one uvicorn process, rate limits on, {r['concurrency']} concurrent clients "
        f"({r['load_tool']}) (`benchmarks/hub_load.py`; issue 49's target on PostgreSQL: within 2{X} of SQLite):",
        header,
        rows,
        _provenance(doc, f"{r['seconds']:g} s per endpoint"),
    )


def catalog_snapshot(doc: Doc) -> str:
    r = doc["results"]
    rows = [
        f"| the index, first asked for a revision (makes and keeps every shard) | {r['index_first_s']:g} s |",
        f"| `openenv discover --hub` (a fresh process: index, every shard, digests, search) | {r['ours_s']:g} s |",
    ]
    read = r.get("read")
    if read:
        rows.insert(
            1,
            f"| upstream {read['upstream_openenv']}'s own `discover` reading every shard the index names "
            f"({read['upstream_workers']} processes; fetching: {read['fetch_s']:g} s) | {read['seconds']:g} s |",
        )
        rows.append(
            f"| importing upstream's CLI, once per process (not counted above) | {read['upstream_cli_import_s']:g} s |"
        )
    return _table(
        f"The catalog snapshot of {_n(r['envs'])} envs in {r['shards']} shards of at most 16 MiB, read "
        "(`benchmarks/catalog_snapshot.py`; issue 49's target: upstream's read at 50,000 envs in at most 5 s):",
        ["what", "seconds"],
        rows,
        _provenance(doc, "SQLite, one uvicorn thread"),
    )


def live(doc: Doc) -> str:
    r = doc["results"]
    w, e2e, h = r["webhook"], r["end_to_end"], r["health"]
    return "\n".join(
        [
            f"A Hub webhook is answered in {w['receive']['p50_ms']:g} ms (p50; p95 {w['receive']['p95_ms']:g} ms), where indexing "
            f"before answering would take {w['inline_index']['p50_ms']:g} ms (p95 {w['inline_index']['p95_ms']:g} ms); the new "
            f"commit is in the catalog {e2e['p50_ms']:g} ms after the webhook (p50); one health poll of {_n(h['poll']['spaces'])} "
            f"Spaces takes {h['poll']['seconds']:g} s and {h['poll']['requests']} requests, against ~{h['per_space']['seconds_for_all']:g} s "
            "reading each Space's runtime (`benchmarks/live.py`).",
            "",
            _provenance(doc, f"{_n(r['spaces'])} Spaces, {w['receive']['n']} webhooks"),
        ]
    )


def play_latency(doc: Doc) -> str:
    r = doc["results"]
    before_doc = _results.load("play_latency", _results.RESULTS_DIR / "before")
    before = before_doc["results"]["envs"] if before_doc else {}
    rows = []
    for env, by_width in r["envs"].items():
        for width, run in by_width.items():
            old = before.get(env, {}).get(width)
            was = (
                f"{_duration(old['p50_ms'])} ({_duration(old['first_p50_ms'])} → {_duration(old['last_p50_ms'])})"
                if old
                else "n/a"
            )
            rows.append(
                f"| {env} | {width} px | {_duration(run['p50_ms'])} | {_duration(run['p90_ms'])} | "
                f"{_duration(run['p99_ms'])} | {_duration(run['first_p50_ms'])} → {_duration(run['last_p50_ms'])} | "
                f"{run.get('requests_per_step', 'n/a')} | {was} |"
            )
    edge = min(run["edge_steps"] for by_width in r["envs"].values() for run in by_width.values())
    table = _table(
        f"The website's play panel in Chromium, from a visitor's key press or click to the env's new picture on "
        f"screen, {_n(r['steps'])} steps per env and window width (`benchmarks/play_latency.py`; issue 50's target: "
        f"p50 at most {r['target_p50_ms']:g} ms everywhere, over the whole run and over its last steps: "
        f"{'met' if r['met'] else '**not met**'}; worst p50 {_duration(r['worst_p50_ms'])}):",
        [
            "env",
            "width",
            "p50",
            "p90",
            "p99",
            f"p50, first → last {edge} steps",
            "requests a step",
            "before: p50 (first → last)",
        ],
        rows,
        _provenance(doc, "a Hub in a uvicorn thread, SQLite, envs as processes; headless Chromium"),
    )
    if before_doc:
        label = before_doc["machine"]["settings"].get("label") or "before: an earlier tree"
        table += "\n\n" + _provenance(before_doc, label)
    return table


def _failure(why: str) -> str:
    """A driver's failure reason, short: "connect: ...timed out..." → "connects timed out"."""
    stage, _, text = why.partition(": ")
    if stage in ("connect", "episode") and ("timed out" in text or "within" in text):
        return f"{stage}s timed out"
    return why


def sessions_scale(doc: Doc) -> str:
    r, s = doc["results"], doc["machine"]["settings"]
    upstream = doc["machine"]["packages"]["upstream"]["openenv-core"]

    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f} ms" if value < 10 else _duration(value)

    def rows(part: str, sizes: list[int], labels: dict[str, str], ratios: dict[str, str]) -> list[str]:
        out = []
        for n in map(str, sizes):
            for name, label in labels.items():
                run = r[part][name][n]
                steps = _n(run["steps_per_s"])
                if name == "ours":
                    shown = [f"{v:.1f}{X} {what}" for key, what in ratios.items() if (v := r["ratios"][part][n][key])]
                    steps = f"**{steps}**" + (f" ({', '.join(shown)})" if shown else "")
                failed = "; ".join(f"{count:,} {_failure(why)}" for why, count in run["failures"].items())
                success = f"{run['success_rate']:.1%}".replace(".0%", "%") + (f" ({failed})" if failed else "")
                out.append(
                    f"| {_n(int(n))} | {label} | {success} | {ms(run['connect_p50_ms'])} / "
                    f"{_duration(run['connect_all_s'] * 1000)} | {steps} | {ms(run['p50_ms'])} / {ms(run['p99_ms'])} | "
                    f"{run['server_peak_rss_mb']:,.0f} MiB |"
                )
        return out

    header = ["sessions", "{}", "succeeded", "connect p50 / all in", "steps/s", "step p50 / p99", "server peak RSS"]
    servers = _table(
        f"Servers: one neutral driver for every server (raw protocol frames over picows, at most 256 handshakes in "
        f"flight, 10 s for each from its own start, 60 s per reply); N sessions on one echo server, then each a reset "
        f"and {s['steps']} steps, all at once; driver and server in separate processes (`benchmarks/sessions_scale.py`):",
        [h.format("server") for h in header],
        rows(
            "servers",
            s["sizes"],
            {
                "upstream": f"upstream openenv-core {upstream}, uvicorn's defaults",
                "upstream_equal": f"upstream openenv-core {upstream}, on our transport settings",
                "ours": "**ours**",
            },
            {"ours_vs_upstream": "upstream", "ours_vs_upstream_equal": "on our transport"},
        ),
        "",
    )
    clients = _table(
        "Clients: each client as it ships, against the same server (ours), N sessions opened at once: ours queues "
        "its handshakes 256 at a time (the wait not counted against its 10 s connect timeout), upstream's opens "
        "all at once (10 s each):",
        [h.format("client") for h in header],
        rows(
            "clients",
            s["client_sizes"],
            {"upstream": f"upstream openenv-core {upstream} `EnvClient`", "ours": "**ours** `EnvClient`"},
            {"ours_vs_upstream": "upstream"},
        ),
        _provenance(
            doc,
            f"{_rounds(s)} up to 1,024 sessions, one run above; a run is cut off after {s['cap']:g} s, "
            f"its unfinished sessions failed; load average {doc['machine']['load_avg_1m']['start']:.1f} at the start",
        ),
    )
    return servers.rstrip() + "\n\n" + clients


def sandbox_runtime(doc: Doc) -> str:
    res, s = doc["results"], doc["machine"]["settings"]
    runc, runsc = res["runc"], res["runsc"]
    rows = [
        f"| {name} | {r['cold_start']['p50_s']:.2f} s | {r['step']['p50_ms']:.2f} ms (p90 {r['step']['p90_ms']:.2f}) |"
        for name, r in (("runc", runc), ("runsc (gVisor, ptrace platform)", runsc))
    ]
    rows.append(
        f"| runsc / runc | {runsc['cold_start']['p50_s'] / runc['cold_start']['p50_s']:.1f}{X} | "
        f"{runsc['step']['p50_ms'] / runc['step']['p50_ms']:.1f}{X} |"
    )
    return _table(
        "echo_env started the way the Hub starts untrusted code, under each runtime "
        "(`benchmarks/sandbox_runtime.py`; cold start: the start call to the first reset reply; step: one round trip):",
        ["runtime", "cold start (p50)", "step (p50)"],
        rows,
        _provenance(
            doc,
            f"{_rounds(s)}, interleaved, {s['steps']} steps a round",
        ),
    )


def hub_lane(doc: Doc) -> str:
    r, s = doc["results"], doc["results"]["settings"]
    rows = []
    for env, row in r["envs"].items():
        hub = row["hub_lane"]
        ran = sum(1 for k, v in hub.items() if k.startswith("statistical.") and v != "skip")
        failing = ", ".join(f"`{k}`" for k in row["not_passing"]) or "none"
        rows.append(f"| {env} | {_duration(row['seconds'] * 1000)} | {ran} of 7 | {failing} | {row['verdict']} |")
    rows.append(f"| all seven | {_duration(r['total_s'] * 1000)} | | | |")
    return _table(
        "RFC 008's hub lane with its statistical level, as the Hub's smoke stage runs it, on each bundled env "
        f"served as a process ({s['statistical_episodes']} episodes a policy, {s['statistical_episode_steps']} "
        "steps an episode at most; `benchmarks/hub_lane.py`; time: the whole report against the running server):",
        ["env", "hub lane", "statistical checks decided", "checks not passing", "verdict"],
        rows,
        _provenance(
            doc, "one run, each env in turn", loop=f"the servers on {doc['machine']['event_loops']['ours']['server']}"
        ),
    )


RENDERERS: dict[str, Callable[[Doc], str]] = {
    "step_throughput": step_throughput,
    "step_commits": step_commits,
    "rollouts": rollouts,
    "cli_latency": cli_latency,
    "cold_start": cold_start,
    "env_steps": env_steps,
    "imported_steps": imported_steps,
    "hub": hub,
    "crawl": crawl,
    "hub_load": hub_load,
    "catalog_snapshot": catalog_snapshot,
    "live": live,
    "play_latency": play_latency,
    "forks": forks,
    "sessions_scale": sessions_scale,
    "sandbox_runtime": sandbox_runtime,
    "hub_lane": hub_lane,
}


# -- pages ------------------------------------------------------------------------------------------


def render(name: str, results_dir: Path = _results.RESULTS_DIR) -> str:
    """The block for benchmark `name`, from its results file (a line saying it has not run, without one)."""
    if name not in RENDERERS:
        raise SystemExit(f"tables.py: no table named {name!r} (known: {', '.join(RENDERERS)})")
    doc = _results.load(name, results_dir)
    if doc is None:
        return (
            f"_Not measured yet: `python benchmarks/{name}.py` (or `bash benchmarks/run_all.sh`) writes its results._"
        )
    return RENDERERS[name](doc)


def update(text: str, results_dir: Path = _results.RESULTS_DIR) -> str:
    """`text` with every bench block rendered again from the results files."""
    return BLOCK.sub(lambda m: m["open"] + render(m["name"], results_dir) + "\n" + m["close"], text)


def blocks(text: str) -> list[str]:
    return [m["name"] for m in BLOCK.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a page differs from the results"
    )
    parser.add_argument("--results", type=Path, default=_results.RESULTS_DIR, help="the results folder")
    args = parser.parse_args(argv)
    stale, shown = [], set()
    for page in PAGES:
        text = page.read_text()
        shown.update(blocks(text))
        new = update(text, args.results)
        if new == text:
            continue
        rel = page.relative_to(ROOT)
        if args.check:
            stale.append(str(rel))
            sys.stdout.writelines(
                difflib.unified_diff(
                    text.splitlines(True), new.splitlines(True), f"{rel} (now)", f"{rel} (from results)"
                )
            )
        else:
            page.write_text(new)
            print(f"updated {rel}")
    missing = sorted(p.stem for p in args.results.glob("*.json") if p.stem not in shown)
    if missing:
        print(f"tables.py: results without a table in any page: {', '.join(missing)}", file=sys.stderr)
        return 1
    if stale:
        print(
            f"tables.py: {', '.join(stale)} differ from benchmarks/results/ (above); run `python benchmarks/tables.py`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
