"""`openenv discover QUERY`: find an env by task in a Hub's catalog, before installing anything."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from openenv.cli._output import CliError, Output

DESCRIPTION = """Search an OpenEnv Hub service's catalog by what you want an env to do. The catalog is
the Hub's snapshot in upstream OpenEnv's Environment Card profile, fetched from --hub /
OPENENV_HUB_URL (every shard GET /api/v1/catalog/index names, when the catalog is larger than one
document), or read from a file (--catalog) that `openenv hub export-catalog` or upstream's
`openenv catalog build` wrote. Digests are checked first. Only metadata is read: no env is started."""

EXAMPLES = """
openenv discover "guess a five-letter word" --hub http://127.0.0.1:7860
openenv discover "play chess" --catalog catalog.json --json
openenv discover --tag game --limit 50
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", default="", help="the task, in your words (empty: every env)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--hub", metavar="URL", help="the OpenEnv Hub service (default: OPENENV_HUB_URL)")
    where.add_argument("--catalog", type=Path, metavar="FILE", help="a snapshot file instead of a Hub")
    parser.add_argument("--tag", action="append", default=[], help="only envs with this tag (repeatable)")
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="ID",
        help="only envs whose Hub report passed this RFC 008 check, e.g. semantic.oracle_max (repeatable)",
    )
    parser.add_argument("--limit", type=int, default=20, metavar="N", help="results at most (default 20)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON document")


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.cli import _catalog
    from openenv.client import _settings as client_settings

    if not 1 <= args.limit <= 1000:
        raise CliError("--limit must be between 1 and 1000", exit_code=2)
    _known_checks(args.check)
    if args.catalog is not None:
        snapshot = _catalog.load_file(args.catalog.expanduser())
        matches = _catalog.search(snapshot, args.query, tags=args.tag, checks=args.check, limit=args.limit)
        found = _catalog.Found(matches, len(snapshot["entries"]), str(snapshot.get("digest")))
    else:
        hub = (args.hub or client_settings.hub_url() or "").strip().rstrip("/")
        if not hub:
            raise CliError(
                "no catalog to search", "pass --hub URL (or set OPENENV_HUB_URL), or --catalog FILE", exit_code=2
            )
        with out.status(f"reading the catalog of {hub}"):
            found = _catalog.search_hub(hub, args.query, tags=args.tag, checks=args.check, limit=args.limit)
    if args.json:
        results = [_result(m) for m in found.matches]
        out.json({"snapshot": found.digest, "envs": found.envs, "shards": found.shards, "results": results})
        return 0
    if not found.matches:
        out.mark("warn", f"no env in the catalog matches {args.query!r}", "try fewer or other words")
        return 0
    for match in found.matches:
        row = _result(match)
        out.line(f"{row['id']}  ({row['score']}%)  {row['description']}", style="bold")
        details = [f"revision {str(row['revision'])[:12]}"] if row["revision"] else []
        details += [f"image {row['image']}"] if row["image"] else []
        details += [f"tags {', '.join(row['tags'])}"] if row["tags"] else []
        out.line("    " + "   ".join(details))
    shards = f" in {found.shards} shards" if found.shards > 1 else ""
    out.line(f"{len(found.matches)} of {found.envs} envs{shards}; catalog {found.digest}")
    return 0


def _known_checks(ids: list[str]) -> None:
    import difflib

    from openenv.validation.rfc008 import load_policy

    known = list(load_policy().entries)
    for check_id in ids:
        if check_id not in known:
            near = difflib.get_close_matches(check_id, known, n=1)
            hint = f"did you mean {near[0]}?" if near else "docs/validate.md lists the 46 check ids"
            raise CliError(f"--check {check_id}: no such RFC 008 check", hint, exit_code=2)


def _result(match: Any) -> dict[str, Any]:
    hub, entry = match.hub, match.entry
    checks = hub.get("checks") if isinstance(hub.get("checks"), dict) else {}
    return {
        "id": match.id,
        "score": match.score,
        "description": entry.get("description"),
        "revision": hub.get("revision"),
        "image": hub.get("image"),
        "tags": entry.get("tags") or [],
        "representative_queries": entry.get("representativeQueries") or [],
        "identifier": entry.get("identifier"),
        "resolve": hub.get("resolve"),
        "verdict": checks.get("verdict"),  # the RFC 008 verdict of the Hub's report, when it has one
    }
