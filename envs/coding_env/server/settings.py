"""Limits of the coding sandbox, read from `CODING_ENV_*` variables (the only place that reads them).

| variable | default | meaning |
|---|---|---|
| CODING_ENV_TIMEOUT_S | 10 | wall-clock limit of one step; the whole process group is killed after it |
| CODING_ENV_MEMORY_MB | 512 | address space of each sandboxed process |
| CODING_ENV_FILE_MB | 16 | largest file the code may write |
| CODING_ENV_PROCESSES | 32 | processes (and threads) the sandbox may run at once |
| CODING_ENV_OPEN_FILES | 64 | open file descriptors per process |
| CODING_ENV_CPU_BUDGET_S | 600 | CPU seconds of one persistent interpreter over its whole life |
| CODING_ENV_MAX_OUTPUT_BYTES | 65536 | stdout / stderr returned per step (the rest is cut) |
| CODING_ENV_MAX_PARALLEL | 2 x cores | steps executing at once across all sessions (others wait) |
| CODING_ENV_ROOT | <tmp>/openenv-coding | where each episode's private folder is made |
| CODING_ENV_UID_BASE / _UID_COUNT | 200000 / 100000 | uids handed to sandboxes when the server runs as root |
| CODING_ENV_REQUIRE_LANDLOCK | auto | refuse to run code without Landlock: auto (= when not root), true, false |
| CODING_ENV_PYTHON | (found) | interpreter for sandboxed code; default: the server's, if the sandbox user can read it, else /usr/bin/python3 |
"""

from __future__ import annotations

import functools
import os
import tempfile
from dataclasses import dataclass, field, fields

__all__ = ["SandboxSettings", "get_settings"]

_PREFIX = "CODING_ENV_"


@dataclass(frozen=True)
class SandboxSettings:
    timeout_s: float = 10.0
    memory_mb: int = 512
    file_mb: int = 16
    processes: int = 32
    open_files: int = 64
    cpu_budget_s: int = 600
    max_output_bytes: int = 65536
    max_parallel: int = 2 * (os.cpu_count() or 1)
    root: str = field(default_factory=lambda: os.path.join(tempfile.gettempdir(), "openenv-coding"))
    uid_base: int = 200000
    uid_count: int = 100000
    require_landlock: str = "auto"
    python: str = ""

    def __post_init__(self) -> None:
        for name in (
            "timeout_s",
            "memory_mb",
            "file_mb",
            "processes",
            "open_files",
            "cpu_budget_s",
            "max_output_bytes",
            "max_parallel",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{_PREFIX}{name.upper()} must be > 0, got {getattr(self, name)!r}")
        if self.memory_mb < 64:
            raise ValueError(
                f"{_PREFIX}MEMORY_MB must be at least 64 (Python itself needs about 30), got {self.memory_mb}"
            )
        if self.require_landlock not in ("auto", "true", "false"):
            raise ValueError(f"{_PREFIX}REQUIRE_LANDLOCK must be auto, true or false, got {self.require_landlock!r}")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> SandboxSettings:
        """Read `CODING_ENV_<FIELD>` variables; keyword overrides win.

        Raises:
            ValueError: a variable does not parse or is out of range (the message names it).
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = env.get(_PREFIX + f.name.upper())
            if raw is None or raw.strip() == "":
                continue
            kind = {"float": float, "int": int}.get(str(f.type), str)
            try:
                values[f.name] = kind(
                    raw.strip().lower() if kind is str and f.name == "require_landlock" else raw.strip()
                )
            except ValueError:
                raise ValueError(
                    f"{_PREFIX}{f.name.upper()}={raw!r} is not a valid {f.type}; fix or unset it"
                ) from None
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1)
def get_settings() -> SandboxSettings:
    """The process's sandbox settings (cached)."""
    return SandboxSettings.from_env()
