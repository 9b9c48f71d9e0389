"""Output of the `openenv` command: rich for people at a terminal, plain text otherwise, JSON for machines.

In `--json` mode stdout carries exactly one JSON document and everything for people goes to
stderr, so `openenv validate --json | jq` always works.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from openenv.errors import OpenEnvError

__all__ = ["CliError", "Output"]

_MARKS = {
    "ok": ("✓", "green"),
    "warn": ("!", "yellow"),
    "fail": ("✗", "red"),
    "skip": ("-", "dim"),
    "info": ("•", "cyan"),
}
_PLAIN = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip", "info": "    "}


class CliError(OpenEnvError):
    """A failure to report as one line (`error: ... — hint`) and an exit code."""

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1) -> None:
        super().__init__(message)
        self.hint = hint
        self.exit_code = exit_code


class Output:
    """Where a command writes. `rich` is on when the library is installed and color is allowed."""

    def __init__(
        self,
        *,
        json_mode: bool = False,
        color: str = "auto",
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        human = self.stderr if json_mode else self.stdout
        self.human = human
        self.console: Any = None
        wants = color == "always" or (color == "auto" and _isatty(human))
        if wants:
            try:
                from rich.console import Console
            except ImportError:  # rich is the optional `cli` extra: plain text is the fallback
                pass
            else:
                self.console = Console(
                    file=human, force_terminal=color == "always" or None, highlight=False, soft_wrap=True
                )

    @property
    def rich(self) -> bool:
        return self.console is not None

    def line(self, text: str = "", style: str | None = None) -> None:
        """A line for people."""
        if self.console is not None:
            self.console.print(_escape(text), style=style)
        else:
            print(text, file=self.human, flush=True)

    def mark(self, kind: str, text: str, detail: str | None = None) -> None:
        """A line with a status mark: kind is ok, warn, fail, skip or info; `detail` goes below, each of
        its lines indented."""
        if self.console is not None:
            symbol, style = _MARKS[kind]
            self.console.print(f"[{style}]{symbol}[/{style}] {_escape(text)}")
            for line in (detail or "").splitlines():
                self.console.print(f"    [dim]{_escape(line)}[/dim]")
        else:
            print(f"{_PLAIN[kind]} {text}", file=self.human, flush=True)
            for line in (detail or "").splitlines():
                print(f"     {line}", file=self.human, flush=True)

    def heading(self, text: str) -> None:
        if self.console is not None:
            self.console.print(f"[bold]{_escape(text)}[/bold]")
        else:
            print(text, file=self.human, flush=True)

    def json(self, document: Any) -> None:
        """The command's one JSON document, on stdout."""
        print(json.dumps(document, indent=2, default=str), file=self.stdout, flush=True)

    @contextlib.contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner while a slow step runs (a plain line without rich)."""
        if self.console is not None:
            with self.console.status(_escape(text)):
                yield
        else:
            print(f"{text} ...", file=self.human, flush=True)
            yield

    def error(self, message: str, hint: str | None = None) -> None:
        """One line on stderr: `error: message — hint`."""
        text = f"error: {message}" + (f" — {hint}" if hint else "")
        if self.console is not None and _isatty(self.stderr):
            from rich.console import Console

            Console(file=self.stderr, highlight=False, soft_wrap=True).print(f"[red]error:[/red] {_escape(text[7:])}")
        else:
            print(text, file=self.stderr, flush=True)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _escape(text: str) -> str:
    # Messages contain user text ("[1, 2]", "[server]"); rich must not read it as markup.
    return text.replace("[", r"\[")
