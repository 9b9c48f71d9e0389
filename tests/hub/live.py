"""The live index under test: the stand-in Hub with a webhook to a running Hub service.

`live` serves the service on 127.0.0.1 and registers its `/webhooks/hf` on the stand-in with the
real `HfApi.create_webhook`; alice owns Spaces, bob (no write access) contributes pull requests,
and the bot comments as `openenv-bot`. Workers run in the test's process when the test says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.app import create_app
from hub_service.audit.models import EnvEvent
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.queue.models import Job
from hub_service.settings import HubSettings
from hub_service.webhooks.models import WebhookDelivery
from hub_service.worker import TASK_KINDS, Worker
from tests.support.hf_hub import HubStandIn
from tests.support.servers import ROOT, serve_app

SECRET = "whsec-test-0123456789"
BOT = "openenv-bot"
MAINTAINER_TOKEN = "maint-token-0123456789"
BROKEN = ROOT / "tests" / "hub" / "envs"


def env_files(name: str, **replace: str | bytes) -> dict[str, bytes]:
    """The files of envs/<name> (or tests/hub/envs/<name>), with some replaced."""
    folder = ROOT / "envs" / name if (ROOT / "envs" / name).is_dir() else BROKEN / name
    files = {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    files.update({k: v.encode() if isinstance(v, str) else v for k, v in replace.items()})
    return files


def ops(files: dict[str, bytes]) -> list[CommitOperationAdd]:
    return [CommitOperationAdd(path_in_repo=path, path_or_fileobj=content) for path, content in files.items()]


@dataclass
class Live:
    settings: HubSettings
    url: str
    hub: HubStandIn
    factory: sessionmaker[Session]
    alice: HfApi
    bob: HfApi

    def publish(self, repo_id: str, files: dict[str, bytes]) -> str:
        """Create a Space as alice with `files` on main (webhooks fire); returns main's sha."""
        self.alice.create_repo(repo_id, repo_type="space", space_sdk="docker")
        info = self.alice.create_commit(repo_id, ops(files), commit_message="first version", repo_type="space")
        return info.oid

    def open_pr(self, repo_id: str, files: dict[str, bytes], title: str = "Improve the env") -> tuple[int, str]:
        """bob opens a pull request with `files`; returns its number and head sha."""
        info = self.bob.create_commit(repo_id, ops(files), commit_message=title, repo_type="space", create_pr=True)
        assert info.pr_num is not None
        return info.pr_num, info.oid

    def push_pr(self, repo_id: str, num: int, files: dict[str, bytes], message: str = "fix") -> str:
        return self.bob.create_commit(
            repo_id, ops(files), commit_message=message, repo_type="space", revision=f"refs/pr/{num}"
        ).oid

    def delivered(self) -> list[Any]:
        """Wait for the stand-in's webhook deliveries; every one must have been accepted."""
        deliveries = self.hub.webhooks.wait()
        for d in deliveries:
            if not d.url.startswith(self.url):
                continue  # a test pointed the webhook elsewhere for a while
            assert d.error is None and d.status in (200, 202), (d.status, d.error, d.reply, d.payload["event"])
        return deliveries

    def tasks(self) -> list[str]:
        """Deliveries in, then run task jobs (no pipeline) until none is due."""
        self.delivered()
        return Worker(self.settings, self.factory, worker_id="tasks", kinds=TASK_KINDS).run_until_idle()

    def work(self) -> list[str]:
        """Deliveries in, then run every job (pipeline included) until the queue is empty."""
        self.delivered()
        return Worker(self.settings, self.factory, worker_id="worker").run_until_idle()

    def post(self, payload: Any, *, secret: str | None = SECRET, **kwargs: Any) -> httpx.Response:
        headers = {"X-Webhook-Secret": secret} if secret is not None else {}
        body = kwargs.pop("content", None)
        if body is None:
            return httpx.post(f"{self.url}/webhooks/hf", json=payload, headers=headers, timeout=30)
        return httpx.post(
            f"{self.url}/webhooks/hf", content=body, headers={**headers, "content-type": "application/json"}, timeout=30
        )

    def bot_comments(self, repo_id: str, num: int) -> list[Any]:
        details = self.alice.get_discussion_details(repo_id, num, repo_type="space")
        return [e for e in details.events if e.type == "comment" and e.author == BOT]

    def counts(self) -> dict[str, int]:
        with self.factory() as s:
            return {
                name: s.scalar(select(func.count()).select_from(model)) or 0
                for name, model in (
                    ("envs", EnvRecord),
                    ("versions", EnvVersion),
                    ("jobs", Job),
                    ("events", EnvEvent),
                    ("deliveries", WebhookDelivery),
                )
            }

    def env(self, repo_id: str) -> EnvRecord | None:
        owner, name = repo_id.split("/")
        with self.factory() as s:
            return s.scalar(select(EnvRecord).where(EnvRecord.owner == owner, EnvRecord.name == name))


@pytest.fixture()
def live(
    clean_factory: sessionmaker[Session], hub_settings: HubSettings, hf_hub: HubStandIn, tmp_path: Path
) -> Iterator[Live]:
    bot_token = hf_hub.add_user(BOT)
    bob_token = hf_hub.add_user("bob")
    settings = hub_settings.model_copy(
        update={
            "hf_endpoint": hf_hub.url,
            "hf_token": SecretStr(bot_token),
            "webhook_secret": SecretStr(SECRET),
            "maintainer_token": SecretStr(MAINTAINER_TOKEN),
            "public_url": "https://hub.example.org",
            "image_prefix": f"openenv-hub-test-{os.getpid()}",
            "builder": "container",
        }
    )
    with serve_app(create_app(settings, run_migrations=False)) as url:
        alice = HfApi(endpoint=hf_hub.url, token=hf_hub.token)
        alice.create_webhook(
            url=f"{url}/webhooks/hf",
            watched=[{"type": "user", "name": "alice"}],
            domains=["repo", "discussion"],
            secret=SECRET,
        )
        yield Live(settings, url, hf_hub, clean_factory, alice, HfApi(endpoint=hf_hub.url, token=bob_token))
