"""Option values: `KEY=VALUE` pairs (`--var`, `--secret`, `--build-arg`, `--label`) and positive counts."""

from __future__ import annotations

import argparse
import os

from openenv.cli._output import CliError

__all__ = ["add_space_settings", "parse_pairs", "positive_int", "space_settings"]


def parse_pairs(
    items: list[str], option: str, *, from_environment: bool = False, any_key: bool = False
) -> dict[str, str]:
    """`["A=1", "B=2"]` → `{"A": "1", "B": "2"}`.

    A key is a variable name (letters, digits, `_`) unless `any_key` (labels, build arguments:
    any text before the first `=`). With `from_environment`, a bare `KEY` takes its value from
    this process's environment (so secrets need not appear on the command line).

    Raises:
        CliError: a malformed item, or a bare KEY that is not set.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not key or not (any_key or key.replace("_", "a").isalnum()) or not (sep or from_environment):
            raise CliError(f"{option} {item!r} is not KEY=VALUE", f"write it as {option} KEY=VALUE", exit_code=2)
        if not sep:
            if key not in os.environ:
                raise CliError(
                    f"{option} {key}: no value given and ${key} is not set",
                    f"export {key}=... first, or pass {option} {key}=VALUE",
                    exit_code=2,
                )
            value = os.environ[key]
        out[key] = value
    return out


def add_space_settings(parser: argparse.ArgumentParser) -> None:
    """The options `--var KEY=VALUE` and `--secret KEY[=VALUE]` (repeatable) of `push` and `fork`."""
    parser.add_argument("--var", action="append", default=[], metavar="KEY=VALUE", help="a Space variable (repeatable)")
    parser.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="KEY[=VALUE]",
        help="a Space secret; a bare KEY reads $KEY (repeatable)",
    )


def space_settings(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str]]:
    """The Space's variables and secrets that `add_space_settings`' options name.

    Raises:
        CliError: a malformed item, or a bare secret KEY that is not set.
    """
    return parse_pairs(args.var, "--var"), parse_pairs(args.secret, "--secret", from_environment=True)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, or a message that says what was wrong."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
