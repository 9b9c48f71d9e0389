"""The pull-request bot against the stand-in Hub: a pull request on an indexed Space gets its head
checked and ONE comment that later pushes edit; a closed pull request stops its checks; the env's
main status never moves. (The Docker journey, a fix that turns the comment green, is in
test_prbot_docker.py.)"""

from __future__ import annotations

import httpx
import pytest
from huggingface_hub import CommitOperationAdd
from sqlalchemy import select

from hub_service.catalog.models import EnvVersion
from hub_service.db import session_scope
from hub_service.prbot.models import PullRequestCheck
from hub_service.queue.models import Job
from tests.hub.live import Live, env_files

REPO = "alice/bad_env"


def _main_state(live: Live) -> tuple[str, int | None, str | None]:
    env = live.env(REPO)
    return env.status, env.latest_version_id, env.sha


def _version(live: Live, sha: str) -> EnvVersion:
    with live.factory() as s:
        return s.scalar(select(EnvVersion).where(EnvVersion.sha == sha))


def test_a_broken_pull_request_gets_one_comment_that_later_pushes_edit(live: Live) -> None:
    live.publish(REPO, env_files("bad_manifest"))
    assert sorted(live.work()) == ["done", "failed"]  # index, then main fails validation (no build needed)
    main = _main_state(live)
    assert main[0] == "failing"

    num, head = live.open_pr(
        REPO,
        env_files(
            "bad_manifest",
            **{"README.md": "---\ntitle: bad\nsdk: docker\napp_port: 8000\ntags: [openenv]\n---\n# bad\n"},
        ),
    )
    assert live.tasks() == ["done", "done"]  # pr_sync (the two deliveries coalesce), then the first report
    [queued] = live.bot_comments(REPO, num)
    assert f"queued for `{head[:12]}`" in queued.content

    assert "failed" in live.work()
    [comment] = live.bot_comments(REPO, num)
    assert comment.id == queued.id and comment.edited
    text = comment.content
    assert f"❌ OpenEnv checks failed for `{head[:12]}`" in text
    assert "**`manifest.schema`** (`openenv.yaml`" in text and "port: input should be a valid integer" in text
    assert "Fix: use a port number such as 8000" in text
    # the RFC 008 report's static level, by check id: what failed, its evidence and its fix
    assert "**RFC 008 checks** (policy `v2`, hub lane, levels 1): ❌ fail" in text
    assert "| `static.manifest` | fail | openenv.yaml has no \\`validation:\\` block |" in text
    assert "| `static.layout` | fail | manifest.schema: openenv.yaml:5: app: 'server/app.py' is not valid here" in text
    assert f"https://hub.example.org/api/v1/envs/{REPO}/versions/{head}" in text and f"{head}/logs/validate" in text
    version = _version(live, head)
    assert (version.ref, version.state, version.failure_stage) == (f"refs/pr/{num}", "failed", "validate")
    assert _main_state(live) == main  # a pull request never changes the env's status

    # The contributor fixes the manifest but breaks the README: the same comment now lists that.
    fixed_manifest = "spec_version: 1\nname: bad_env\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n"
    gradio = "---\ntitle: bad\nsdk: gradio\napp_port: 8000\ntags: [openenv]\n---\n# bad\n"
    second = live.push_pr(REPO, num, {"openenv.yaml": fixed_manifest.encode(), "README.md": gradio.encode()})
    assert "failed" in live.work()
    [comment] = live.bot_comments(REPO, num)
    assert comment.id == queued.id
    assert f"failed for `{second[:12]}`" in comment.content and "readme.sdk" in comment.content
    assert "manifest.schema" not in comment.content
    assert _main_state(live) == main

    pulls = httpx.get(f"{live.url}/api/v1/envs/{REPO}/pulls").json()["items"]
    assert pulls == [
        {
            **pulls[0],
            "num": num,
            "status": "draft",
            "head_sha": second,
            "state": "failed",
            "failure_stage": "validate",
            "commented": True,
        }
    ]
    kinds = [
        e["kind"]
        for e in httpx.get(f"{live.url}/api/v1/envs/{REPO}/events", params={"kind": "pr_checked"}).json()["items"]
    ]
    assert kinds == ["pr_checked"] * 4  # queued + commented, twice


def test_closing_a_pull_request_cancels_its_check(live: Live) -> None:
    live.publish(REPO, env_files("bad_manifest"))
    live.work()
    num, head = live.open_pr(REPO, env_files("bad_manifest", **{"NOTES.md": "wip"}))
    live.tasks()
    with live.factory() as s:
        job = s.scalar(select(Job).where(Job.kind == "pipeline", Job.state == "queued"))
        assert job is not None and s.get(EnvVersion, job.version_id).sha == head

    live.bob.change_discussion_status(REPO, num, "closed", repo_type="space")
    assert live.tasks() == ["done", "done"]  # the sync cancels; the report says so
    with live.factory() as s:
        assert s.get(Job, job.id).state == "cancelled" and "was closed" in s.get(Job, job.id).error
        assert s.get(EnvVersion, job.version_id).state == "cancelled"
        assert s.scalar(select(PullRequestCheck.status)) == "closed"
    [comment] = live.bot_comments(REPO, num)
    assert "stopped" in comment.content and "This pull request is closed" in comment.content
    assert live.work() == []  # nothing left to run
    events = httpx.get(f"{live.url}/api/v1/envs/{REPO}/events", params={"kind": "cancelled"}).json()["items"]
    assert len(events) == 1 and events[0]["sha"] == head and "was closed" in events[0]["cause"]

    # Reopened: the check runs again on the same head.
    live.bob.change_discussion_status(REPO, num, "open", repo_type="space")
    assert "failed" in live.work()
    assert _version(live, head).state == "failed"
    [comment] = live.bot_comments(REPO, num)
    assert "❌" in comment.content


def test_a_new_push_replaces_the_check_of_the_old_head(live: Live) -> None:
    live.publish(REPO, env_files("bad_manifest"))
    live.work()
    num, first = live.open_pr(REPO, env_files("bad_manifest", **{"NOTES.md": "one"}))
    live.tasks()
    second = live.push_pr(REPO, num, {"NOTES.md": b"two"})
    live.tasks()
    assert _version(live, first).state == "cancelled"
    outcomes = live.work()
    assert outcomes.count("failed") == 1  # only the new head ran
    assert _version(live, second).state == "failed"
    [comment] = live.bot_comments(REPO, num)
    assert second[:12] in comment.content and first[:12] not in comment.content


def test_the_bot_finds_its_comment_again_when_the_database_forgot_it(live: Live) -> None:
    live.publish(REPO, env_files("bad_manifest"))
    live.work()
    num, _ = live.open_pr(REPO, env_files("bad_manifest", **{"NOTES.md": "one"}))
    live.work()
    with session_scope(live.factory) as s:  # webhooks of the bot's own comments may be writing too
        check = s.scalar(select(PullRequestCheck))
        check.comment_id, check.reported = None, None
    live.bob.create_commit(
        REPO,
        [CommitOperationAdd("NOTES.md", b"two")],
        commit_message="again",
        repo_type="space",
        revision=f"refs/pr/{num}",
    )
    live.work()
    assert len(live.bot_comments(REPO, num)) == 1


def test_a_hub_that_cannot_be_reached_is_a_wait_not_a_refusal() -> None:
    """The bot's Hub calls going nowhere (connection refused) are the network's trouble: retried
    later (Transient), never reported as the Hub refusing the pull request."""
    from hub_service.pipeline.stages import Transient
    from hub_service.prbot.hub import HubPullRequests
    from tests.support.servers import free_port

    hub = HubPullRequests(f"http://127.0.0.1:{free_port()}", token="hf_test")
    with pytest.raises(Transient, match="reading alice/bad_env discussion #1"):
        hub.info(REPO, 1)
