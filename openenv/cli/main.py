"""`openenv`: create, check, run, package and publish OpenEnv environments.

Each command is a module of `openenv.cli` listed in `COMMANDS`, imported only when it runs (so
`openenv --help` stays fast). A command module provides:

    DESCRIPTION = "what it does"              # shown by `openenv CMD --help`
    EXAMPLES = "openenv CMD ..."              # one example per line, shown by --help
    def add_arguments(parser) -> None         # argparse; may add sub-commands for a group
    def run(args, out: Output) -> int         # the exit code

Adding a command is one line in `COMMANDS` and one module. A command that lives in another package
(the Hub's `openenv hub`, in `hub_service.cli`) is an entry point in the `openenv.cli` group of its
distribution's metadata and a line in `PLUGINS`; the SDK finds it there and never imports it by name.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["COMMANDS", "ENTRY_POINT_GROUP", "PLUGINS", "build_parser", "load_command", "main"]

# name → (module, one-line summary). The summary lives here so `openenv --help` imports nothing.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("openenv.cli.init", "create a new environment from the Space template"),
    "import": ("openenv.cli.import_env", "make an env folder from a Gymnasium id"),
    "validate": ("openenv.cli.validate", "check an env folder and/or a running server"),
    "serve": ("openenv.cli.serve", "run an environment locally (no Docker)"),
    "build": ("openenv.cli.build", "build an environment's Docker image"),
    "push": ("openenv.cli.push", "publish an environment as a Hugging Face Docker Space"),
    "fork": ("openenv.cli.fork", "duplicate a Space into your account"),
    "schema": ("openenv.cli.schema", "print the JSON Schema of openenv.yaml or of validate's report"),
    "eval": ("openenv.cli.eval", "score a chat model on an env, submit it to the Hub"),
    "ps": ("openenv.cli.ps", "list env servers that clients started (orphans too)"),
    "gc": ("openenv.cli.gc", "remove env servers left behind by crashed clients"),
    "lock": ("openenv.cli.lock", "pin envs to exact revisions and images in a lock file"),
    "discover": ("openenv.cli.discover", "find an env by task in a Hub's catalog"),
    "collect": ("openenv.cli.collect", "collect rollouts from an env into a JSONL dataset"),
}

# Commands other packages add through the "openenv.cli" entry-point group: name → (one-line
# summary, what to install when the command is missing). The summary lives here for `--help`.
ENTRY_POINT_GROUP = "openenv.cli"
PLUGINS: dict[str, tuple[str, str]] = {
    "hub": ("run the Environment Hub service: serve, index, worker", "pip install 'openenv-hub[service]'"),
}

_EPILOG = """examples:
  openenv init my_env                 create ./my_env
  openenv validate my_env             check it (exit 0 pass/warn, 1 fail, 2 not an env, 3 internal error)
  openenv serve my_env --port 8000    run it on http://127.0.0.1:8000
  openenv build my_env -t my_env:dev  build its image
  openenv push my_env                 publish it to the Hub (HF_TOKEN)

Run `openenv COMMAND --help` for a command's options."""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _top_parser() -> argparse.ArgumentParser:
    from openenv import __version__

    parser = argparse.ArgumentParser(
        prog="openenv",
        description="Create, check, run, package and publish OpenEnv environments.",
        epilog=_EPILOG,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"openenv-hub {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    summaries = {name: summary for name, (_, summary) in COMMANDS.items()}
    summaries |= {name: summary for name, (summary, _) in PLUGINS.items()}
    for name, summary in summaries.items():
        sub.add_parser(name, help=summary, add_help=False)
    return parser


def load_command(name: str) -> ModuleType:
    """Import a command's module: one of `COMMANDS`, or a `PLUGINS` entry point.

    Raises:
        CliError: a plugin command whose package is not installed (the hint says what to install).
    """
    if name in COMMANDS:
        return importlib.import_module(COMMANDS[name][0])
    from importlib.metadata import entry_points  # only here: it costs `openenv --help` tens of milliseconds

    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        from openenv.cli._output import CliError

        raise CliError(f"`openenv {name}` is not installed", PLUGINS[name][1])
    module = next(iter(found)).load()
    if not isinstance(module, ModuleType):
        raise TypeError(f"entry point {name!r} of group {ENTRY_POINT_GROUP!r} must name a module, not {module!r}")
    return module


def build_parser(name: str, module: ModuleType) -> argparse.ArgumentParser:
    """The argument parser of one command, with its examples in --help."""
    examples = "\n".join(f"  {line}" for line in module.EXAMPLES.strip().splitlines())
    parser = argparse.ArgumentParser(
        prog=f"openenv {name}",
        description=module.DESCRIPTION,
        epilog=f"examples:\n{examples}",
        formatter_class=_Formatter,
    )
    module.add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `openenv` command; returns (and, as a console script, exits with) its exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    known = COMMANDS.keys() | PLUGINS.keys()
    if not args_list or args_list[0] in ("-h", "--help", "--version") or args_list[0] not in known:
        parser = _top_parser()
        if args_list and not args_list[0].startswith("-") and args_list[0] not in known:
            import difflib

            close = difflib.get_close_matches(args_list[0], sorted(known), n=1)
            hint = f"did you mean `openenv {close[0]}`?" if close else "run `openenv --help` for the commands"
            print(f"error: unknown command {args_list[0]!r} — {hint}", file=sys.stderr)
            return 2
        try:
            parser.parse_args(args_list)  # --help / --version end here
        except SystemExit as exc:
            return int(exc.code or 0)
        parser.print_help()
        return 0
    name = args_list[0]
    from openenv.cli._output import CliError, Output
    from openenv.cli._settings import cli_settings

    settings = cli_settings()
    try:
        module = load_command(name)
    except CliError as exc:
        Output(json_mode="--json" in args_list, color=settings.color).error(str(exc), exc.hint)
        return exc.exit_code
    parser = build_parser(name, module)
    try:
        args = parser.parse_args(args_list[1:])
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    out = Output(json_mode=bool(getattr(args, "json", False)), color=settings.color)
    try:
        return int(module.run(args, out) or 0)
    except CliError as exc:
        out.error(str(exc), exc.hint)
        return exc.exit_code
    except KeyboardInterrupt:
        out.error("interrupted")
        return 130
    except Exception as exc:
        from openenv.errors import OpenEnvError

        if isinstance(exc, OpenEnvError):  # our errors carry their own advice
            out.error(str(exc))
            return 1
        if settings.debug:
            raise
        out.error(
            f"internal error: {type(exc).__name__}: {exc}",
            "this is a bug in openenv; rerun with OPENENV_DEBUG=1 for the traceback and report it",
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
