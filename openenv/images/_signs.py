"""The one place that reads the words of programs outside the SDK (the Docker engine, the docker
CLI, BuildKit, a build step's tools). Their words are shown to people (which step failed, its
first error line) and never decide whose trouble a failed build is: a RUN step can print anything,
and BuildKit interleaves the env's own output with its own. That is decided only by what a Space
cannot forge (the engine's API, its start time, the registry's HTTP status, a probe container):
see `_engine`, `_registry`, `_base`."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FailedStep", "failed_step", "pushed_digest", "step_exit_codes"]

# "executor failed running [/bin/sh -c ...]: exit code: 3" (BuildKit 0.8, Docker 20.10) or
# 'process "/bin/sh -c ..." did not complete successfully: exit code: 3' (newer).
_STEP_EXIT = re.compile(r"(?:executor failed running \[.*?\]|did not complete successfully): exit code: (\d+)", re.S)


# Podman's push stream says what Docker's puts in `aux`, only in words: "<tag>: digest: sha256:... size: N".
_PUSHED = re.compile(r"(?:^|\s)digest: (sha256:[0-9a-f]{64}) size: \d+")


def pushed_digest(message: dict[str, object]) -> str | None:
    """The digest the registry gave a pushed image, from one message of the engine's push stream
    (Docker: `aux.Digest`; Podman: its status line), or None. The stream is the engine's own: a
    Space's build output never reaches it."""
    aux = message.get("aux")
    if isinstance(aux, dict) and isinstance(aux.get("Digest"), str):
        return str(aux["Digest"])
    status = message.get("status")
    found = _PUSHED.search(status) if isinstance(status, str) else None
    return found.group(1) if found else None


def step_exit_codes(text: str) -> list[int]:
    """The exit codes of the failed RUN steps BuildKit names, in order (a step that forges this line
    only makes its own failure look like its own failure)."""
    return [int(code) for code in _STEP_EXIT.findall(text)]


@dataclass(frozen=True)
class FailedStep:
    """The Dockerfile step a failed build stopped at, as its log shows it (for people to read)."""

    label: str  # "[4/5]" (BuildKit) or "4/5" (classic), "" when not known
    command: str  # "RUN pip install -r requirements.txt"
    first_error: str  # the step's first line that says error (else its last), or the builder's error

    def describe(self) -> str:
        where = f"step {self.label} " if self.label else "step "
        return f"{where}`{_short(self.command, 160)}`: {_short(self.first_error, 300)}"


_KIT_HEAD = re.compile(r"^#(\d+) \[([^\]]*)\] (.+)$")
_KIT_ERROR = re.compile(r"^#(\d+) ERROR:? ?(.*)$")
_KIT_OUT = re.compile(r"^#(\d+) \d+\.\d+ (.*)$")
_CLASSIC_HEAD = re.compile(r"^Step (\d+/\d+) : (.+)$")
_ERRORISH = re.compile(r"error|failed|not found|no such|denied|refused|cannot|unable|invalid|fatal", re.I)
_RESTATED = re.compile(r"executor failed running|did not complete successfully|failed to solve|^-+$|^\s*>\s*\[", re.I)


def failed_step(lines: list[str], builder_error: str) -> FailedStep | None:
    """The step a failed build stopped at: BuildKit's plain progress (`#7 [3/4] RUN ...`, `#7 ERROR:
    ...`) or the classic builder's (`Step 3/4 : RUN ...`); None when the log names no step."""
    errored = [(i, m) for i, line in enumerate(lines) if (m := _KIT_ERROR.match(line))]
    if errored:
        at, error = errored[-1]
        vertex, said = error.group(1), error.group(2).strip()
        # Vertex numbers restart with each build (a retry's log follows the first's): look back from the error.
        heads = [(i, m) for i, line in enumerate(lines[:at]) if (m := _KIT_HEAD.match(line)) and m.group(1) == vertex]
        start, head = heads[-1] if heads else (0, None)
        if head is None or head.group(2) == "internal":
            label, command = "", head.group(3) if head else ""
        else:
            label, command = f"[{head.group(2)}]", head.group(3)
        output = [m.group(2) for line in lines[start:at] if (m := _KIT_OUT.match(line)) and m.group(1) == vertex]
        return FailedStep(label, command or "(the build's set-up)", _first_error(output, said or builder_error))
    heads = [(i, m) for i, line in enumerate(lines) if (m := _CLASSIC_HEAD.match(line))]
    if heads:
        at, head = heads[-1]
        output = [
            line for line in lines[at + 1 :] if not line.startswith(" ---> ") and not line.startswith("Removing ")
        ]
        return FailedStep(head.group(1), head.group(2), _first_error(output, builder_error))
    return None


def _first_error(output: list[str], fallback: str) -> str:
    for i, line in enumerate(output):
        if _ERRORISH.search(line) and not _RESTATED.search(line):
            said = line.strip()
            # A line ending in ":", or followed by an indented cause (uv's "No solution found when
            # resolving dependencies" then "╰─▶ Because <package> was not found ..."), keeps its cause.
            following = [rest.strip(" \t×╰─▶│|") for rest in output[i + 1 : i + 3] if rest.strip(" \t×╰─▶│|")]
            continued = (
                output[i + 1].lstrip(" \t").startswith(("╰", "│", "Because", "Caused by", "cause:"))
                if following
                else False
            )
            return f"{said} {following[0]}" if following and (said.endswith(":") or continued) else said
    if output:
        return output[-1].strip()
    return fallback.strip() or "(no output)"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
