"""Parsing option values: `KEY=VALUE` pairs (`--var`, `--secret`, `--build-arg`) and positive counts."""

from __future__ import annotations

import argparse
import os

from openenv.cli._output import CliError

__all__ = ["parse_pairs", "positive_int"]


def parse_pairs(items: list[str], option: str, *, from_environment: bool = False) -> dict[str, str]:
    """`["A=1", "B=2"]` → `{"A": "1", "B": "2"}`.

    With `from_environment`, a bare `KEY` takes its value from this process's environment (so
    secrets need not appear on the command line).

    Raises:
        CliError: a malformed item, or a bare KEY that is not set.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not key or not key.replace("_", "a").isalnum():
            raise CliError(f"{option} {item!r} is not KEY=VALUE", f"write it as {option} KEY=VALUE", exit_code=2)
        if not sep:
            if not from_environment:
                raise CliError(f"{option} {item!r} has no value", f"write it as {option} {key}=VALUE", exit_code=2)
            if key not in os.environ:
                raise CliError(
                    f"{option} {key}: no value given and ${key} is not set",
                    f"export {key}=... first, or pass {option} {key}=VALUE",
                    exit_code=2,
                )
            value = os.environ[key]
        out[key] = value
    return out


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, or a message that says what was wrong."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
