"""Git over HTTP for the stand-in Hub: `git clone` and `pip install git+<url>` of a Space or dataset.

The Hub serves every repo over git's smart HTTP protocol at its page URL
(`https://huggingface.co/spaces/owner/name`, `.git` optional). The stand-in does the same, read
only: each repo's commits are written into a bare git repository (under `<store root>/git`) with
`git fast-import`, rebuilt whenever its refs change, and served by git's own `git http-backend`.
Branches are `refs/heads/<name>`, pull requests `refs/pr/<n>`, HEAD is `main`.

One difference from the Hub: the stand-in's commit ids are not git's, so a revision is named by
branch or PR ref here (`@main`, `@refs/pr/1`), not by the commit id the API reports.
Private repos need the token as the password of HTTP basic auth, as on the Hub.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import shutil
import subprocess
import threading
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import Response

from tests.support.hf_hub.access import KINDS, Access
from tests.support.hf_hub.store import HubError, HubStore, Repo

__all__ = ["add_git_routes", "materialize"]

_BACKEND = "/usr/lib/git-core/git-http-backend"
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _git_dir(store: HubStore, repo: Repo) -> Path:
    return store.root / "git" / f"{repo.repo_type}s" / repo.owner / f"{repo.name}.git"


def _ref_name(ref: str) -> str:
    return ref if ref.startswith("refs/") else f"refs/heads/{ref}"


def _timestamp(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


def materialize(store: HubStore, repo: Repo) -> Path:
    """The repo as a bare git repository, (re)written when its refs changed; returns its path.

    Raises:
        RuntimeError: git is missing or fast-import failed.
    """
    target = _git_dir(store, repo)
    with _locks_guard:
        lock = _locks.setdefault(str(target), threading.Lock())
    with lock, store.lock:
        stamp = json.dumps(sorted(repo.refs.items()))
        stamp_file = target / "openenv-standin-refs.json"
        if stamp_file.is_file() and stamp_file.read_text() == stamp:
            return target
        fresh = target.with_name(target.name + ".new")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "--bare", str(fresh)], check=True, capture_output=True)
        subprocess.run(
            ["git", "-C", str(fresh), "symbolic-ref", "HEAD", "refs/heads/main"], check=True, capture_output=True
        )
        stream = bytearray()
        marks: dict[str, int] = {}
        # Commits in creation order: a parent is always written before its children.
        for oid, commit in repo.commits.items():
            marks[oid] = len(marks) + 1
            who = f"{commit.author} <{commit.author}@users.noreply.huggingface.co> {_timestamp(commit.date)} +0000"
            # A ref of its own per commit: fast-import would otherwise make the ref's tip its parent.
            stream += b"commit refs/openenv-standin/%d\nmark :%d\n" % (marks[oid], marks[oid])
            stream += f"author {who}\ncommitter {who}\n".encode()
            stream += _data((commit.title + ("\n\n" + commit.message if commit.message else "")).encode())
            if commit.parents and commit.parents[0] in marks:
                stream += b"from :%d\n" % marks[commit.parents[0]]
            stream += b"deleteall\n"
            for path, entry in sorted(commit.tree.items()):
                stream += f"M 100644 inline {path}\n".encode() + _data(store.blob(entry))
            stream += b"\n"
        for ref, oid in repo.refs.items():
            if oid in marks:
                stream += f"reset {_ref_name(ref)}\n".encode() + b"from :%d\n\n" % marks[oid]
        proc = subprocess.run(
            ["git", "-C", str(fresh), "fast-import", "--quiet", "--date-format=raw"],
            input=bytes(stream),
            capture_output=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"git fast-import failed: {proc.stderr.decode(errors='replace')[-2000:]}")
        deletes = "".join(f"delete refs/openenv-standin/{n}\n" for n in marks.values())
        subprocess.run(
            ["git", "-C", str(fresh), "update-ref", "--stdin"], input=deletes.encode(), check=True, capture_output=True
        )
        (fresh / "openenv-standin-refs.json").write_text(stamp)
        shutil.rmtree(target, ignore_errors=True)
        fresh.rename(target)
        return target


def _basic_as_bearer(request: Request) -> Request:
    """git sends the token as basic auth's password; the rest of the stand-in reads a bearer token."""
    auth = request.headers.get("authorization", "")
    if not auth.lower().startswith("basic "):
        return request
    try:
        _, _, password = base64.b64decode(auth[6:]).decode().partition(":")
    except ValueError:
        raise HubError(401, "Invalid credentials in Authorization header") from None
    headers = [(k, v) for k, v in request.scope["headers"] if k != b"authorization"]
    return Request(
        {**request.scope, "headers": [*headers, (b"authorization", f"Bearer {password}".encode())]}, request.receive
    )


def add_git_routes(app: FastAPI, access: Access) -> None:
    """Add `GET .../info/refs` and `POST .../git-upload-pack` for every repo kind."""

    async def _serve(request: Request, kind: str, owner: str, name: str, service_path: str) -> Response:
        if shutil.which("git") is None or not Path(_BACKEND).exists():
            raise HubError(501, "git is not installed on the stand-in's machine")
        request = _basic_as_bearer(request)
        name = name.removesuffix(".git")
        try:
            repo, _ = access.readable(request, kind, owner, name)
        except HubError as exc:
            if exc.status in (401, 404) and "authorization" not in request.headers:
                # git retries with credentials only when asked to
                return Response(
                    "Repository not found", status_code=401, headers={"WWW-Authenticate": 'Basic realm="Hugging Face"'}
                )
            raise
        if request.query_params.get("service") == "git-receive-pack" or service_path == "git-receive-pack":
            raise HubError(
                403, "the stand-in's git is read-only: publish with `openenv push` (huggingface_hub's upload API)"
            )
        git_dir = await asyncio.to_thread(materialize, access.store, repo)
        body = await request.body()
        env = {
            "GIT_PROJECT_ROOT": str(git_dir.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": f"/{git_dir.name}/{service_path}",
            "REQUEST_METHOD": request.method,
            "QUERY_STRING": request.url.query,
            "CONTENT_TYPE": request.headers.get("content-type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "PATH": "/usr/bin:/bin",
        }
        for header in ("content-encoding", "git-protocol"):
            if header in request.headers:
                env[f"HTTP_{header.upper().replace('-', '_')}"] = request.headers[header]
        # A blocking run in a worker thread: the stand-in may serve on uvloop, whose subprocess pipes
        # race with a backend that exits before reading an empty body.
        proc = await asyncio.to_thread(
            subprocess.run, [_BACKEND], env=env, input=body, capture_output=True, timeout=120
        )
        out, err = proc.stdout, proc.stderr
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status, headers = 200, {}
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers[key.strip()] = value.strip()
        if proc.returncode != 0 and status == 200:
            return Response(f"git http-backend failed: {err.decode(errors='replace')[-500:]}", status_code=500)
        return Response(payload, status_code=status, headers=headers)

    for prefix in ("spaces", "datasets"):
        kind = prefix

        async def info_refs(request: Request, owner: str, name: str, _kind: str = kind) -> Response:
            return await _serve(request, _kind, owner, name, "info/refs")

        async def upload_pack(request: Request, owner: str, name: str, _kind: str = kind) -> Response:
            return await _serve(request, _kind, owner, name, "git-upload-pack")

        async def receive_pack(request: Request, owner: str, name: str, _kind: str = kind) -> Response:
            return await _serve(request, _kind, owner, name, "git-receive-pack")

        app.add_api_route(f"/{prefix}/{{owner}}/{{name}}/info/refs", info_refs, methods=["GET"])
        app.add_api_route(f"/{prefix}/{{owner}}/{{name}}/git-upload-pack", upload_pack, methods=["POST"])
        app.add_api_route(f"/{prefix}/{{owner}}/{{name}}/git-receive-pack", receive_pack, methods=["POST"])
    assert set(KINDS) >= {"spaces", "datasets"}
