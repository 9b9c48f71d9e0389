"""Webhooks of the stand-in Hub: registered through the real API (`HfApi.create_webhook`), sent as
the Hub sends them (version 3 payloads, `X-Webhook-Secret`), from a background thread, after the
change that caused them. Tests can wait for deliveries and replay one, like the Hub's Replay button.

Events sent: repo create/delete/move, repo.content update (commits to a branch or refs/pr/N, with
`updatedRefs`), repo.config update (visibility), discussion create/update/delete (opened, status, title,
merged) and discussion.comment create/update.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI, Request

from tests.support.hf_hub.store import Discussion, HubError, Repo, object_id
from tests.support.hf_hub.views import card_and_tags, url_prefix

_IDLE_S = 2.0  # an idle delivery thread ends after this long

__all__ = ["Delivery", "Webhook", "WebhookSender", "add_webhook_routes"]


@dataclass
class Webhook:
    id: str
    url: str
    watched: list[dict[str, str]]
    domains: list[str]
    secret: str | None = None
    disabled: bool = False

    def wants(self, repo: Repo, scope: str) -> bool:
        if self.disabled or scope.split(".")[0] not in self.domains:
            return False
        for item in self.watched:
            kind, name = item.get("type"), item.get("name")
            if kind in ("user", "org") and name == repo.owner:
                return True
            if kind == repo.repo_type and name == repo.id:
                return True
        return False

    def info(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "url": self.url,
            "watched": self.watched,
            "domains": self.domains,
            "secret": self.secret,
            "disabled": self.disabled,
            "job": None,
        }


@dataclass
class Delivery:
    webhook_id: str
    url: str
    payload: dict[str, Any]
    secret: str | None
    status: int | None = None
    reply: Any = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


def _hex_id(name: str) -> str:
    """A stable 24-hex id for a user name (the stand-in keeps no ids for users)."""
    return hashlib.sha1(name.encode()).hexdigest()[:24]


class WebhookSender:
    """Builds payloads for matching webhooks and POSTs them in order from one thread."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.hooks: dict[str, Webhook] = {}
        self.deliveries: list[Delivery] = []
        self._queue: queue.Queue[Delivery] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- sending ------------------------------------------------------------------------------------

    def emit(
        self,
        repo: Repo,
        scope: str,
        action: str,
        *,
        discussion: Discussion | None = None,
        comment: dict[str, Any] | None = None,
        updated_refs: list[dict[str, Any]] | None = None,
        moved_to: str | None = None,
        updated_config: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> int:
        """Queue this event for every webhook that watches it; returns how many."""
        hooks = [h for h in self.hooks.values() if h.wants(repo, scope)]
        for hook in hooks:
            payload = self._payload(
                hook, repo, scope, action, discussion, comment, updated_refs, moved_to, updated_config, name
            )
            self._enqueue(Delivery(hook.id, hook.url, payload, hook.secret))
        return len(hooks)

    def replay(self, index: int) -> Delivery:
        """Send delivery `index` again, exactly as it was (the Hub's "Replay"); waits for it."""
        old = self.deliveries[index]
        hook = self.hooks.get(old.webhook_id)
        delivery = Delivery(
            old.webhook_id, hook.url if hook else old.url, old.payload, hook.secret if hook else old.secret
        )
        self._enqueue(delivery)
        delivery.done.wait(30)
        return delivery

    def wait(self, timeout: float = 30.0) -> list[Delivery]:
        """Wait until every queued delivery was sent; returns all deliveries so far."""
        for delivery in list(self.deliveries):
            if not delivery.done.wait(timeout):
                raise TimeoutError(f"webhook delivery to {delivery.url} did not finish in {timeout}s")
        return list(self.deliveries)

    def _enqueue(self, delivery: Delivery) -> None:
        with self._lock:  # the put under the lock too: an idle sender checks for work under it before it ends
            self.deliveries.append(delivery)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hf-stand-in-webhooks", daemon=True)
                self._thread.start()
            self._queue.put(delivery)

    def _run(self) -> None:
        """Send queued deliveries in order; end after a few idle seconds (the next event starts a
        sender again), so that a test's stand-in leaves no thread behind."""
        with httpx.Client(timeout=30) as client:
            while True:
                try:
                    delivery = self._queue.get(timeout=_IDLE_S)
                except queue.Empty:
                    with self._lock:
                        if self._queue.empty():
                            self._thread = None
                            return
                    continue
                headers = {"X-Webhook-Secret": delivery.secret} if delivery.secret else {}
                try:
                    reply = client.post(delivery.url, json=delivery.payload, headers=headers)
                    delivery.status = reply.status_code
                    try:
                        delivery.reply = reply.json()
                    except ValueError:
                        delivery.reply = reply.text
                except httpx.HTTPError as exc:
                    delivery.error = f"{type(exc).__name__}: {exc}"
                finally:
                    delivery.done.set()

    # -- payloads -----------------------------------------------------------------------------------

    def _payload(
        self,
        hook: Webhook,
        repo: Repo,
        scope: str,
        action: str,
        discussion: Discussion | None,
        comment: dict[str, Any] | None,
        updated_refs: list[dict[str, Any]] | None,
        moved_to: str | None,
        updated_config: dict[str, Any] | None,
        name: str | None,
    ) -> dict[str, Any]:
        endpoint = self.state.endpoint
        repo_name = name or repo.id
        web = f"{endpoint}/{url_prefix(repo.repo_type)}{repo_name}"
        repo_part: dict[str, Any] = {
            "type": repo.repo_type,
            "name": repo_name,
            "id": repo.mongo_id,
            "private": repo.private,
            "url": {"web": web, "api": f"{endpoint}/api/{repo.repo_type}s/{repo_name}"},
            "owner": {"id": _hex_id(repo.owner)},
        }
        if scope.startswith("repo"):
            head = repo.head()
            repo_part["headSha"] = head.oid if head else None
            repo_part["tags"] = card_and_tags(self.state.store, repo, head)[1]
            if repo.repo_type == "space":
                repo_part["subdomain"] = repo.subdomain
        out: dict[str, Any] = {"event": {"action": action, "scope": scope}, "repo": repo_part}
        if discussion is not None:
            d_web = f"{web}/discussions/{discussion.num}"
            out["discussion"] = {
                "id": _hex_id(f"{repo.mongo_id}#{discussion.num}"),
                "title": discussion.title,
                "status": discussion.status,
                "url": {
                    "web": d_web,
                    "api": f"{endpoint}/api/{repo.repo_type}s/{repo.id}/discussions/{discussion.num}",
                },
                "author": {"id": _hex_id(discussion.author)},
                "num": discussion.num,
                "isPullRequest": discussion.is_pull_request,
                "pinned": False,
            }
            if discussion.is_pull_request:
                changes: dict[str, Any] = {"base": f"refs/heads/{discussion.target_branch}"}
                if discussion.merge_commit:
                    changes["mergeCommitId"] = discussion.merge_commit
                out["discussion"]["changes"] = changes
            if comment is not None:
                out["comment"] = {
                    "id": comment["id"],
                    "author": {"id": _hex_id(comment["author"]["name"])},
                    "content": comment["data"]["latest"]["raw"],
                    "hidden": comment["data"].get("hidden", False),
                    "url": {"web": f"{d_web}#{comment['id']}"},
                }
        if updated_refs is not None:
            out["updatedRefs"] = updated_refs
        if updated_config is not None:
            out["updatedConfig"] = updated_config
        if moved_to is not None:
            out["movedTo"] = {"name": moved_to, "owner": {"id": _hex_id(moved_to.split("/")[0])}}
        out["webhook"] = {"id": hook.id, "version": 3}
        return out


def add_webhook_routes(app: FastAPI, access: Any, sender: WebhookSender) -> None:
    """`/api/settings/webhooks`: create, list, get, delete (what `HfApi.*_webhook` calls)."""

    @app.post("/api/settings/webhooks")
    async def create(request: Request) -> dict[str, Any]:
        access.user_of(request, required=True)
        body = await request.json()
        if not body.get("url"):
            raise HubError(400, "url is required (the stand-in does not run Jobs)")
        if not body.get("watched"):
            raise HubError(400, "watched must list at least one user, org or repo")
        hook = Webhook(
            id=object_id(),
            url=body["url"],
            watched=list(body["watched"]),
            domains=list(body.get("domains") or ["repo", "discussion"]),
            secret=body.get("secret"),
        )
        sender.hooks[hook.id] = hook
        return {"webhook": hook.info()}

    @app.get("/api/settings/webhooks")
    def list_hooks(request: Request) -> list[dict[str, Any]]:
        access.user_of(request, required=True)
        return [h.info() for h in sender.hooks.values()]

    @app.get("/api/settings/webhooks/{hook_id}")
    def get_hook(request: Request, hook_id: str) -> dict[str, Any]:
        access.user_of(request, required=True)
        if hook_id not in sender.hooks:
            raise HubError(404, f"Webhook {hook_id} not found")
        return {"webhook": sender.hooks[hook_id].info()}

    @app.delete("/api/settings/webhooks/{hook_id}")
    def delete_hook(request: Request, hook_id: str) -> dict[str, Any]:
        access.user_of(request, required=True)
        if sender.hooks.pop(hook_id, None) is None:
            raise HubError(404, f"Webhook {hook_id} not found")
        return {}
