"""Issue 37: while a pull request's revision waits for the Hub's infrastructure, the bot's comment
says so ("waiting for the Hub's infrastructure: <reason>", never blaming the Space, no internal
address), and the same comment is edited when the verdict lands."""

from __future__ import annotations

from sqlalchemy import select

from hub_service import lifecycle
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import VersionState
from hub_service.db import session_scope
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
