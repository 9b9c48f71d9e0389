"""A real multi-node Ray cluster on 127.0.0.1: a head and two worker nodes, one CPU each.

Started once per module with Ray's own `Cluster` helper (each node its own raylet and object
store, as on separate machines), kept light for a 2-core machine (80 MB object stores, no
dashboard, no usage stats), and torn down at the end: no Ray process of it may be left.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.systems import require_system

# Read by Ray at import: no usage stats, and every node's address is 127.0.0.1 (Ray would otherwise
# advertise the machine's outward address and listen on it).
_RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
_NODE = {
    "num_cpus": 1,
    "object_store_memory": 80 * 1024 * 1024,
    "include_dashboard": False,
    "node_ip_address": "127.0.0.1",
}


@dataclass
class RayCluster:
    cluster: Any
    head: Any
    workers: list[Any]

    def node_ids(self) -> set[str]:
        return {n.node_id for n in [self.head, *self.workers]}

    def pids_of(self, node: Any) -> list[int]:
        """Every process of the node: its raylet, object store, agents, the workers of its actors,
        and whatever those started (an env server), as on a machine that is switched off."""
        sock = node.raylet_socket_name
        table = _process_table()
        parents = {pid: ppid for pid, (ppid, _) in table.items()}
        pids = [pid for pid, (_, argv) in table.items() if any(word.endswith("=" + sock) for word in argv)]
        grown = True
        while grown:
            more = [pid for pid, ppid in parents.items() if ppid in pids and pid not in pids]
            pids.extend(more)
            grown = bool(more)
        return pids

    def kill_node(self, pids: list[int]) -> None:
        """The machine is gone: SIGKILL all of a node's processes (from `pids_of`) at once."""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _process_table() -> dict[int, tuple[int, list[str]]]:
    """Every process's parent and whole command line, read from /proc: `ps`, run from a test, cut its
    lines at 80 characters (measured), short of the Ray socket paths and session folders they name."""
    table: dict[int, tuple[int, list[str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or a kernel thread
        table[int(entry)] = (ppid, argv)
    return table


def _processes_of(session_dir: str) -> list[str]:
    return [
        f"{pid} {' '.join(argv)}"[:160] for pid, (_, argv) in _process_table().items() if session_dir in " ".join(argv)
    ]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    os.environ.update(_RAY_ENV)
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        require_system("ray", "install the `ray` extra: bash scripts/bootstrap (or pip install 'openenv-hub[ray]')")
    # A node that stops answering is declared dead after 1.5 s, not Ray's default 15 s.
    head = {**_NODE, "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3}}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    session_dir = ""
    try:
        workers = [cluster.add_node(wait=False, **_NODE) for _ in range(2)]  # both start at once
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        session_dir = cluster.head_node.get_session_dir_path()
        yield RayCluster(cluster, cluster.head_node, workers)
    finally:
        ray.shutdown()
        cluster.shutdown()
    left = _processes_of(session_dir) if session_dir else []
    assert left == [], f"Ray processes left after the cluster's shutdown: {left}"
