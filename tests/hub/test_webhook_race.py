"""Two deliveries of one event racing on two Hub processes (issue 30): the Hub retries, or two
webhooks watch the same repo, and the copies land on different `openenv hub serve` processes that
share one database. One applies, the other is answered `duplicate`, and the pull request ends in
the state the Hub has; a genuine repeat of the same change afterwards is applied again. Run on
SQLite (processes of one host) and PostgreSQL (processes of many)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from hub_service.prbot.models import PullRequestCheck
from hub_service.queue.models import Job
from tests.hub.live import SECRET, Live, env_files
from tests.support.servers import ROOT, ProcessServer

REPO = "alice/echo_env"


@pytest.fixture()
def two_hubs(live: Live, tmp_path: Path) -> Iterator[list[ProcessServer]]:
    """Two API processes on the live test's database (no workers: the test runs the jobs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENENV_HUB_")}
    env.update({"OPENENV_HUB_WEBSITE": "false", "OPENENV_HUB_WEBHOOK_SECRET": SECRET})
    openenv = str(Path(sys.executable).parent / "openenv")
    with ExitStack() as stack:
        servers = []
        for i in range(2):
            cmd = [openenv, "hub", "serve", "--workers", "0", "--reindex-every", "0"]
            cmd += ["--database-url", live.settings.sqlalchemy_url, "--data-dir", str(tmp_path / f"data-{i}")]
            server = ProcessServer(cmd, cwd=ROOT, env=env)
            stack.callback(server.stop)
            servers.append(server)
        for server in servers:
            server.wait("/api/v1/health", timeout=90)
        yield servers


def _race(servers: list[ProcessServer], payload: dict[str, Any]) -> list[str]:
    """POST `payload` to every process at the same moment; returns the replies' statuses."""
    gate = threading.Barrier(len(servers))
    replies: list[httpx.Response] = []

    def send(server: ProcessServer) -> None:
        gate.wait()
        replies.append(
            httpx.post(f"{server.url}/webhooks/hf", json=payload, headers={"X-Webhook-Secret": SECRET}, timeout=60)
        )

    threads = [threading.Thread(target=send, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert all(r.status_code in (200, 202) for r in replies), [r.text for r in replies]
    return sorted(r.json()["status"] for r in replies)


def test_one_event_delivered_to_two_processes_at_once_applies_once(live: Live, two_hubs) -> None:
    live.publish(REPO, env_files("echo_env"))
    live.tasks()
    num, _ = live.open_pr(REPO, env_files("echo_env", **{"NOTES.md": "x"}))
    live.tasks()
    hook = next(iter(live.hub.webhooks.hooks.values()))
    hook.url = "http://127.0.0.1:9/unreachable"  # from here the test delivers each event, twice at once

    def change(status: str) -> dict[str, Any]:
        live.alice.change_discussion_status(REPO, num, status, repo_type="space")
        return live.hub.webhooks.wait()[-1].payload

    def state() -> tuple[str, list[str]]:
        with live.factory() as s:
            check = s.scalar(select(PullRequestCheck).where(PullRequestCheck.num == num))
            jobs = s.scalars(select(Job.state).where(Job.version_id == check.version_id, Job.kind == "pipeline"))
            return check.status, sorted(jobs)

    first_close = change("closed")
    assert _race(two_hubs, first_close) == ["duplicate", "queued"]
    live.tasks()
    assert state() == ("closed", ["cancelled"])
    assert _race(two_hubs, change("open")) == ["duplicate", "queued"]
    live.tasks()
    assert state() == ("open", ["cancelled", "queued"])
    second_close = change("closed")
    assert second_close == first_close  # the same bytes: only the state tells them apart
    assert _race(two_hubs, second_close) == ["duplicate", "queued"]
    live.tasks()
    assert state() == ("closed", ["cancelled", "cancelled"])
