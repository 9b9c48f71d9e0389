"""Issue 37: while a pull request's revision waits for the Hub's infrastructure, the bot's comment
says so ("waiting for the Hub's infrastructure: <reason>", never blaming the Space, no internal
address), and the same comment is edited when the verdict lands. Issue 47: closing or deleting the
pull request meanwhile cancels the waiting run."""

from __future__ import annotations

import httpx
from sqlalchemy import func, select

from hub_service import lifecycle
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import VersionState
from hub_service.db import session_scope
from hub_service.queue import jobs
from hub_service.queue.kinds import JobKind, JobState
from hub_service.queue.models import Job
from tests.hub.live import Live, env_files

REPO = "alice/bad_env"


def test_a_waiting_revision_is_said_to_wait_and_the_comment_is_edited_with_the_verdict(live: Live) -> None:
    live.publish(REPO, env_files("bad_manifest"))
    live.work()
    num, head = live.open_pr(
        REPO,
        env_files(
            "bad_manifest",
            **{"README.md": "---\ntitle: bad\nsdk: docker\napp_port: 8000\ntags: [openenv]\n---\n# bad\n"},
        ),
    )
    live.tasks()
    [queued] = live.bot_comments(REPO, num)
    assert f"queued for `{head[:12]}`" in queued.content

    # What the runner does when the engine is gone: the revision waits, with the infrastructure's words.
    with session_scope(live.factory) as s:
        version = s.scalar(select(EnvVersion).where(EnvVersion.sha == head))
        env = s.get(EnvRecord, version.env_id)
        lifecycle.move(s, env, version, VersionState.RUNNING, cause="test: a worker took it")
        lifecycle.move(
            s,
            env,
            version,
            VersionState.WAITING,
            cause="test: the engine went away",
            waiting_code="no_engine",
            waiting_reason="no Docker engine answers at http://127.0.0.1:2375",
        )
    assert "done" in live.tasks()
    [waiting] = live.bot_comments(REPO, num)
    assert waiting.id == queued.id and waiting.edited
    assert f"waiting for `{head[:12]}`" in waiting.content
    assert "waiting for the Hub's infrastructure: `no Docker engine answers at [internal address]`" in waiting.content
    assert "127.0.0.1" not in waiting.content and "failed" not in waiting.content

    assert "failed" in live.work()  # the run goes on and lands its verdict
    [verdict] = live.bot_comments(REPO, num)
    assert verdict.id == queued.id
    assert f"❌ OpenEnv checks failed for `{head[:12]}`" in verdict.content
    assert "waiting for the Hub's infrastructure" not in verdict.content


def _wait_like_the_runner(live: Live, sha: str) -> int:
    """What the runner does when the infrastructure fails a run: the job goes back to the queue, due
    in an hour, and the revision waits. Returns the job's id."""
    claim = jobs.claim(live.factory, "worker", kinds=(JobKind.PIPELINE,))
    assert claim is not None
    waited = jobs.wait_for_infrastructure(
        live.factory, claim.job_id, "worker", "no Docker engine answers", first_s=3600, max_s=3600
    )
    assert waited is not None and waited.delay == 3600
    with session_scope(live.factory) as s:
        version = s.get_one(EnvVersion, claim.version_id)
        assert version.sha == sha
        env = s.get_one(EnvRecord, version.env_id)
        lifecycle.move(
            s, env, version, VersionState.WAITING, cause="test: the engine went away", waiting_code="no_engine"
        )
    return claim.job_id


def _job_and_version(live: Live, job_id: int) -> tuple[str, str | None, str]:
    with live.factory() as s:
        job = s.get_one(Job, job_id)
        return job.state, job.error, s.get_one(EnvVersion, job.version_id).state


def test_closing_or_deleting_a_pull_request_cancels_a_run_that_waits_for_the_infrastructure(live: Live) -> None:
    """Issue 47: the job of a waiting revision sits queued with a `run_after` in the future; closing
    (or deleting) its pull request must cancel it, not leave it to run later to a verdict."""
    live.publish(REPO, env_files("bad_manifest"))
    live.work()
    closed, closed_head = live.open_pr(REPO, env_files("bad_manifest", **{"NOTES.md": "one"}))
    live.tasks()
    closed_job = _wait_like_the_runner(live, closed_head)
    deleted, deleted_head = live.open_pr(REPO, env_files("bad_manifest", **{"NOTES.md": "two"}), title="Another")
    live.tasks()
    deleted_job = _wait_like_the_runner(live, deleted_head)
    assert _job_and_version(live, closed_job)[::2] == _job_and_version(live, deleted_job)[::2] == ("queued", "waiting")

    live.bob.change_discussion_status(REPO, closed, "closed", repo_type="space")
    live.tasks()
    state, error, version = _job_and_version(live, closed_job)
    assert (state, version) == ("cancelled", "cancelled") and "was closed" in (error or "")
    [comment] = live.bot_comments(REPO, closed)
    assert "This pull request is closed" in comment.content and "waiting for the Hub" not in comment.content

    auth = {"Authorization": f"Bearer {live.hub.token}"}
    httpx.delete(f"{live.hub.url}/api/spaces/{REPO}/discussions/{deleted}", headers=auth).raise_for_status()
    live.tasks()
    state, error, version = _job_and_version(live, deleted_job)
    assert (state, version) == ("cancelled", "cancelled") and "was deleted" in (error or "")

    with live.factory() as s:  # nothing is left to run, now or in an hour
        assert s.scalar(select(func.count()).select_from(Job).where(Job.state == JobState.QUEUED)) == 0
    cancelled = httpx.get(f"{live.url}/api/v1/envs/{REPO}/events", params={"kind": "cancelled"}).json()["items"]
    assert {e["sha"] for e in cancelled} == {closed_head, deleted_head}
