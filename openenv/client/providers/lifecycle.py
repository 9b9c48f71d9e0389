"""Everything a client starts is stopped again: on `close()`, at exit, and after a crash.

Three layers:

1. Live providers register here; an `atexit` hook stops whatever is still running when the
   interpreter exits (and SIGTERM is turned into a normal exit, so a trainer killed by its
   scheduler cleans up too, unless the program set its own handler).
2. What was started carries its owner: containers and swarm services get `org.openenv.*`
   labels, local server processes get a record (a JSON "pidfile") in the state directory.
3. After a crash (SIGKILL, power loss, a dead notebook kernel) the owner is gone but the labels
   and records stay: `list_running()` shows them with `owner_alive=False` and `gc()` removes them
   (`openenv ps` / `openenv gc` on the command line).

An owner is `host:pid:start-time`, so a reused pid is not mistaken for the original client.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from openenv.client import _settings

__all__ = [
    "LABEL_ENV",
    "LABEL_MANAGED",
    "LABEL_OWNER",
    "LABEL_STARTED",
    "MANAGED_VALUE",
    "RunningItem",
    "active_providers",
    "gc",
    "kill_process_tree",
    "list_running",
    "owner_alive",
    "owner_labels",
    "stop_all",
]

log = logging.getLogger("openenv.providers")

LABEL_MANAGED = "org.openenv.managed-by"
LABEL_OWNER = "org.openenv.owner"
LABEL_STARTED = "org.openenv.started-at"
LABEL_ENV = "org.openenv.env"
MANAGED_VALUE = "openenv-client"


class Stoppable(Protocol):
    """A started provider as this module sees it (every `Provider` matches it).

    A Protocol, so this module need not import `providers.base`, which registers providers here.
    """

    def stop(self) -> None:
        """Stop what was started; safe to call twice."""
        ...


_HOST = socket.gethostname()
_lock = threading.Lock()
_active: dict[int, Stoppable] = {}
_hooks_installed = False
_signal_installed = False


# -- owners ------------------------------------------------------------------------------------------


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat[stat.rfind(b")") + 2 :].split()
    if len(fields) <= 19 or fields[0] in (b"Z", b"X"):
        return None  # a zombie has exited; only its parent has not collected it yet
    return fields[19].decode()


def process_identity(pid: int) -> str | None:
    """`host:pid:start` of a live local process (None when it does not exist)."""
    ticks = _start_ticks(pid)
    return f"{_HOST}:{pid}:{ticks}" if ticks is not None else None


def this_owner() -> str:
    """This interpreter's owner id."""
    return process_identity(os.getpid()) or f"{_HOST}:{os.getpid()}:0"


def owner_alive(owner: str) -> bool | None:
    """Whether the owner process still runs: True/False on this host, None for another host."""
    host, _, rest = owner.partition(":")
    pid_text, _, ticks = rest.partition(":")
    if host != _HOST or not pid_text.isdigit():
        return None
    current = _start_ticks(int(pid_text))
    return current is not None and (ticks in ("", "0") or current == ticks)


def owner_labels(env: str | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The labels put on everything a client starts (owner, time, env, OPENENV_LABELS, `extra`)."""
    labels = {
        LABEL_MANAGED: MANAGED_VALUE,
        LABEL_OWNER: this_owner(),
        LABEL_STARTED: f"{time.time():.3f}",
        **_settings.extra_labels(),
        **(extra or {}),
    }
    if env:
        labels[LABEL_ENV] = env
    return labels


# -- providers live in this process ---------------------------------------------------------------------


def register(provider: Stoppable) -> None:
    """Track a provider that is starting, so exit stops it (called by `Provider.astart`)."""
    with _lock:
        _active[id(provider)] = provider
        _install_hooks()


def unregister(provider: Stoppable) -> None:
    with _lock:
        _active.pop(id(provider), None)


def active_providers() -> list[Stoppable]:
    """The providers of this process that were started and not stopped."""
    with _lock:
        return list(_active.values())


def stop_all(timeout_s: float = 30.0) -> None:
    """Stop every provider this process started, concurrently (used at exit).

    Plain threads, not an executor: at interpreter exit `concurrent.futures` refuses new work.
    """
    providers = active_providers()
    threads = [threading.Thread(target=_stop_quietly, args=(p,), name="openenv-stop", daemon=True) for p in providers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))


def _stop_quietly(provider: Stoppable) -> None:
    try:
        provider.stop()
    except Exception as exc:  # at exit: report and go on with the others
        log.warning("could not stop %r at exit: %s (remove it with `openenv gc`)", provider, exc)


def install_hooks() -> None:
    """Stop providers at exit, and make SIGTERM a normal exit (when the program has not set its
    own handler). Called when a provider is made, in the caller's thread: signal handlers can
    only be set from the main thread."""
    with _lock:
        _install_hooks()


def _install_hooks() -> None:
    global _hooks_installed, _signal_installed
    if not _hooks_installed:
        _hooks_installed = True
        atexit.register(stop_all)
    if not _signal_installed and threading.current_thread() is threading.main_thread():
        _signal_installed = True
        with contextlib.suppress(ValueError, OSError):  # not allowed here: atexit still covers normal exits
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    # Default SIGTERM kills the interpreter without running atexit; exit normally instead.
    raise SystemExit(128 + signum)


# -- records of local server processes ---------------------------------------------------------------


def records_dir() -> Path:
    path = _settings.state_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_record(record: dict[str, Any]) -> Path:
    """Save a process record (`id` names the file); returns its path."""
    path = records_dir() / f"{record['id']}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return path


def remove_record(record_id: str) -> None:
    """Remove a process record and the server's log beside it."""
    for suffix in (".json", ".log"):
        with contextlib.suppress(FileNotFoundError):
            (records_dir() / f"{record_id}{suffix}").unlink()


def _read_records() -> list[dict[str, Any]]:
    records = []
    for path in sorted(records_dir().glob("*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable record %s: %s", path, exc)
    return records


# -- listing and garbage collection --------------------------------------------------------------------


@dataclass
class RunningItem:
    """Something a client started that is still there.

    Attributes:
        kind: "process", "container" or "service".
        id: pid, container id or service id.
        name: process record id, container or service name.
        url: where it answered (when known).
        owner: `host:pid:start` of the client that started it.
        owner_alive: True/False; None when the owner is on another host.
        started_at: Unix time it was started.
        labels: its labels (containers, services) or the record's labels (processes).
    """

    kind: str
    id: str
    name: str
    url: str | None
    owner: str
    owner_alive: bool | None
    started_at: float | None
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def orphaned(self) -> bool:
        """Its client is gone (crashed or killed) on this host."""
        return self.owner_alive is False

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "orphaned": self.orphaned}


def list_running(*, labels: dict[str, str] | None = None, docker: bool = True) -> list[RunningItem]:
    """Everything clients started that is still there: local processes, containers, services.

    Args:
        labels: only items carrying all of these labels.
        docker: also ask the Docker engine (skipped with a debug log when there is none).

    Returns:
        The items, oldest first. Stale records of processes that are gone are removed.
    """
    items = _process_items()
    if docker:
        items += _docker_items()
    if labels:
        items = [i for i in items if all(i.labels.get(k) == v for k, v in labels.items())]
    return sorted(items, key=lambda i: i.started_at or 0.0)


def gc(
    *, everything: bool = False, labels: dict[str, str] | None = None, dry_run: bool = False, docker: bool = True
) -> list[RunningItem]:
    """Remove leftovers: what clients started and did not stop because they crashed.

    Args:
        everything: remove all items, not only those whose client is gone (careful: this
            stops servers that running clients use, and those of clients on other hosts).
        labels: only items carrying all of these labels.
        dry_run: only say what would be removed.
        docker: also look at the Docker engine's containers and services.

    Returns:
        The items removed (or that would be).
    """
    doomed = [i for i in list_running(labels=labels, docker=docker) if everything or i.orphaned]
    if dry_run:
        return doomed
    for item in doomed:
        try:
            _remove(item)
        except Exception as exc:  # one stubborn leftover must not stop the rest from going
            log.warning("could not remove %s %s: %s", item.kind, item.name, exc)
    return doomed


def _process_items() -> list[RunningItem]:
    items = []
    for rec in _read_records():
        pid = int(rec.get("pid", 0))
        if not pid or process_identity(pid) != rec.get("process"):
            remove_record(str(rec.get("id")))  # the server is gone: the record is stale
            continue
        owner = str(rec.get("owner", ""))
        items.append(
            RunningItem(
                kind="process",
                id=str(pid),
                name=str(rec["id"]),
                url=rec.get("url"),
                owner=owner,
                owner_alive=owner_alive(owner),
                started_at=rec.get("started_at"),
                labels=dict(rec.get("labels") or {}),
            )
        )
    return items


def _docker_items() -> list[RunningItem]:
    from openenv.client.providers._docker import docker_client, docker_errors
    from openenv.errors import ProviderUnavailableError

    try:
        client = docker_client()
    except ProviderUnavailableError as exc:
        log.debug("not listing containers: %s", exc)
        return []
    items = []
    selector = {"label": f"{LABEL_MANAGED}={MANAGED_VALUE}"}
    for c in client.api.containers(all=True, filters=selector):
        labels = c.get("Labels") or {}
        if "com.docker.swarm.service.id" in labels:
            continue  # a swarm task: listed (and removed) with its service
        ports = [p for p in c.get("Ports") or [] if p.get("PublicPort")]
        url = f"http://{ports[0].get('IP') or '127.0.0.1'}:{ports[0]['PublicPort']}" if ports else None
        items.append(_item("container", c["Id"][:12], (c.get("Names") or ["?"])[0].lstrip("/"), url, labels))
    try:
        services = client.api.services(filters=selector)
    except docker_errors().APIError:
        services = []  # not a swarm manager: there are no services
    for s in services:
        labels = s.get("Spec", {}).get("Labels") or {}
        items.append(_item("service", s["ID"][:12], s.get("Spec", {}).get("Name", "?"), None, labels))
    return items


def _item(kind: str, ident: str, name: str, url: str | None, labels: dict[str, str]) -> RunningItem:
    owner = labels.get(LABEL_OWNER, "")
    started = labels.get(LABEL_STARTED)
    return RunningItem(
        kind=kind,
        id=ident,
        name=name,
        url=url,
        owner=owner,
        owner_alive=owner_alive(owner) if owner else None,
        started_at=float(started) if started else None,
        labels=dict(labels),
    )


def kill_process_tree(pid: int, *, expected_identity: str | None, timeout_s: float = 5.0) -> None:
    """SIGTERM the process group `pid` leads, then SIGKILL after `timeout_s`.

    Does nothing when the pid is gone or now belongs to another process (its identity changed).
    """
    if expected_identity is None or process_identity(pid) != expected_identity:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process_identity(pid) != expected_identity:
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _remove(item: RunningItem) -> None:
    if item.kind == "process":
        kill_process_tree(int(item.id), expected_identity=process_identity(int(item.id)))
        remove_record(item.name)
        return
    from openenv.client.providers._docker import docker_client, docker_errors

    client = docker_client()
    with contextlib.suppress(docker_errors().NotFound):
        if item.kind == "container":
            client.api.remove_container(item.id, force=True)
        elif item.kind == "service":
            client.api.remove_service(item.id)
