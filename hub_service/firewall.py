"""The Hub's firewall rules, kept in chains of its own so that stopping leaves the host as it was.

Each Hub process that confines containers (the server, each pipeline worker) gets one chain of the
filter table, `OPENENV-HUB-<pid>`, made when a rule is first needed and jumped to from INPUT and
from FORWARD by rules whose comment names the owning process (`openenv-hub owner=host:pid:start`).
The rules that keep containers off the host's own services (new connections from a bridge to a
local address), and, where the engine's network itself cannot, off everything else too (new
connections from a bridge, forwarded or not: Podman's smoke network), go into that chain, never
into INPUT or FORWARD themselves. When the
process ends (normally, or on SIGTERM through the Hub's handlers) the jump and the chain go;
`collect_leftovers` (run when a Hub starts, and by `openenv hub gc`) removes those of processes
that were killed outright. Rules that other software put in INPUT are never touched, and a chain
per process means one Hub stopping never lifts the rules another one on the same host relies on.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shlex
import shutil
import subprocess
import threading

from openenv.client.providers.lifecycle import owner_alive, this_owner

__all__ = ["CHAIN_PREFIX", "block_new_connections_from", "chain_name", "collect_leftovers", "release"]

log = logging.getLogger("hub_service.firewall")

CHAIN_PREFIX = "OPENENV-HUB-"
_COMMENT = "openenv-hub owner="
_lock = threading.Lock()
_made: set[str] = set()  # "<interface>:<host|anywhere>" rules this process has put in its chain
_PARENTS = ("INPUT", "FORWARD")  # the built-in chains that jump to a Hub process's chain
_exit_hook = False


def chain_name(pid: int | None = None) -> str:
    """The chain of process `pid` (default: this one)."""
    return f"{CHAIN_PREFIX}{pid or os.getpid()}"


def block_new_connections_from(interface: str, *, anywhere: bool = False) -> bool:
    """Drop new connections from `interface` to the host itself, or (`anywhere`) to any address,
    forwarded ones too (replies to connections the host opened stay allowed), in this process's
    chain; returns whether the rule is in force. Needs root and iptables; without them nothing is
    changed and a warning says so."""
    iptables = shutil.which("iptables")
    if iptables is None or os.geteuid() != 0:
        log.warning(
            "cannot block containers on %s from %s (needs root and iptables)",
            interface,
            "reaching anything" if anywhere else "the host's own services",
        )
        return False
    global _exit_hook
    with _lock:
        key = f"{interface}:{'anywhere' if anywhere else 'host'}"
        if key in _made:
            return True
        chain = chain_name()
        if not _made:
            _ensure_chain(iptables, chain)
            if not _exit_hook:
                atexit.register(release)  # a Hub that stops takes its rules with it
                _exit_hook = True
        to = [] if anywhere else ["-m", "addrtype", "--dst-type", "LOCAL"]  # the host's own addresses
        rule = ["-i", interface, *to, "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"]
        if _iptables(iptables, "-C", chain, *rule).returncode != 0:
            added = _iptables(iptables, "-A", chain, *rule)
            if added.returncode != 0:
                log.warning("could not add the iptables rule for %s: %s", interface, added.stderr.strip())
                return False
        _made.add(key)
        return True


def release() -> None:
    """Remove this process's jump and chain (what `block_new_connections_from` made); idempotent."""
    iptables = shutil.which("iptables")
    with _lock:
        if not _made or iptables is None:
            return
        _remove_chain(iptables, chain_name(), _jumps(iptables, chain_name()))
        _made.clear()


def collect_leftovers() -> list[str]:
    """Remove the chains (and their jumps) of Hub processes on this host that are gone; returns
    their names. Chains of live processes stay."""
    iptables = shutil.which("iptables")
    if iptables is None or os.geteuid() != 0:
        return []
    listing = _iptables(iptables, "-S")
    if listing.returncode != 0:
        log.warning("could not list the firewall's rules to remove leftovers: %s", listing.stderr.strip())
        return []
    chains = re.findall(rf"^-N ({re.escape(CHAIN_PREFIX)}\d+)$", listing.stdout, re.M)
    removed = []
    for chain in chains:
        jumps = _jumps(iptables, chain, listing.stdout)
        owners = [_owner_of(rule) for rule in jumps]
        pid = int(chain.removeprefix(CHAIN_PREFIX))
        # a chain without its jump: its owner died between making the two
        alive = any(owner_alive(o) for o in owners if o) if any(owners) else _pid_alive(pid)
        if alive:
            continue
        _remove_chain(iptables, chain, jumps)
        removed.append(chain)
    return removed


def _ensure_chain(iptables: str, chain: str) -> None:
    made = _iptables(iptables, "-N", chain)
    if made.returncode != 0 and _iptables(iptables, "-S", chain).returncode != 0:
        raise OSError(f"could not make the iptables chain {chain}: {made.stderr.strip()}")
    have = {rule[1] for rule in _jumps(iptables, chain)}
    for parent in _PARENTS:
        if parent not in have:
            jump = _iptables(iptables, "-I", parent, "1", *_jump_spec(chain))
            if jump.returncode != 0:
                raise OSError(f"could not jump to {chain} from {parent}: {jump.stderr.strip()}")


def _jump_spec(chain: str) -> list[str]:
    return ["-m", "comment", "--comment", f"{_COMMENT}{this_owner()}", "-j", chain]


def _jumps(iptables: str, chain: str, listing: str | None = None) -> list[list[str]]:
    """The rules of INPUT and FORWARD that jump to `chain`, as `-A INPUT ...` argument lists."""
    if listing is None:
        listing = "\n".join(_iptables(iptables, "-S", parent).stdout for parent in _PARENTS)
    starts = tuple(f"-A {parent} " for parent in _PARENTS)
    rules = [shlex.split(line) for line in listing.splitlines() if line.startswith(starts)]
    return [r for r in rules if r[-2:] == ["-j", chain]]


def _owner_of(rule: list[str]) -> str | None:
    for word in rule:
        if word.startswith(_COMMENT):
            return word.removeprefix(_COMMENT)
    return None


def _remove_chain(iptables: str, chain: str, jumps: list[list[str]]) -> None:
    for rule in jumps:
        _iptables(iptables, "-D", *rule[1:])
    # Flushing is safe here: the chain is ours alone (nothing else jumps to it, no one else writes it).
    _iptables(iptables, "-F", chain)
    gone = _iptables(iptables, "-X", chain)
    if gone.returncode != 0:
        log.warning("could not remove the iptables chain %s: %s", chain, gone.stderr.strip())


def _pid_alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _iptables(iptables: str, *args: str) -> subprocess.CompletedProcess[str]:
    # -w: wait for the xtables lock rather than fail when another process changes rules right now
    return subprocess.run([iptables, "-w", *args], capture_output=True, text=True, timeout=30)
