"""RFC 008's hub lane with its statistical level, on each bundled env: what the Hub adds to a
revision's smoke stage, timed.

    python benchmarks/hub_lane.py [--envs echo_env,chess_env] [--episodes 16] [--output PATH | --no-save] [--json]

Each env folder of envs/ is served here as a process (`openenv serve`, a port from the OS; the
Hub serves the revision's container instead) and the Hub's own `hub_report` runs against it with
the Hub's default settings, as its smoke stage runs it: the local lane's runtime and semantic
levels (the declared plans replayed), the hub lane's checks and the seven statistical ones (many
episodes of several policies, hub_service/pipeline/rfc008_stats.py). The time of each env's
report is the wall time of that call; the server's start is not in it. Upstream runs no hub lane
(RFC 008 leaves it to hub operators), so there is no second contestant.
Results: benchmarks/results/hub_lane.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import _eventloop
import _results
from _harness import ROOT, BenchmarkError, entry, serve

NAME = "hub_lane"
OURS = Path(sys.executable).parent / "openenv"
ENVS = sorted(p.name for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file())


def _one(env: str, settings: Any) -> dict[str, Any]:
    import httpx

    from hub_service.pipeline.rfc008 import hub_report
    from openenv.validation.rfc008 import validate_package

    folder = ROOT / "envs" / env
    static, legacy = validate_package(folder)
    launched = time.perf_counter()
    with serve([str(OURS), "serve", str(folder), "--log-level", "warning"], cwd=folder) as server:
        first = time.perf_counter() - launched  # hub.time_to_first_work here: the launch to /health's answer
        schema = httpx.get(server.url + "/schema", timeout=30).json()["action"]
        started = time.perf_counter()
        report = hub_report(
            folder,
            legacy.model_dump(mode="json"),
            None,
            f"local/{env}",
            server.url,
            first_work_s=first,
            settings=settings,
            action_schema=schema,
        )
        seconds = time.perf_counter() - started
    hub = {r["check_id"]: r["status"] for r in report["results"] if r["check_id"].startswith(("hub.", "statistical."))}
    stats = [r for r in report["results"] if r["check_id"].startswith("statistical.")]
    return {
        "seconds": round(seconds, 3),
        "statistical_seconds": stats[0]["measured"].get("seconds_all_policies") if stats else None,
        "verdict": report["verdict"],
        "static_verdict": static.verdict,
        "hub_lane": hub,
        "not_passing": {
            r["check_id"]: (r["evidence"] or [""])[0][:300]
            for r in report["results"]
            if r["status"] in ("fail", "error")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default=",".join(ENVS), help="comma-separated env folders of envs/")
    parser.add_argument("--episodes", type=int, default=None, help="statistical_episodes (default: the Hub's)")
    parser.add_argument("--json", action="store_true", help="print the results document")
    _results.add_arguments(parser, NAME)
    args = parser.parse_args()
    _eventloop.require()
    sys.path.insert(0, str(ROOT))
    from hub_service.settings import HubSettings

    settings = HubSettings()
    if args.episodes is not None:
        settings = settings.model_copy(update={"statistical_episodes": args.episodes})
    envs = [e for e in args.envs.split(",") if e]
    unknown = sorted(set(envs) - set(ENVS))
    if unknown:
        raise BenchmarkError(f"not env folders of envs/: {', '.join(unknown)} (there are {', '.join(ENVS)})")
    per_env = {env: _one(env, settings) for env in envs}
    results = {
        "envs": per_env,
        "total_s": round(sum(e["seconds"] for e in per_env.values()), 3),
        "settings": {
            k: getattr(settings, k)
            for k in ("statistical_episodes", "statistical_episode_steps", "statistical_budget_s")
        },
    }
    loops = {"ours": {"client": None, "server": _eventloop.LOOP}}
    if _results.publish(NAME, args, results, loops):
        return
    print(f"the hub lane with its statistical level, {settings.statistical_episodes} episodes a policy:")
    for env, row in per_env.items():
        print(f"  {env:<16} {row['seconds']:7.2f} s  {row['verdict']}  {json.dumps(row['not_passing'])[:200]}")
    print(f"  {'all':<16} {results['total_s']:7.2f} s")


if __name__ == "__main__":
    entry(main)
