"""Settings of an environment server, read from `OPENENV_*` variables.

A plain dataclass rather than pydantic-settings: env servers start often (one per container, per
pool member) and that import alone would add a sixth of a second to every cold start.

| variable | default | meaning |
|---|---|---|
| OPENENV_MAX_SESSIONS | sized for the machine | concurrent WebSocket sessions |
| OPENENV_SESSION_IDLE_TIMEOUT_S | 600 | close a session idle this long (0 = never) |
| OPENENV_MAX_MESSAGE_BYTES | 8388608 | largest frame accepted; larger ones get MESSAGE_TOO_LARGE |
| OPENENV_WORKER_THREADS | 4 × cores, at most 32 | the pool that runs blocking env calls |
| OPENENV_ENABLE_WEB_INTERFACE | false | serve the play UI at /web |
| OPENENV_TOOL_TIMEOUT_S | 30 | time limit of an MCP tool call (a tool's own `timeout_s` wins) |
| OPENENV_MODE | simulation | `production` leaves out the stateless HTTP /reset, /step, /state (as upstream 0.10.0 does) |
| OPENENV_SNAPSHOTS_PER_SESSION | 64 | snapshots one session may hold (the "fork" extension) |
| OPENENV_SNAPSHOT_BYTES_PER_SESSION | 67108864 | their total size per session |
| OPENENV_SNAPSHOTS_TOTAL | 8192 | snapshots the whole server holds |
| OPENENV_SNAPSHOT_BYTES_TOTAL | 536870912 | their total size on the server |
| OPENENV_SNAPSHOT_TTL_S | 600 | a snapshot unused this long is dropped |
| OPENENV_FORK_MAX_CHILDREN | 64 | sessions one fork request may make |
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from openenv.errors import ConfigurationError

__all__ = ["ServerSettings", "default_max_sessions", "get_settings"]

_PREFIX = "OPENENV_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _memory_bytes() -> int:
    """Memory this process may use: the container's cgroup limit when set, else physical RAM."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 4 << 30
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdigit():
            total = min(total, int(raw))
    return total


def default_max_sessions() -> int:
    """A capacity sized for this machine: one session per 8 MiB of usable RAM, within 16..4096."""
    return max(16, min(4096, _memory_bytes() // (8 << 20)))


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Knobs of `create_app`. Build with `ServerSettings.from_env()` or directly in tests."""

    max_sessions: int | None = None
    session_idle_timeout_s: float = 600.0
    max_message_bytes: int = 8 << 20
    worker_threads: int = min(32, 4 * (os.cpu_count() or 1))
    enable_web_interface: bool = False
    tool_timeout_s: float = 30.0
    mode: str = "simulation"
    snapshots_per_session: int = 64
    snapshot_bytes_per_session: int = 64 << 20
    snapshots_total: int = 8192
    snapshot_bytes_total: int = 512 << 20
    snapshot_ttl_s: float = 600.0
    fork_max_children: int = 64

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", self.mode.strip().lower())
        if self.mode not in ("simulation", "production"):
            raise ConfigurationError(f"mode (OPENENV_MODE) must be 'simulation' or 'production', not {self.mode!r}")
        if self.max_sessions is not None and self.max_sessions < 1:
            raise ConfigurationError(f"max_sessions must be >= 1, got {self.max_sessions}")
        if self.session_idle_timeout_s < 0:
            raise ConfigurationError("session_idle_timeout_s must be >= 0 (0 turns reaping off)")
        if self.max_message_bytes < 1024:
            raise ConfigurationError("max_message_bytes must be at least 1024")
        if self.worker_threads < 1:
            raise ConfigurationError("worker_threads must be >= 1")
        if not self.tool_timeout_s > 0:
            raise ConfigurationError("tool_timeout_s must be > 0 seconds")
        for name in (
            "snapshots_per_session",
            "snapshot_bytes_per_session",
            "snapshots_total",
            "snapshot_bytes_total",
            "fork_max_children",
        ):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} (OPENENV_{name.upper()}) must be >= 1")
        if not self.snapshot_ttl_s > 0:
            raise ConfigurationError("snapshot_ttl_s (OPENENV_SNAPSHOT_TTL_S) must be > 0 seconds")

    @property
    def capacity(self) -> int:
        """The session capacity in force (the configured one or the machine's default)."""
        return self.max_sessions if self.max_sessions is not None else default_max_sessions()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServerSettings:
        """Read `OPENENV_<FIELD>` variables; keyword overrides win over the environment."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(_PREFIX + f.name.upper())
            if raw is None:
                continue
            values[f.name] = _parse(f.name, str(f.type), raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_(self, **changes: Any) -> ServerSettings:
        return replace(self, **changes)


def _parse(name: str, type_name: str, raw: str) -> Any:
    var = _PREFIX + name.upper()
    raw = raw.strip()
    try:
        if "bool" in type_name:
            if raw.lower() in _TRUE:
                return True
            if raw.lower() in _FALSE:
                return False
            raise ValueError(raw)
        if "int" in type_name:
            return None if raw == "" else int(raw)
        if "float" in type_name:
            return float(raw)
    except ValueError:
        raise ConfigurationError(f"{var}={raw!r} is not a valid {type_name}; unset it or fix the value") from None
    return raw


@functools.lru_cache(maxsize=1)
def get_settings() -> ServerSettings:
    """The process's settings from the environment (cached)."""
    return ServerSettings.from_env()
