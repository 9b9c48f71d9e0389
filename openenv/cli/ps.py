"""`openenv ps`: what clients on this machine started and is still running (servers, containers, services)."""

from __future__ import annotations

import argparse
import time

from openenv.cli._output import Output
from openenv.cli._pairs import parse_pairs

DESCRIPTION = (
    "List env servers that OpenEnv clients started and that are still there: local processes, "
    "containers and swarm services. ORPHANED ones belong to a client that is gone (it crashed or "
    "was killed); `openenv gc` removes them."
)
EXAMPLES = """
openenv ps
openenv ps --orphaned --json
openenv ps --label org.openenv.env=echo_env
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_filters(parser)
    parser.add_argument("--orphaned", action="store_true", help="only those whose client is gone")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")


def add_filters(parser: argparse.ArgumentParser) -> None:
    """Options shared with `openenv gc`."""
    parser.add_argument(
        "--label", action="append", default=[], metavar="KEY=VALUE", help="only items with this label (repeatable)"
    )
    parser.add_argument(
        "--no-docker", action="store_true", help="do not ask the container engine (local processes only)"
    )


def parse_labels(items: list[str]) -> dict[str, str]:
    """`--label` values, `["k=v", ...]`, as a dict. Raises CliError (exit 2) for an item without `=`."""
    return parse_pairs(items, "--label", any_key=True)


def describe_age(started_at: float | None) -> str:
    if not started_at:
        return "?"
    seconds = max(0, int(time.time() - started_at))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.client.providers import lifecycle

    items = lifecycle.list_running(labels=parse_labels(args.label), docker=not args.no_docker)
    if args.orphaned:
        items = [i for i in items if i.orphaned]
    if out.json_mode:
        out.json({"items": [i.to_dict() for i in items]})
        return 0
    if not items:
        out.line("nothing running" + (" that is orphaned" if args.orphaned else ""))
        return 0
    rows = [("KIND", "NAME", "URL", "AGE", "CLIENT")]
    for i in items:
        client = "ORPHANED" if i.orphaned else ("alive" if i.owner_alive else "other host")
        rows.append((i.kind, i.name, i.url or "-", describe_age(i.started_at), f"{client} ({i.owner or '?'})"))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    for r in rows:
        out.line("  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths, strict=True)) + "  " + r[4])
    orphans = sum(i.orphaned for i in items)
    if orphans:
        out.line(f"\n{orphans} orphaned: remove them with `openenv gc`")
    return 0
