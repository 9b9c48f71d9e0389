"""`openenv gc`: remove env servers left behind by clients that crashed."""

from __future__ import annotations

import argparse

from openenv.cli._output import CliError, Output
from openenv.cli.ps import add_filters, parse_labels

DESCRIPTION = (
    "Remove what OpenEnv clients started and left running because they crashed or were killed: "
    "local server processes, containers, swarm services whose client is gone. Servers that running "
    "clients use are left alone unless --all is given."
)
EXAMPLES = """
openenv gc
openenv gc --dry-run --json
openenv gc --all --yes
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_filters(parser)
    parser.add_argument(
        "--all", action="store_true", help="also remove servers whose client still runs (or is on another host)"
    )
    parser.add_argument("--yes", action="store_true", help="confirm --all")
    parser.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.client.providers import lifecycle

    if args.all and not (args.yes or args.dry_run):
        raise CliError(
            "--all also stops servers that running clients are using",
            "add --yes to confirm, or --dry-run to see them",
            exit_code=2,
        )
    removed = lifecycle.gc(
        everything=args.all, labels=parse_labels(args.label), dry_run=args.dry_run, docker=not args.no_docker
    )
    if out.json_mode:
        out.json({"dry_run": args.dry_run, "removed": [i.to_dict() for i in removed]})
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for i in removed:
        out.mark("info" if args.dry_run else "ok", f"{verb} {i.kind} {i.name}", i.url)
    if not removed:
        out.line("nothing to remove" + ("" if args.all else " (no orphaned servers)"))
    return 0
