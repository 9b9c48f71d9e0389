"""The stand-in Hub's storage: repositories on disk with real revisions.

A commit is a snapshot (path → blob) with its parents, message, author and date; its id is the
SHA-1 of those fields, so ids are 40 hex digits like git's. File contents live once each under
`blobs/<sha256>`; each repo's metadata (refs, commits, discussions, runtime...) is one JSON file
under `repos/<type>s/<owner>/<name>.json`, rewritten on every change (or once at the end of a
`batch()`), so a stand-in started again on the same folder sees the same Hub.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Commit", "Discussion", "HubError", "HubStore", "Repo", "now_iso"]

# Bumped by every change to any repo (a field set, a save, a delete): the listing's cache (listing.py)
# is rebuilt only when it moved, and then reuses the item of each repo whose own `changes` did not.
_GENERATION = [0]


def generation() -> int:
    """How many changes the stand-in's repos have seen (in this process)."""
    return _GENERATION[0]


def _changed(repo: Repo) -> None:
    repo.__dict__["changes"] = repo.__dict__.get("changes", 0) + 1
    _GENERATION[0] += 1


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def object_id() -> str:
    """A 24-hex-digit id, the shape of the Hub's ids (discussion events, repos)."""
    return secrets.token_hex(12)


class HubError(Exception):
    """An API error: HTTP status, message, and the Hub's X-Error-Code when it has one."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


@dataclass
class Commit:
    oid: str
    parents: list[str]
    tree: dict[str, dict[str, Any]]  # path -> {"sha256", "oid" (git blob id), "size"}
    title: str
    message: str
    author: str
    date: str


@dataclass
class Discussion:
    num: int
    title: str
    author: str
    is_pull_request: bool
    status: str  # open | closed | merged | draft
    created_at: str
    events: list[dict[str, Any]] = field(default_factory=list)
    target_branch: str = "main"
    merge_commit: str | None = None

    @property
    def ref(self) -> str | None:
        return f"refs/pr/{self.num}" if self.is_pull_request else None


@dataclass
class Repo:
    repo_type: str  # model | dataset | space
    owner: str
    name: str
    private: bool = False
    sdk: str | None = None
    created_at: str = field(default_factory=now_iso)
    last_modified: str = field(default_factory=now_iso)
    refs: dict[str, str] = field(default_factory=dict)  # "main" / "refs/pr/1" -> commit oid
    commits: dict[str, Commit] = field(default_factory=dict)
    discussions: list[Discussion] = field(default_factory=list)
    runtime: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)
    likes: int = 0
    extra_tags: list[str] = field(default_factory=list)
    mongo_id: str = field(default_factory=object_id)
    host: str | None = None  # where the Space runs when the stand-in runs it (else <subdomain>.hf.space)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        _changed(self)  # repos are changed by setting fields (`repo.runtime = {...}`), never in place

    @property
    def id(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def subdomain(self) -> str:
        """`owner/name_env` → `owner-name-env`, as the Hub names a Space's host."""
        return self.id.lower().replace("/", "-").replace("_", "-").replace(".", "-")

    def head(self, ref: str = "main") -> Commit | None:
        oid = self.refs.get(ref)
        return self.commits.get(oid) if oid else None

    def resolve(self, revision: str | None) -> Commit:
        """The commit a revision (branch, refs/pr/N, or commit id / prefix) names.

        Raises:
            HubError: 404 RevisionNotFound.
        """
        revision = revision or "main"
        if revision in self.refs:
            return self.commits[self.refs[revision]]
        if revision in self.commits:
            return self.commits[revision]
        if len(revision) >= 7:
            matches = [c for oid, c in self.commits.items() if oid.startswith(revision)]
            if len(matches) == 1:
                return matches[0]
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")


class HubStore:
    """All repos of the stand-in, in memory and on disk under `root`. Thread-safe."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        (self.root / "repos").mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.repos: dict[tuple[str, str], Repo] = {}
        self._dirty: set[tuple[str, str]] | None = None
        self._load()

    # -- persistence --------------------------------------------------------------------------------

    def _path(self, repo: Repo) -> Path:
        return self.root / "repos" / f"{repo.repo_type}s" / repo.owner / f"{repo.name}.json"

    def _load(self) -> None:
        for path in sorted((self.root / "repos").glob("*/*/*.json")):
            data = json.loads(path.read_text())
            data["commits"] = {k: Commit(**v) for k, v in data["commits"].items()}
            data["discussions"] = [Discussion(**d) for d in data["discussions"]]
            repo = Repo(**data)
            self.repos[(repo.repo_type, repo.id)] = repo

    def save(self, repo: Repo) -> None:
        """Write `repo`'s metadata (deferred to the end of a `batch()`)."""
        with self.lock:
            _changed(repo)  # what was changed in place (refs, commits) is saved, and so seen
            if self._dirty is not None:
                self._dirty.add((repo.repo_type, repo.id))
                return
            path = self._path(repo)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(repo)))
            os.replace(tmp, path)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Defer metadata writes until the block ends (seeding thousands of repos)."""
        with self.lock:
            outer = self._dirty is None
            if outer:
                self._dirty = set()
            try:
                yield
            finally:
                if outer:
                    dirty, self._dirty = self._dirty or set(), None
                    for key in dirty:
                        if key in self.repos:
                            self.save(self.repos[key])

    def put_blob(self, content: bytes) -> dict[str, Any]:
        """Store content once; returns its tree entry {"sha256", "oid", "size"}."""
        sha256 = hashlib.sha256(content).hexdigest()
        path = self.root / "blobs" / sha256
        if not path.exists():
            tmp = path.with_name(f"{sha256}.{threading.get_ident()}.tmp")
            tmp.write_bytes(content)
            os.replace(tmp, path)
        git_oid = hashlib.sha1(b"blob %d\x00" % len(content) + content).hexdigest()
        return {"sha256": sha256, "oid": git_oid, "size": len(content)}

    def blob(self, entry: dict[str, Any]) -> bytes:
        return (self.root / "blobs" / entry["sha256"]).read_bytes()

    # -- repos --------------------------------------------------------------------------------------

    def get(self, repo_type: str, repo_id: str) -> Repo:
        """Raises HubError 404 RepoNotFound."""
        repo = self.repos.get((repo_type, repo_id))
        if repo is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    def create(
        self,
        repo_type: str,
        repo_id: str,
        *,
        private: bool = False,
        sdk: str | None = None,
        author: str = "",
        initial_files: dict[str, bytes] | None = None,
        sha: str | None = None,
    ) -> Repo:
        """Create a repo with an initial commit (a `.gitattributes`, as the Hub makes).

        Raises:
            HubError: 409 when it exists.
        """
        owner, _, name = repo_id.partition("/")
        with self.lock:
            if (repo_type, repo_id) in self.repos:
                raise HubError(409, f"You already created this {repo_type} repo")
            repo = Repo(repo_type=repo_type, owner=owner, name=name, private=private, sdk=sdk)
            if repo_type == "space":
                repo.runtime = {
                    "stage": "NO_APP_FILE",
                    "hardware": {"current": None, "requested": "cpu-basic"},
                    "storage": None,
                    "gcTimeout": 172800,
                    "replicas": {"current": 1, "requested": 1},
                    "devMode": False,
                    "domains": [{"domain": f"{repo.subdomain}.hf.space", "stage": "READY"}],
                }
            self.repos[(repo_type, repo_id)] = repo
            files = {".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n", **(initial_files or {})}
            self.commit(repo, "main", files, [], title="initial commit", author=author or owner, oid=sha)
            return repo

    def rename(self, repo_type: str, old: str, new: str) -> Repo:
        """Move a repo to a new owner/name (refs, commits and discussions go with it).

        Raises:
            HubError: 404 when `old` does not exist, 409 when `new` does.
        """
        with self.lock:
            repo = self.get(repo_type, old)
            if (repo_type, new) in self.repos:
                raise HubError(409, f"{new} already exists")
            self._path(repo).unlink(missing_ok=True)
            del self.repos[(repo_type, old)]
            repo.owner, _, repo.name = new.partition("/")
            self.repos[(repo_type, new)] = repo
            self.save(repo)
            return repo

    def delete(self, repo_type: str, repo_id: str) -> None:
        with self.lock:
            repo = self.get(repo_type, repo_id)
            del self.repos[(repo_type, repo_id)]
            _changed(repo)
            self._path(repo).unlink(missing_ok=True)

    def commit(
        self,
        repo: Repo,
        ref: str,
        adds: dict[str, bytes],
        deletes: list[str],
        *,
        title: str,
        message: str = "",
        author: str,
        deleted_folders: list[str] | None = None,
        parent_commit: str | None = None,
        oid: str | None = None,
    ) -> Commit:
        """Make a commit on `ref` (a branch or refs/pr/N); returns it.

        Raises:
            HubError: 412 when `parent_commit` is not the ref's head; 404 for deleting a missing file.
        """
        with self.lock:
            head = repo.head(ref)
            if parent_commit is not None and (head is None or head.oid != parent_commit):
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            tree = dict(head.tree) if head else {}
            for path in deletes:
                if path not in tree:
                    raise HubError(404, f"File {path} does not exist", "EntryNotFound")
                del tree[path]
            for folder in deleted_folders or []:
                prefix = folder.rstrip("/") + "/"
                for path in [p for p in tree if p.startswith(prefix)]:
                    del tree[path]
            for path, content in adds.items():
                tree[path] = self.put_blob(content)
            date = now_iso()
            parents = [head.oid] if head else []
            if oid is None:
                seed = json.dumps(
                    [parents, sorted((p, e["oid"]) for p, e in tree.items()), title, message, author, date, object_id()]
                )
                oid = hashlib.sha1(seed.encode()).hexdigest()
            commit = Commit(oid=oid, parents=parents, tree=tree, title=title, message=message, author=author, date=date)
            repo.commits[oid] = commit
            repo.refs[ref] = oid
            repo.last_modified = date
            self.save(repo)
            return commit

    def open_discussion(
        self, repo: Repo, *, title: str, author: str, description: str, pull_request: bool, base: str = "main"
    ) -> Discussion:
        """Open a discussion (a pull request gets its ref refs/pr/N at `base`'s head)."""
        with self.lock:
            num = max((d.num for d in repo.discussions), default=0) + 1
            discussion = Discussion(
                num=num,
                title=title,
                author=author,
                is_pull_request=pull_request,
                status="draft" if pull_request else "open",
                created_at=now_iso(),
                target_branch=base,
            )
            discussion.events.append(comment_event(author, description))
            repo.discussions.append(discussion)
            if pull_request:
                repo.refs[f"refs/pr/{num}"] = repo.refs[base]
            self.save(repo)
            return discussion

    def delete_discussion(self, repo: Repo, num: int) -> Discussion:
        """Remove discussion `num` and, for a pull request, its ref; returns what was removed."""
        with self.lock:
            d = self.discussion(repo, num)
            repo.discussions.remove(d)
            if d.ref is not None:
                repo.refs.pop(d.ref, None)
            self.save(repo)
            return d

    def move_ref(self, repo: Repo, ref: str, oid: str) -> str | None:
        """Point `ref` at the existing commit `oid` (what a force-push does); returns the old head."""
        with self.lock:
            if oid not in repo.commits:
                raise HubError(404, f"Invalid rev id: {oid}", "RevisionNotFound")
            before = repo.refs.get(ref)
            repo.refs[ref] = oid
            repo.last_modified = now_iso()
            self.save(repo)
            return before

    def discussion(self, repo: Repo, num: int) -> Discussion:
        for d in repo.discussions:
            if d.num == num:
                return d
        raise HubError(404, f"Discussion {num} not found")


def comment_event(author: str, text: str) -> dict[str, Any]:
    """A discussion event of type comment, as the Hub serializes it."""
    return {
        "id": object_id(),
        "type": "comment",
        "createdAt": now_iso(),
        "author": {"name": author, "type": "user"},
        "data": {
            "edited": False,
            "hidden": False,
            "latest": {"raw": text, "html": text, "updatedAt": now_iso(), "author": {"name": author}},
            "numEdits": 0,
            "editors": [author],
            "reactions": [],
        },
    }
