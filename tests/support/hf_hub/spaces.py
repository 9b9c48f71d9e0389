"""Space variables, secrets, and duplication."""

from __future__ import annotations

import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.support.hf_hub.access import Access
from tests.support.hf_hub.store import HubError, now_iso
from tests.support.hf_hub.views import url_prefix

__all__ = ["add_space_routes"]


def add_space_routes(app: FastAPI, access: Access) -> None:
    """Add the routes to `app`."""
    # -- Space settings and duplication -------------------------------------------------------------

    @app.get("/api/spaces/{owner}/{name}/variables")
    def get_variables(request: Request, owner: str, name: str) -> dict[str, Any]:
        repo, _ = access.writable(request, "spaces", owner, name)
        return repo.variables

    @app.post("/api/spaces/{owner}/{name}/variables")
    async def add_variable(request: Request, owner: str, name: str) -> dict[str, Any]:
        repo, _ = access.writable(request, "spaces", owner, name)
        body = await request.json()
        repo.variables[body["key"]] = {
            "value": str(body.get("value", "")),
            "description": body.get("description"),
            "updatedAt": now_iso(),
        }
        access.store.save(repo)
        return repo.variables

    @app.delete("/api/spaces/{owner}/{name}/variables")
    async def delete_variable(request: Request, owner: str, name: str) -> dict[str, Any]:
        repo, _ = access.writable(request, "spaces", owner, name)
        repo.variables.pop((await request.json())["key"], None)
        access.store.save(repo)
        return repo.variables

    @app.get("/api/spaces/{owner}/{name}/secrets")
    def get_secrets(request: Request, owner: str, name: str) -> list[dict[str, Any]]:
        repo, _ = access.writable(request, "spaces", owner, name)
        return [
            {"key": k, "description": v.get("description"), "updatedAt": v["updatedAt"]}
            for k, v in repo.secrets.items()
        ]

    @app.post("/api/spaces/{owner}/{name}/secrets")
    async def add_secret(request: Request, owner: str, name: str) -> dict[str, Any]:
        repo, _ = access.writable(request, "spaces", owner, name)
        body = await request.json()
        repo.secrets[body["key"]] = {
            "value": str(body.get("value", "")),
            "description": body.get("description"),
            "updatedAt": now_iso(),
        }
        access.store.save(repo)
        return {}

    @app.delete("/api/spaces/{owner}/{name}/secrets")
    async def delete_secret(request: Request, owner: str, name: str) -> dict[str, Any]:
        repo, _ = access.writable(request, "spaces", owner, name)
        repo.secrets.pop((await request.json())["key"], None)
        access.store.save(repo)
        return {}

    @app.post("/api/spaces/{owner}/{name}/restart")
    def restart(request: Request, owner: str, name: str) -> dict[str, Any]:
        """A wake (or restart) request: the Space goes through its wake plan, if it has one."""
        repo, _ = access.writable(request, "spaces", owner, name)
        for stage, after_s in access.state.wake_plans.get(repo.id, []):
            timer = threading.Timer(after_s, _set_stage, args=(access, repo.id, stage))
            timer.daemon = True
            timer.start()
        return dict(repo.runtime)

    @app.post("/api/{kind}/{owner}/{name}/duplicate")
    async def duplicate(request: Request, kind: str, owner: str, name: str) -> JSONResponse:
        source, user = access.readable(request, kind, owner, name)
        if user is None:
            raise HubError(401, "You must be authenticated to duplicate a repo")
        body = await request.json()
        target = body.get("repository") or f"{user.name}/{name}"
        to_owner = target.split("/")[0]
        if not user.can_write(to_owner):
            raise HubError(403, f"You don't have the rights to create a repo under {to_owner}")
        head = source.head()
        files = {p: access.store.blob(e) for p, e in (head.tree if head else {}).items()}
        private = (
            bool(body.get("private")) or body.get("visibility") == "private"
            if ("private" in body or "visibility" in body)
            else source.private
        )
        with access.store.lock:
            repo = access.store.create(source.repo_type, target, private=private, sdk=source.sdk, author=user.name)
            access.store.commit(repo, "main", files, [], title=f"Duplicate from {source.id}", author=user.name)
            for item in body.get("variables") or []:
                repo.variables[item["key"]] = {
                    "value": str(item.get("value", "")),
                    "description": item.get("description"),
                    "updatedAt": now_iso(),
                }
            for item in body.get("secrets") or []:
                repo.secrets[item["key"]] = {
                    "value": str(item.get("value", "")),
                    "description": item.get("description"),
                    "updatedAt": now_iso(),
                }
            if repo.repo_type == "space":
                hardware = body.get("hardware") or "cpu-basic"
                stage = "RUNNING" if access.state.auto_run and "Dockerfile" in files else "BUILDING"
                repo.runtime = {
                    **repo.runtime,
                    "stage": stage,
                    "hardware": {"current": hardware if stage == "RUNNING" else None, "requested": hardware},
                }
            access.store.save(repo)
        return JSONResponse(
            {"url": f"{access.endpoint(request)}/{url_prefix(repo.repo_type)}{repo.id}", "filesCopyPending": False}
        )


def _set_stage(access: Access, repo_id: str, stage: str) -> None:
    with access.store.lock:
        repo = access.store.get("space", repo_id)
        repo.runtime = {**repo.runtime, "stage": stage}
        access.store.save(repo)
