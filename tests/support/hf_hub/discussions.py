"""Discussions and pull requests: open, list, comment (and edit), status, title, merge, delete."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from tests.support.hf_hub.access import Access
from tests.support.hf_hub.store import HubError, comment_event, now_iso, object_id
from tests.support.hf_hub.views import discussion_details, discussion_summary, url_prefix

__all__ = ["add_discussion_routes"]

_DISCUSSIONS_PAGE = 50


def add_discussion_routes(app: FastAPI, access: Access) -> None:
    """Add the routes to `app`."""
    hooks = access.state.webhooks
    # -- discussions and pull requests --------------------------------------------------------------

    @app.get("/api/{kind}/{owner}/{name}/discussions")
    def list_discussions(request: Request, kind: str, owner: str, name: str) -> dict[str, Any]:
        repo, _ = access.readable(request, kind, owner, name)
        q = request.query_params
        items = list(reversed(repo.discussions))
        if q.get("type") in ("discussion", "pull_request"):
            items = [d for d in items if d.is_pull_request == (q["type"] == "pull_request")]
        if q.get("status") in ("open", "closed"):
            items = [d for d in items if (d.status in ("open", "draft")) == (q["status"] == "open")]
        if q.get("author"):
            items = [d for d in items if d.author == q["author"]]
        start = int(q.get("p") or 0) * _DISCUSSIONS_PAGE
        return {
            "discussions": [discussion_summary(repo, d) for d in items[start : start + _DISCUSSIONS_PAGE]],
            "count": len(items),
            "start": start,
            "numClosedDiscussions": sum(d.status in ("closed", "merged") for d in repo.discussions),
        }

    @app.post("/api/{kind}/{owner}/{name}/discussions")
    async def open_discussion(request: Request, kind: str, owner: str, name: str) -> dict[str, Any]:
        repo, user = access.readable(request, kind, owner, name)
        if user is None:
            raise HubError(401, "You must be authenticated to open a discussion")
        body = await request.json()
        if not (body.get("title") or "").strip():
            raise HubError(400, "title is required")
        d = access.store.open_discussion(
            repo,
            title=body["title"],
            author=user.name,
            description=body.get("description") or "",
            pull_request=bool(body.get("pullRequest")),
        )
        hooks.emit(repo, "discussion", "create", discussion=d, comment=d.events[0])
        return {
            "num": d.num,
            "url": f"{access.endpoint(request)}/{url_prefix(repo.repo_type)}{repo.id}/discussions/{d.num}",
        }

    @app.get("/api/{kind}/{owner}/{name}/discussions/{num}")
    def get_discussion(request: Request, kind: str, owner: str, name: str, num: int) -> dict[str, Any]:
        repo, _ = access.readable(request, kind, owner, name)
        return discussion_details(access.store, repo, access.store.discussion(repo, num))

    @app.delete("/api/{kind}/{owner}/{name}/discussions/{num}")
    def delete_discussion(request: Request, kind: str, owner: str, name: str, num: int) -> dict[str, Any]:
        """What the Hub's "Delete" does (owners only): the discussion, its comments and a pull
        request's `refs/pr/N` are gone; reading it answers 404 afterwards."""
        repo, _ = access.writable(request, kind, owner, name)
        d = access.store.delete_discussion(repo, num)
        hooks.emit(repo, "discussion", "delete", discussion=d)
        return {}

    @app.post("/api/{kind}/{owner}/{name}/discussions/{num}/comment")
    async def comment(request: Request, kind: str, owner: str, name: str, num: int) -> dict[str, Any]:
        repo, user = access.readable(request, kind, owner, name)
        if user is None:
            raise HubError(401, "You must be authenticated to comment")
        d = access.store.discussion(repo, num)
        event = comment_event(user.name, (await request.json())["comment"])
        d.events.append(event)
        access.store.save(repo)
        hooks.emit(repo, "discussion.comment", "create", discussion=d, comment=event)
        return {"newMessage": event}

    @app.post("/api/{kind}/{owner}/{name}/discussions/{num}/comment/{comment_id}/edit")
    async def edit_comment(
        request: Request, kind: str, owner: str, name: str, num: int, comment_id: str
    ) -> dict[str, Any]:
        repo, user = access.readable(request, kind, owner, name)
        d = access.store.discussion(repo, num)
        event = next((e for e in d.events if e["id"] == comment_id and e["type"] == "comment"), None)
        if event is None:
            raise HubError(404, f"Comment {comment_id} not found")
        if user is None or user.name != event["author"]["name"]:
            raise HubError(403, "Only the author of a comment can edit it")
        data = event["data"]
        data["latest"] = {**data["latest"], "raw": (await request.json())["content"], "updatedAt": now_iso()}
        data["edited"], data["numEdits"] = True, data.get("numEdits", 0) + 1
        access.store.save(repo)
        hooks.emit(repo, "discussion.comment", "update", discussion=d, comment=event)
        return {"updatedComment": event}

    @app.post("/api/{kind}/{owner}/{name}/discussions/{num}/status")
    async def change_status(request: Request, kind: str, owner: str, name: str, num: int) -> dict[str, Any]:
        repo, user = access.readable(request, kind, owner, name)
        d = access.store.discussion(repo, num)
        if user is None or not (user.can_write(repo.owner) or user.name == d.author):
            raise HubError(403, "Only the repo's owners and the discussion's author can change its status")
        body = await request.json()
        if body.get("status") not in ("open", "closed"):
            raise HubError(400, "status must be open or closed")
        d.status = body["status"]
        event = {
            "id": object_id(),
            "type": "status-change",
            "createdAt": now_iso(),
            "author": {"name": user.name},
            "data": {"status": d.status},
        }
        d.events.append(event)
        if body.get("comment"):
            d.events.append(comment_event(user.name, body["comment"]))
        access.store.save(repo)
        hooks.emit(repo, "discussion", "update", discussion=d)
        return {"newStatus": event}

    @app.post("/api/{kind}/{owner}/{name}/discussions/{num}/title")
    async def change_title(request: Request, kind: str, owner: str, name: str, num: int) -> dict[str, Any]:
        repo, user = access.readable(request, kind, owner, name)
        d = access.store.discussion(repo, num)
        if user is None or not (user.can_write(repo.owner) or user.name == d.author):
            raise HubError(403, "Only the repo's owners and the discussion's author can rename it")
        new = (await request.json())["title"]
        event = {
            "id": object_id(),
            "type": "title-change",
            "createdAt": now_iso(),
            "author": {"name": user.name},
            "data": {"from": d.title, "to": new},
        }
        d.title = new
        d.events.append(event)
        access.store.save(repo)
        hooks.emit(repo, "discussion", "update", discussion=d)
        return {"newTitle": event}

    @app.post("/api/{kind}/{owner}/{name}/discussions/{num}/merge")
    async def merge(request: Request, kind: str, owner: str, name: str, num: int) -> dict[str, Any]:
        repo, user = access.writable(request, kind, owner, name)
        d = access.store.discussion(repo, num)
        pr_head = repo.head(d.ref or "")
        if not d.is_pull_request or pr_head is None or d.status in ("merged", "closed"):
            raise HubError(400, "Only an open pull request can be merged")
        base = repo.head(d.target_branch)
        files = {p: access.store.blob(e) for p, e in pr_head.tree.items()}
        deletes = [p for p in (base.tree if base else {}) if p not in pr_head.tree]
        before = base.oid if base else None
        made = access.store.commit(
            repo, d.target_branch, files, deletes, title=f"Merge pull request #{num}: {d.title}", author=user.name
        )
        d.status, d.merge_commit = "merged", made.oid
        d.events.append(
            {
                "id": object_id(),
                "type": "status-change",
                "createdAt": now_iso(),
                "author": {"name": user.name},
                "data": {"status": "merged"},
            }
        )
        access.store.save(repo)
        hooks.emit(repo, "discussion", "update", discussion=d)
        hooks.emit(
            repo,
            "repo.content",
            "update",
            updated_refs=[{"ref": f"refs/heads/{d.target_branch}", "oldSha": before, "newSha": made.oid}],
        )
        return {}
