"""A local stand-in for the Hugging Face Hub, for tests: real HTTP on 127.0.0.1, real repos on disk.

Point the real `huggingface_hub` client at it with `HF_ENDPOINT=hub.url` and `HF_TOKEN=hub.token`
(or `HfApi(endpoint=hub.url, token=hub.token)`); nothing is patched. Seed it directly:

    with HubStandIn(tmp_path) as hub:
        hub.create_space("alice/echo_env", files={"openenv.yaml": "...", "Dockerfile": "..."},
                         tags=["openenv"], stage="SLEEPING")
        hub.requests[("GET", "/api/{kind}")]   # how many Space listings were served

What it speaks: whoami; create/delete repo; preupload + commit (also `create_pr`); file trees
and downloads at any revision; duplicate; list spaces (filter, search, author, expand, full,
limit, sort, Link-header pagination); space info and runtime (stages incl. SLEEPING, domains); restart (a Space wakes as `wake_plan` says);
variables and secrets; refs and commits; discussions, pull requests, comments (edit), status,
merge, delete; move; force pushes (`force_push`); the API's 429 with Retry-After (`throttle`); webhooks (registered with `HfApi.create_webhook`, delivered like the Hub's, see
webhooks.py). Uploads are stored inline (it never asks for LFS/Xet).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tests.support.hf_hub.app import HubState, User, create_hub_app
from tests.support.hf_hub.store import Commit, Discussion, HubError, HubStore, Repo, comment_event
from tests.support.hf_hub.webhooks import WebhookSender
from tests.support.servers import ThreadServer

__all__ = [
    "STAGES",
    "Commit",
    "Discussion",
    "HubError",
    "HubStandIn",
    "HubStore",
    "Repo",
    "User",
    "hub_stand_in",
    "space_readme",
]

STAGES = (
    "NO_APP_FILE",
    "CONFIG_ERROR",
    "BUILDING",
    "BUILD_ERROR",
    "APP_STARTING",
    "RUNNING",
    "RUNNING_BUILDING",
    "RUNNING_APP_STARTING",
    "RUNTIME_ERROR",
    "DELETING",
    "STOPPED",
    "PAUSED",
    "SLEEPING",
)


def _bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def space_readme(title: str, *, tags: Iterable[str] = ("openenv",), app_port: int = 8000, sdk: str = "docker") -> str:
    """A Space README with front matter (what seeded Spaces get when no README is given)."""
    tag_lines = "".join(f"  - {t}\n" for t in tags)
    return f"---\ntitle: {title}\nsdk: {sdk}\napp_port: {app_port}\ntags:\n{tag_lines}---\n\n# {title}\n"


class HubStandIn:
    """The stand-in Hub: a store on disk, its HTTP app, users, and a seeding API.

    Args:
        root: folder for the repos (reuse it to start again on the same data).
        user: the default user's name; `token` is theirs.
        orgs: organizations the default user belongs to.
        page_size: items per page of listings (the Link header leads to the next).
    """

    def __init__(
        self, root: str | Path, *, user: str = "alice", orgs: Iterable[str] = ("openenv-org",), page_size: int = 100
    ) -> None:
        self.store = HubStore(Path(root))
        self.state = HubState(store=self.store, page_size=page_size)
        self.token = self.add_user(user, orgs=orgs)
        self.user = user
        self.app = create_hub_app(self.state)
        self._server: ThreadServer | None = None
        self.url = ""

    # -- serving ------------------------------------------------------------------------------------

    def start(self) -> str:
        """Serve on a free 127.0.0.1 port; returns the URL (also `self.url`)."""
        self._server = ThreadServer(self.app)
        self.url = self._server.start()
        self.state.endpoint = self.url
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> HubStandIn:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client_env(self, token: str | None = None, hf_home: str | Path | None = None) -> dict[str, str]:
        """Environment variables that point `huggingface_hub` (in a child process) at this Hub."""
        env = {
            "HF_ENDPOINT": self.url,
            "HF_TOKEN": token or self.token,
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_HUB_ETAG_TIMEOUT": "10",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "0",
        }
        if hf_home is not None:
            env["HF_HOME"] = str(hf_home)
        return env

    # -- users and counters -------------------------------------------------------------------------

    def add_user(self, name: str, *, token: str | None = None, orgs: Iterable[str] = (), role: str = "write") -> str:
        """Add a user; returns their token."""
        token = token or f"hf_{name}_{secrets.token_hex(8)}"
        self.state.users[token] = User(name=name, token=token, orgs=list(orgs), role=role)
        return token

    @property
    def requests(self) -> Any:
        """Counter of served requests by (method, route template), e.g. ("GET", "/api/{kind}")."""
        return self.state.requests

    def request_count(self, method: str | None = None, route: str | None = None) -> int:
        """Requests served, optionally only of one method and/or route template."""
        return sum(
            n
            for (m, r), n in self.state.requests.items()
            if (method is None or m == method) and (route is None or r == route)
        )

    def reset_requests(self) -> None:
        self.state.requests.clear()

    def throttle(self, path: str, *, after: int = 0, times: int = 1, retry_after: int = 1, status: int = 429) -> None:
        """Refuse the `times` GET requests to `path` that come after the next `after` with the Hub's
        429, `Retry-After: retry_after` and its RateLimit headers (ratelimit.py); refused requests
        are counted under the path itself, e.g. `request_count("GET", "/api/spaces")`."""
        self.app.state.throttle.plan(path, after=after, times=times, retry_after=retry_after, status=status)

    # -- webhooks -----------------------------------------------------------------------------------

    @property
    def webhooks(self) -> WebhookSender:
        """Registered webhooks (`.hooks`), what was sent (`.deliveries`), `.wait()` and `.replay(i)`."""
        return self.state.webhooks

    @property
    def auto_run(self) -> bool:
        return self.state.auto_run

    @auto_run.setter
    def auto_run(self, value: bool) -> None:
        self.state.auto_run = value

    # -- seeding ------------------------------------------------------------------------------------

    def create_space(
        self,
        repo_id: str,
        *,
        files: Mapping[str, str | bytes] | None = None,
        tags: Iterable[str] = ("openenv",),
        stage: str = "RUNNING",
        sha: str | None = None,
        private: bool = False,
        sdk: str = "docker",
        hardware: str = "cpu-basic",
        domains: Iterable[str] | None = None,
        likes: int = 0,
        extra_tags: Iterable[str] = (),
        variables: Mapping[str, str] | None = None,
    ) -> Repo:
        """Create a Space with one commit holding `files` (a README with `tags` is added if absent).

        Args:
            sha: the commit id to give that commit (40 hex digits), for tests that know it.
            stage: the runtime stage (see `STAGES`).
            domains: hosts the Space is served at (default `<subdomain>.hf.space`); a test can
                put a local server's `127.0.0.1:PORT` here.
            extra_tags: tags the Hub adds beyond the README's (e.g. "mcp-server").
        """
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}")
        content = {k: _bytes(v) for k, v in (files or {}).items()}
        content.setdefault("README.md", _bytes(space_readme(repo_id.split("/")[-1], tags=tags, sdk=sdk)))
        with self.store.lock:
            repo = self.store.create("space", repo_id, private=private, sdk=sdk, author=repo_id.split("/")[0])
            self.store.commit(repo, "main", content, [], title="seed", author=repo.owner, oid=sha)
            repo.likes = likes
            repo.extra_tags = list(extra_tags)
            repo.variables = {
                k: {"value": v, "description": None, "updatedAt": repo.created_at} for k, v in (variables or {}).items()
            }
            self.set_runtime(repo_id, stage=stage, hardware=hardware, domains=domains)
        return repo

    def create_spaces(self, specs: Iterable[Mapping[str, Any]]) -> list[Repo]:
        """Create many Spaces at once (`create_space` keyword arguments plus `repo_id`), one disk write each."""
        with self.store.batch():
            return [self.create_space(**dict(spec)) for spec in specs]

    def space(self, repo_id: str) -> Repo:
        """The stored Space (raises HubError 404)."""
        return self.store.get("space", repo_id)

    def commit(
        self,
        repo_id: str,
        files: Mapping[str, str | bytes] | None = None,
        *,
        deletes: Iterable[str] = (),
        message: str = "update",
        branch: str = "main",
        sha: str | None = None,
        repo_type: str = "space",
    ) -> Commit:
        """Commit to a repo directly (as if someone pushed); returns the commit."""
        repo = self.store.get(repo_type, repo_id)
        before = repo.refs.get(branch)
        made = self.store.commit(
            repo,
            branch,
            {k: _bytes(v) for k, v in (files or {}).items()},
            list(deletes),
            title=message,
            author=repo.owner,
            oid=sha,
        )
        ref = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
        self.state.webhooks.emit(
            repo, "repo.content", "update", updated_refs=[{"ref": ref, "oldSha": before, "newSha": made.oid}]
        )
        return made

    def force_push(self, repo_id: str, sha: str, *, branch: str = "main", repo_type: str = "space") -> None:
        """Point `branch` at a commit it had before (`git push --force`), with the Hub's webhook:
        main can go A→B→A→B, and the second A→B delivery is byte-identical to the first."""
        repo = self.store.get(repo_type, repo_id)
        before = self.store.move_ref(repo, branch, sha)
        ref = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
        self.state.webhooks.emit(
            repo, "repo.content", "update", updated_refs=[{"ref": ref, "oldSha": before, "newSha": sha}]
        )

    def set_runtime(
        self,
        repo_id: str,
        *,
        stage: str | None = None,
        hardware: str | None = None,
        domains: Iterable[str] | None = None,
        **raw: Any,
    ) -> dict[str, Any]:
        """Change a Space's runtime (stage, hardware, domains, or any raw field); returns it."""
        repo = self.space(repo_id)
        runtime = dict(repo.runtime)
        if stage is not None:
            if stage not in STAGES:
                raise ValueError(f"stage must be one of {STAGES}")
            runtime["stage"] = stage
        if hardware is not None:
            running = runtime.get("stage") in ("RUNNING", "RUNNING_BUILDING", "RUNNING_APP_STARTING")
            runtime["hardware"] = {"current": hardware if running else None, "requested": hardware}
        if domains is not None:
            runtime["domains"] = [{"domain": d, "stage": "READY"} for d in domains]
        runtime.update(raw)
        repo.runtime = runtime
        self.store.save(repo)
        return runtime

    def wake_plan(self, repo_id: str, stages: Iterable[tuple[str, float]]) -> None:
        """What a restart request (`HfApi.restart_space`, a wake) does to the Space: its runtime goes to
        each stage the given seconds after the request, e.g. `[("APP_STARTING", 0.2), ("RUNNING", 1.0)]`.
        Without a plan the request is accepted and the Space stays as it is (asleep past any wait)."""
        plan = list(stages)
        if any(stage not in STAGES for stage, _ in plan):
            raise ValueError(f"stage must be one of {STAGES}")
        self.state.wake_plans[self.space(repo_id).id] = plan

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "space") -> dict[str, bytes]:
        """Every file of a repo at a revision."""
        repo = self.store.get(repo_type, repo_id)
        commit = repo.resolve(revision)
        return {p: self.store.blob(e) for p, e in commit.tree.items()}

    def open_discussion(
        self,
        repo_id: str,
        title: str,
        *,
        author: str | None = None,
        description: str = "",
        pull_request: bool = False,
        repo_type: str = "space",
    ) -> Discussion:
        repo = self.store.get(repo_type, repo_id)
        return self.store.open_discussion(
            repo, title=title, author=author or self.user, description=description, pull_request=pull_request
        )

    def add_comment(
        self, repo_id: str, num: int, text: str, *, author: str | None = None, repo_type: str = "space"
    ) -> dict[str, Any]:
        repo = self.store.get(repo_type, repo_id)
        event = comment_event(author or self.user, text)
        self.store.discussion(repo, num).events.append(event)
        self.store.save(repo)
        return event


@contextlib.contextmanager
def hub_stand_in(root: str | Path, **kwargs: Any) -> Iterator[HubStandIn]:
    """A started stand-in Hub for the block."""
    with HubStandIn(root, **kwargs) as hub:
        yield hub
