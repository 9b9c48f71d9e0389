"""`openenv hub serve | index | worker | rerun | export-catalog | gc`: run the Environment Hub service.

The Hub's own command group. The SDK's `openenv` command finds it through the `openenv.cli`
entry-point group (pyproject.toml) and never imports it; what the Hub needs (SQLAlchemy,
Alembic, ...) is imported when a sub-command runs, so `openenv hub --help` stays light and a
missing `service` extra gets a clear message.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
from pathlib import Path
from typing import Any

from openenv.cli._output import CliError, Output

DESCRIPTION = """Run the Environment Hub: a catalog of environments that indexes Spaces tagged
`openenv` (and a local folder of envs), validates, builds and smoke-tests every revision, and
serves a JSON API and website. With no configuration it keeps a SQLite database under
~/.cache/openenv-hub, indexes this repository's envs/ and runs the pipeline on them.
Settings come from OPENENV_HUB_* variables (see docs/hub-api.md); options here override them."""

EXAMPLES = """
openenv hub serve                               # http://127.0.0.1:7860, API under /api/v1
openenv hub serve --port 8080 --workers 2 --data-dir /srv/hub
openenv hub index --source hf                   # index Spaces tagged openenv (HF_ENDPOINT, HF_TOKEN)
openenv hub index --source envs/ --wait         # a local folder, then run the pipeline until done
openenv hub worker                              # one more pipeline worker on the same database
openenv hub worker --tasks-only                 # a worker for webhooks and pull-request comments only
openenv hub rerun local/echo_env                # run the pipeline again on an env's current revision
openenv hub rerun --failed                      # ... on every env whose current revision failed or waits
openenv hub gc                                  # undo host changes of Hub processes killed outright
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="hub_command", metavar="SUBCOMMAND", required=True)

    serve = sub.add_parser("serve", help="serve the API (and website) with background indexing and workers")
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    serve.add_argument("--workers", type=int, default=None, help="pipeline worker processes to run (default 1)")
    serve.add_argument(
        "--reindex-every", type=float, default=600.0, metavar="SECONDS", help="re-index sources this often (0: once)"
    )
    serve.add_argument(
        "--log-file",
        type=Path,
        default=None,
        help="write the full log there, and print for people: warnings, one line per env verdict, a summary",
    )
    serve.add_argument("--verbose", action="store_true", help="with --log-file: print the full log here as well")
    _common(serve)

    index = sub.add_parser("index", help="index a source once")
    index.add_argument(
        "--source", default="local", help="'hf', 'local' (the configured folder), or a folder of env folders"
    )
    index.add_argument(
        "--wait", action="store_true", help="then run the pipeline in this process until the queue is empty"
    )
    index.add_argument("--json", action="store_true", help="print the index report as JSON")
    _common(index)

    worker = sub.add_parser("worker", help="run a pipeline worker until interrupted")
    worker.add_argument(
        "--tasks-only", action="store_true", help="run only short tasks (webhooks, pull-request comments), never builds"
    )
    _common(worker)

    rerun = sub.add_parser("rerun", help="run the pipeline again on a revision (an operator on the Hub's machine)")
    rerun.add_argument("env", nargs="?", help="OWNER/NAME[@REVISION] (default revision: the current one on main)")
    rerun.add_argument(
        "--failed", action="store_true", help="every env whose current revision failed or waits for the infrastructure"
    )
    rerun.add_argument("--reason", default="openenv hub rerun", help="recorded in the audit trail")
    rerun.add_argument("--json", action="store_true", help="print what was queued as JSON")
    _common(rerun)

    export = sub.add_parser(
        "export-catalog", help="write the catalog snapshot (upstream's Environment Card profile) to a file"
    )
    export.add_argument("-o", "--output", type=Path, required=True, help="file to write (- for standard output)")
    _common(export)

    gc = sub.add_parser(
        "gc",
        help="remove the firewall chains of Hub processes that were killed, and put back build cgroup limits they left",
    )
    gc.add_argument("--json", action="store_true", help="print what was undone as JSON")
    gc.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, default=None, help="where the database, files and logs live")
    parser.add_argument("--database-url", default=None, help="SQLAlchemy URL (default: SQLite under the data dir)")
    parser.add_argument("--hf", action="store_true", help="also index Spaces from the Hugging Face Hub")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


# What every sub-command imports first; the `service` extra installs them.
_SERVICE_MODULES = ("sqlalchemy", "alembic", "pydantic_settings", "fastapi", "uvicorn")


def _require_service_extra() -> None:
    missing = [name for name in _SERVICE_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(
            f"the Hub service needs the service extra ({', '.join(missing)} not installed)",
            "pip install 'openenv-hub[service]'",
        )


def _settings(args: argparse.Namespace, **extra: Any) -> Any:
    from hub_service.settings import HubSettings

    overrides: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    if args.data_dir is not None:
        overrides["data_dir"] = args.data_dir
    if args.database_url:
        overrides["database_url"] = args.database_url
    if args.hf:
        overrides["hf_enabled"] = True
    return HubSettings(**overrides)


def run(args: argparse.Namespace, out: Output) -> int:
    _require_service_extra()
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.hub_command == "serve":
        return _serve(args, out)
    if args.hub_command == "index":
        return _index(args, out)
    if args.hub_command == "rerun":
        return _rerun(args, out)
    if args.hub_command == "export-catalog":
        return _export_catalog(args, out)
    if args.hub_command == "gc":
        return _gc(args, out)
    return _worker(args, out)


def _serve(args: argparse.Namespace, out: Output) -> int:
    from hub_service.serve import serve

    settings = _settings(args)
    url = f"http://{args.host}:{args.port}"
    out.line(f"OpenEnv Hub on {url}  (API: /api/v1/envs, docs: /docs)")
    out.line(
        f"data: {settings.data_dir}   database: {_redact(settings.sqlalchemy_url)}   local source: {settings.local_source or '-'}"
    )
    if args.log_file is not None:  # a console for people (scripts/serve): hub_service/console.py
        from hub_service.console import VerdictWatcher, setup_console_logging

        log_file = args.log_file.expanduser().resolve()
        setup_console_logging(log_file, level=args.log_level, verbose=args.verbose)
        out.line(f"full log: {log_file}")
        out.line("checking every env (validate, build, smoke test); each verdict shows here as it lands")
        VerdictWatcher(settings, url, out.line).start()
    serve(
        settings,
        host=args.host,
        port=args.port,
        workers=args.workers,
        reindex_every_s=args.reindex_every,
        log_level=args.log_level,
        log_file=args.log_file.expanduser().resolve() if args.log_file is not None else None,
    )
    return 0


def _gc(args: argparse.Namespace, out: Output) -> int:
    """What a Hub process undoes when it stops, for those that could not (killed outright)."""
    from hub_service.firewall import collect_leftovers
    from openenv.images import restore_leftover_limits

    chains = collect_leftovers()
    restored = restore_leftover_limits()
    if args.json:
        out.json({"firewall_chains_removed": chains, "build_limits_restored": restored})
        return 0
    for chain in chains:
        out.mark("ok", f"removed the firewall chain {chain} (its Hub process is gone)")
    if restored:
        out.mark("ok", "put back the build cgroup limits a killed build had left set")
    if not chains and not restored:
        out.line("nothing to undo: no Hub process left changes on this host")
    return 0


def _index(args: argparse.Namespace, out: Output) -> int:
    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.indexer import source_for
    from hub_service.indexer.service import index_source
    from hub_service.worker import Worker

    source_arg = args.source
    extra: dict[str, Any] = {}
    kind = source_arg
    if source_arg not in ("hf", "local"):
        folder = Path(source_arg).expanduser().resolve()
        if not folder.is_dir():
            raise CliError(
                f"{source_arg} is neither 'hf', 'local' nor a folder", "pass --source hf, or a folder of env folders"
            )
        extra["local_source"] = str(folder)
        kind = "local"
    if kind == "hf":
        extra["hf_enabled"] = True
    settings = _settings(args, **extra)
    migrate(settings.sqlalchemy_url)
    factory = sessionmaker_for(make_engine(settings.sqlalchemy_url))
    report = index_source(factory, source_for(settings, kind), max_attempts=settings.job_max_attempts)
    outcomes: list[str] = []
    if args.wait:
        outcomes = Worker(settings, factory).run_until_idle()
    if args.json:
        out.json({**report.as_dict(), "pipeline": {o: outcomes.count(o) for o in sorted(set(outcomes))}})
        return 0
    out.mark(
        "ok" if report.stopped is None else "warn",
        f"indexed {report.source}: {report.seen} envs ({report.new} new, {report.changed} changed, "
        f"{report.gone} gone), {report.jobs} pipeline jobs queued in {report.seconds:.2f}s",
        report.stopped,  # the crawl stopped early (the Hub's Retry-After): the next `index` resumes there
    )
    if args.wait:
        out.mark(
            "ok" if "failed" not in outcomes else "warn",
            f"pipeline: {outcomes.count('passed')} passed, {outcomes.count('failed')} failed",
        )
    return 0


def _export_catalog(args: argparse.Namespace, out: Output) -> int:
    import os
    import sys

    from hub_service.catalog.snapshot import stream_snapshot
    from hub_service.db import make_engine, migrate, sessionmaker_for

    settings = _settings(args)
    migrate(settings.sqlalchemy_url)
    factory = sessionmaker_for(make_engine(settings.sqlalchemy_url))
    if str(args.output) == "-":
        for piece in stream_snapshot(factory, settings):
            sys.stdout.buffer.write(piece)
        sys.stdout.flush()
        return 0
    target = args.output.expanduser()
    partial = target.with_name(f".{target.name}.partial")
    size = 0
    try:
        with partial.open("wb") as handle:  # written whole, then moved: never a half snapshot at the name
            for piece in stream_snapshot(factory, settings):
                handle.write(piece)
                size += len(piece)
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise CliError(f"could not write {target}: {exc.strerror or exc}", "pass -o a writable file path") from exc
    out.mark("ok", f"wrote the catalog snapshot to {target} ({size / 1e6:.2f} MB)")
    return 0


def _worker(args: argparse.Namespace, out: Output) -> int:
    import signal

    from hub_service.db import migrate
    from hub_service.worker import Worker

    settings = _settings(args)
    migrate(settings.sqlalchemy_url)
    from hub_service.worker import TASK_KINDS

    worker = Worker(settings, kinds=TASK_KINDS if args.tasks_only else None)
    signal.signal(signal.SIGTERM, lambda *_: worker.stopping.set())
    out.line(f"worker {worker.worker_id} on {_redact(settings.sqlalchemy_url)}")
    try:
        worker.run_forever()
    except KeyboardInterrupt:
        worker.stopping.set()
    return 0


def _rerun(args: argparse.Namespace, out: Output) -> int:
    import getpass
    import socket

    from hub_service.catalog.models import EnvRecord
    from hub_service.db import make_engine, migrate, session_scope, sessionmaker_for
    from hub_service.errors import HubError
    from hub_service.maintainers.service import rerun, rerun_failed
    from openenv.client.env_id import parse_env_id
    from openenv.errors import ConfigurationError

    if bool(args.env) == bool(args.failed):
        raise CliError(
            "name one env or pass --failed",
            "openenv hub rerun OWNER/NAME[@REVISION], or openenv hub rerun --failed",
            exit_code=2,
        )
    try:
        env_id = parse_env_id(args.env) if args.env else None
    except ConfigurationError as exc:
        raise CliError(str(exc), "e.g. openenv hub rerun local/echo_env", exit_code=2) from None
    settings = _settings(args)
    migrate(settings.sqlalchemy_url)
    engine = make_engine(settings.sqlalchemy_url)
    actor = f"{getpass.getuser()}@{socket.gethostname()}"
    try:
        with session_scope(sessionmaker_for(engine)) as session:
            if env_id is not None:
                done = [
                    rerun(
                        session,
                        settings,
                        env_id.owner,
                        env_id.name,
                        env_id.revision or "latest",
                        actor=actor,
                        reason=args.reason,
                    )
                ]
            else:
                done = rerun_failed(session, settings, actor=actor, reason=args.reason)
            queued = [
                {"env": session.get(EnvRecord, version.env_id).repo_id, "sha": version.sha, "summary": event.summary}  # type: ignore[union-attr]
                for version, event in done
            ]
    except HubError as exc:
        raise CliError(str(exc), "see the env's page (GET /api/v1/envs/OWNER/NAME) for its revisions") from None
    finally:
        engine.dispose()
    if args.json:
        out.json({"queued": queued})
        return 0
    if not queued:
        out.mark("ok", "nothing to re-run: no env's current revision failed or waits")
    for item in queued:
        out.mark("ok", f"{item['env']}: {item['summary']}")
    return 0


def _redact(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
