"""The stand-in Hub's HTTP API: the part of huggingface.co that `huggingface_hub` (1.x and 2.x) uses
for repos, uploads, downloads, Space listing/info/runtime/variables/secrets, duplication and
discussions. Errors carry the Hub's `X-Error-Code` / `X-Error-Message` headers and `{"error": ...}`
bodies, so the client raises its real exception types.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.support.hf_hub.access import KINDS, Access, HubState, User
from tests.support.hf_hub.discussions import add_discussion_routes
from tests.support.hf_hub.git_http import add_git_routes
from tests.support.hf_hub.listing import Listings
from tests.support.hf_hub.ratelimit import add_rate_limits
from tests.support.hf_hub.spaces import add_space_routes
from tests.support.hf_hub.store import HubError, now_iso, object_id
from tests.support.hf_hub.views import repo_info, tree_entries, url_prefix
from tests.support.hf_hub.webhooks import WebhookSender, add_webhook_routes

__all__ = ["HubState", "User", "create_hub_app"]


def _error(exc: HubError) -> JSONResponse:
    headers = {"X-Error-Message": exc.message}
    if exc.code:
        headers["X-Error-Code"] = exc.code
    return JSONResponse({"error": exc.message}, status_code=exc.status, headers=headers)


def create_hub_app(state: HubState) -> FastAPI:
    """The FastAPI app of the stand-in Hub over `state`."""
    app = FastAPI(title="Hugging Face Hub stand-in", openapi_url=None, docs_url=None, redoc_url=None)
    store = state.store

    @app.exception_handler(HubError)
    async def _hub_error(_: Request, exc: HubError) -> JSONResponse:
        return _error(exc)

    add_rate_limits(app)  # inside the counter: a refused request is counted under its path, not a route

    @app.middleware("http")
    async def _count(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        route = request.scope.get("route")
        state.requests[(request.method, getattr(route, "path", request.url.path))] += 1
        return response

    access = Access(state)
    listings = Listings(store)
    endpoint, user_of, readable, writable = access.endpoint, access.user_of, access.readable, access.writable
    committer, split_revision, paged = access.committer, access.split_revision, access.paged
    if state.webhooks is None:
        state.webhooks = WebhookSender(state)
    hooks: WebhookSender = state.webhooks
    add_webhook_routes(app, access, hooks)  # before /api/{kind}/{owner}/{name} would take its paths

    # -- account and repos --------------------------------------------------------------------------

    @app.get("/api/whoami-v2")
    def whoami(request: Request) -> dict[str, Any]:
        user = user_of(request, required=True)
        assert user is not None
        return {
            "type": "user",
            "id": object_id(),
            "name": user.name,
            "fullname": user.name.title(),
            "email": f"{user.name}@example.com",
            "emailVerified": True,
            "isPro": False,
            "orgs": [{"type": "org", "name": o, "fullname": o} for o in user.orgs],
            "auth": {"type": "access_token", "accessToken": {"displayName": "stand-in", "role": user.role}},
        }

    @app.post("/api/repos/create")
    async def create_repo(request: Request) -> JSONResponse:
        user = user_of(request, required=True)
        assert user is not None
        body = await request.json()
        repo_type = body.get("type") or "model"
        owner = body.get("organization") or user.name
        repo_id = f"{owner}/{body.get('name')}"
        if not user.can_write(owner):
            raise HubError(403, f"You don't have the rights to create a repo under {owner}")
        if repo_type == "space" and not body.get("sdk"):
            raise HubError(400, "sdk is required for a Space")
        private = bool(body.get("private")) or body.get("visibility") == "private"
        url = f"{endpoint(request)}/{url_prefix(repo_type)}{repo_id}"
        try:
            repo = store.create(repo_type, repo_id, private=private, sdk=body.get("sdk"), author=user.name)
        except HubError as exc:
            if exc.status == 409:
                return JSONResponse(
                    {"error": exc.message, "url": url}, status_code=409, headers={"X-Error-Message": exc.message}
                )
            raise
        hooks.emit(repo, "repo", "create")
        return JSONResponse({"url": url, "name": repo_id, "id": repo.mongo_id})

    @app.delete("/api/repos/delete")
    async def delete_repo(request: Request) -> dict[str, Any]:
        user = user_of(request, required=True)
        assert user is not None
        body = await request.json()
        owner = body.get("organization") or user.name
        repo_type = body.get("type") or "model"
        if not user.can_write(owner):
            raise HubError(403, f"You don't have the rights to delete repos of {owner}")
        repo = store.get(repo_type, f"{owner}/{body.get('name')}")
        store.delete(repo_type, repo.id)
        hooks.emit(repo, "repo", "delete")
        return {}

    @app.post("/api/repos/move")
    async def move_repo(request: Request) -> dict[str, Any]:
        user = user_of(request, required=True)
        assert user is not None
        body = await request.json()
        repo_type, old, new = body.get("type") or "model", str(body.get("fromRepo")), str(body.get("toRepo"))
        if not (user.can_write(old.split("/")[0]) and user.can_write(new.split("/")[0])):
            raise HubError(403, f"You don't have the rights to move {old} to {new}")
        repo = store.rename(repo_type, old, new)
        hooks.emit(repo, "repo", "move", moved_to=new, name=old)
        return {}

    @app.put("/api/{kind}/{owner}/{name}/settings")
    async def settings(request: Request, kind: str, owner: str, name: str) -> dict[str, Any]:
        repo, _ = writable(request, kind, owner, name)
        body = await request.json()
        if "private" in body or "visibility" in body:
            repo.private = bool(body.get("private")) or body.get("visibility") == "private"
            store.save(repo)
            hooks.emit(repo, "repo.config", "update", updated_config={"private": repo.private})
        return {}

    @app.post("/api/validate-yaml")
    async def validate_yaml(request: Request) -> JSONResponse:
        body = await request.json()
        lines = str(body.get("content", "")).splitlines()
        if not lines or lines[0].strip() != "---":
            return JSONResponse(
                {"errors": [], "warnings": [{"message": "empty or missing yaml metadata in repo card"}]}
            )
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if end is None:
            return JSONResponse(
                {"errors": [{"message": "metadata block is not closed with ---"}], "warnings": []}, status_code=400
            )
        try:
            data = yaml.safe_load("\n".join(lines[1:end])) or {}
        except yaml.YAMLError as exc:
            return JSONResponse({"errors": [{"message": f"invalid YAML: {exc}"}], "warnings": []}, status_code=400)
        if (
            body.get("repoType") == "space"
            and isinstance(data, dict)
            and data.get("sdk") not in (None, "gradio", "docker", "static", "streamlit")
        ):
            return JSONResponse(
                {"errors": [{"message": '"sdk" must be one of gradio, docker, static, streamlit'}], "warnings": []},
                status_code=400,
            )
        return JSONResponse({"errors": [], "warnings": []})

    # -- listing and info ---------------------------------------------------------------------------

    @app.get("/api/{kind}")
    def list_repos(request: Request, kind: str) -> JSONResponse:
        if kind not in KINDS:
            raise HubError(404, f"Unknown listing {kind}")
        q = request.query_params
        user = user_of(request)
        reader = (user.name, tuple(user.orgs)) if user is not None else None
        params = [(k, v) for k, v in q.multi_items() if k not in ("cursor", "limit")]
        out = listings.listing(KINDS[kind], params, reader, endpoint(request))
        limit = int(q["limit"]) if q.get("limit") else None
        size = min(limit, state.page_size) if limit else state.page_size
        return paged(request, out, size)

    def info_route(request: Request, kind: str, owner: str, name: str, revision: str | None) -> dict[str, Any]:
        repo, _ = readable(request, kind, owner, name)
        commit = repo.resolve(revision)
        q = request.query_params
        return repo_info(
            store,
            repo,
            commit,
            endpoint=endpoint(request),
            expand=q.getlist("expand") or None,
            blobs=q.get("blobs") in ("1", "true", "True"),
        )

    @app.get("/api/{kind}/{owner}/{name}")
    def info(request: Request, kind: str, owner: str, name: str) -> dict[str, Any]:
        return info_route(request, kind, owner, name, None)

    @app.get("/api/{kind}/{owner}/{name}/revision/{revision:path}")
    def info_at(request: Request, kind: str, owner: str, name: str, revision: str) -> dict[str, Any]:
        return info_route(request, kind, owner, name, revision)

    @app.get("/api/spaces/{owner}/{name}/runtime")
    def runtime(request: Request, owner: str, name: str) -> dict[str, Any]:
        repo, _ = readable(request, "spaces", owner, name)
        return dict(repo.runtime)

    # -- files --------------------------------------------------------------------------------------

    @app.post("/api/{kind}/{owner}/{name}/preupload/{revision:path}")
    async def preupload(request: Request, kind: str, owner: str, name: str, revision: str) -> dict[str, Any]:
        repo, _ = committer(request, kind, owner, name, revision)
        body = await request.json()
        head = repo.resolve(revision)
        files = [
            {
                "path": f["path"],
                "uploadMode": "regular",
                "shouldIgnore": False,
                "oid": (head.tree.get(f["path"]) or {}).get("oid"),
            }
            for f in body.get("files", [])
        ]
        return {"files": files, "commitOid": head.oid}

    @app.post("/api/{kind}/{owner}/{name}/commit/{revision:path}")
    async def commit(request: Request, kind: str, owner: str, name: str, revision: str) -> dict[str, Any]:
        repo, user = committer(request, kind, owner, name, revision)
        header: dict[str, Any] = {}
        adds: dict[str, bytes] = {}
        deletes: list[str] = []
        folders: list[str] = []
        for raw in (await request.body()).splitlines():
            if not raw.strip():
                continue
            item = json.loads(raw)
            key, value = item.get("key"), item.get("value", {})
            if key == "header":
                header = value
            elif key == "file":
                adds[value["path"]] = (
                    base64.b64decode(value["content"])
                    if value.get("encoding") == "base64"
                    else value["content"].encode()
                )
            elif key == "deletedFile":
                deletes.append(value["path"])
            elif key == "deletedFolder":
                folders.append(value["path"])
            elif key == "lfsFile":
                raise HubError(400, "the stand-in Hub stores files inline only; LFS/Xet uploads are not supported")
            else:
                raise HubError(400, f"unknown commit operation {key!r}")
        title = header.get("summary") or "Upload files"
        ref = revision
        pr = None
        if request.query_params.get("create_pr") in ("1", "true"):
            repo.resolve(revision)
            pr = store.open_discussion(
                repo,
                title=title,
                author=user.name,
                description=header.get("description") or "",
                pull_request=True,
                base=revision,
            )
            ref = pr.ref or ""
        elif ref not in repo.refs:
            repo.resolve(ref)  # a commit id is not something to commit on
            raise HubError(400, f"Invalid revision {ref}: commit on a branch or a pull request ref")
        before = repo.refs.get(ref) if pr is None else None
        made = store.commit(
            repo,
            ref,
            adds,
            deletes,
            title=title,
            message=header.get("description") or "",
            author=user.name,
            deleted_folders=folders,
            parent_commit=header.get("parentCommit"),
        )
        if ref.startswith("refs/pr/"):
            d = pr or store.discussion(repo, int(ref.rsplit("/", 1)[1]))
            d.events.append(
                {
                    "id": object_id(),
                    "type": "commit",
                    "createdAt": now_iso(),
                    "author": {"name": user.name},
                    "data": {"subject": title, "oid": made.oid},
                }
            )
            store.save(repo)
        elif repo.repo_type == "space" and state.auto_run and "Dockerfile" in made.tree:
            repo.runtime = {
                **repo.runtime,
                "stage": "RUNNING",
                "hardware": {"current": "cpu-basic", "requested": "cpu-basic"},
            }
            store.save(repo)
        if pr is not None:
            hooks.emit(repo, "discussion", "create", discussion=pr, comment=pr.events[0])
        full_ref = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
        hooks.emit(
            repo, "repo.content", "update", updated_refs=[{"ref": full_ref, "oldSha": before, "newSha": made.oid}]
        )
        base = f"{endpoint(request)}/{url_prefix(repo.repo_type)}{repo.id}"
        out: dict[str, Any] = {
            "success": True,
            "commitOid": made.oid,
            "commitUrl": f"{base}/commit/{made.oid}",
            "hookOutput": "",
        }
        out["pullRequestUrl"] = f"{base}/discussions/{pr.num}" if pr else None
        return out

    @app.get("/api/{kind}/{owner}/{name}/tree/{rest:path}")
    def tree(request: Request, kind: str, owner: str, name: str, rest: str) -> JSONResponse:
        repo, _ = readable(request, kind, owner, name)
        revision, path = split_revision(rest)
        entries = tree_entries(
            repo.resolve(revision), path, request.query_params.get("recursive") in ("1", "true", "True")
        )
        if entries is None:
            raise HubError(404, f"{path} does not exist on {revision}", "EntryNotFound")
        return paged(request, entries, max(state.page_size, 1000))

    @app.post("/api/{kind}/{owner}/{name}/paths-info/{revision:path}")
    async def paths_info(request: Request, kind: str, owner: str, name: str, revision: str) -> list[dict[str, Any]]:
        repo, _ = readable(request, kind, owner, name)
        commit = repo.resolve(revision)
        if request.headers.get("content-type", "").startswith("application/json"):
            paths = (await request.json()).get("paths", [])
        else:
            paths = (await request.form()).getlist("paths")
        out = []
        for path in paths:
            entries = tree_entries(commit, str(path), recursive=False)
            if entries and len(entries) == 1 and entries[0]["path"] == str(path).strip("/"):
                out.append(entries[0])
            elif entries:
                out.append({"type": "directory", "oid": "", "size": 0, "path": str(path).strip("/")})
        return out

    @app.get("/api/{kind}/{owner}/{name}/refs")
    def refs(request: Request, kind: str, owner: str, name: str) -> dict[str, Any]:
        repo, _ = readable(request, kind, owner, name)
        branches = [
            {"name": r, "ref": f"refs/heads/{r}", "targetCommit": oid}
            for r, oid in repo.refs.items()
            if not r.startswith("refs/")
        ]
        out: dict[str, Any] = {"branches": branches, "converts": [], "tags": []}
        if request.query_params.get("include_prs"):
            out["pullRequests"] = [
                {"name": r, "ref": r, "targetCommit": oid} for r, oid in repo.refs.items() if r.startswith("refs/pr/")
            ]
        return out

    @app.get("/api/{kind}/{owner}/{name}/commits/{revision:path}")
    def commits(request: Request, kind: str, owner: str, name: str, revision: str) -> JSONResponse:
        repo, _ = readable(request, kind, owner, name)
        out, commit = [], repo.resolve(revision)
        while commit is not None:
            out.append(
                {
                    "id": commit.oid,
                    "title": commit.title,
                    "message": commit.message,
                    "authors": [{"user": commit.author}],
                    "date": commit.date,
                }
            )
            commit = repo.commits.get(commit.parents[0]) if commit.parents else None
        return paged(request, out, 1000)

    def resolve_file(request: Request, kind: str, owner: str, name: str, rest: str) -> Response:
        repo, _ = readable(request, kind, owner, name)
        revision, path = split_revision(rest)
        commit = repo.resolve(revision)
        entry = commit.tree.get(path)
        headers = {"X-Repo-Commit": commit.oid}
        if entry is None:
            return Response(
                status_code=404,
                headers={**headers, "X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"},
            )
        headers.update({"ETag": f'"{entry["oid"]}"', "Content-Length": str(entry["size"]), "Accept-Ranges": "bytes"})
        if request.method == "HEAD":
            return Response(status_code=200, headers=headers)
        return Response(store.blob(entry), headers=headers, media_type="application/octet-stream")

    for prefix in ("/spaces", "/datasets"):
        kind = prefix[1:]

        def _resolve(request: Request, owner: str, name: str, rest: str, _kind: str = kind) -> Response:
            return resolve_file(request, _kind, owner, name, rest)

        app.add_api_route(f"{prefix}/{{owner}}/{{name}}/resolve/{{rest:path}}", _resolve, methods=["GET", "HEAD"])

    add_space_routes(app, access)
    add_discussion_routes(app, access)
    add_git_routes(app, access)
    return app
