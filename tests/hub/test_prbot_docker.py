"""The pull-request journey with real builds: a Space passing on main gets a pull request with a
broken manifest (the bot's one comment lists the failure), then a fix (the same comment turns
green, with latency against main), then a slow push that is cancelled mid-build when the pull
request closes (the worker notices through its heartbeat). Main's status never moves."""

from __future__ import annotations

import os
import threading
import time

import httpx
import pytest
from sqlalchemy import select

from hub_service.catalog.models import EnvVersion
from hub_service.catalog.stage_runs import StageRun
from hub_service.worker import Worker
from tests.hub.live import Live, env_files
from tests.support.dockerd import engine_past_its_start_up
from tests.support.images import remove_tagged
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = "alice/echo_env"


@pytest.fixture()
def docker_live(live: Live):
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system(
            "Docker",
            "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`, which starts Docker and makes the base image",
        )
    yield live
    import docker

    client = docker.from_env()
    remove_tagged(client, live.settings.image_prefix)


def _version(live: Live, sha: str) -> EnvVersion:
    with live.factory() as s:
        return s.scalar(select(EnvVersion).where(EnvVersion.sha == sha))


def test_a_fix_pushed_to_a_pull_request_turns_its_comment_green(docker_live: Live) -> None:
    live = docker_live
    engine_past_its_start_up()  # the pull request's first revision fails for its own reason
    main_sha = live.publish(REPO, env_files("echo_env"))
    assert sorted(live.work()) == ["done", "passed"]
    env = live.env(REPO)
    assert (env.status, env.sha) == ("passing", main_sha)
    main = (env.status, env.latest_version_id, env.cold_start_s)

    broken = env_files(
        "echo_env",
        **{"openenv.yaml": (live.hub.files(REPO)["openenv.yaml"].decode().replace("port: 8000", "port: eighty"))},
    )
    num, head = live.open_pr(REPO, broken, title="Serve on another port")
    assert "failed" in live.work()
    [comment] = live.bot_comments(REPO, num)
    assert f"❌ OpenEnv checks failed for `{head[:12]}`" in comment.content
    assert "manifest.schema" in comment.content and "Fix: use a port number such as 8000" in comment.content

    fix = live.push_pr(REPO, num, {"openenv.yaml": live.hub.files(REPO)["openenv.yaml"]}, message="Back to port 8000")
    assert "passed" in live.work()
    [comment] = live.bot_comments(REPO, num)
    text = comment.content
    assert f"✅ OpenEnv checks passed for `{fix[:12]}`" in text and "❌" not in text
    assert f"**Latency** against `main` at `{main_sha[:12]}`" in text
    assert "| cold start |" in text and "| step p50 |" in text
    version = _version(live, fix)
    assert (version.ref, version.state, version.build_status, version.smoke_status) == (
        f"refs/pr/{num}",
        "passed",
        "passed",
        "passed",
    )
    assert f"{version.cold_start_s:.2f} s" in text
    env = live.env(REPO)
    assert (env.status, env.latest_version_id, env.cold_start_s) == main  # main untouched
    assert httpx.get(f"{live.url}/api/v1/envs/{REPO}/resolve").json()["revision"] == main_sha

    # A slow push, then the pull request closes while it builds: the build's worker stops.
    dockerfile = (
        live.hub.files(REPO)["Dockerfile"]
        .decode()
        .replace("COPY . /app/env", f"RUN sleep 8 # {time.time()}\nCOPY . /app/env")
    )
    slow = live.push_pr(REPO, num, {"Dockerfile": dockerfile.encode()}, message="Slow build")
    live.tasks()
    outcome: list[list[str]] = []
    builder = threading.Thread(
        target=lambda: outcome.append(
            Worker(live.settings, live.factory, worker_id="builder", kinds=("pipeline",)).run_until_idle()
        )
    )
    builder.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with live.factory() as s:
            if (
                s.scalar(
                    select(StageRun.id)
                    .join(EnvVersion, EnvVersion.id == StageRun.version_id)
                    .where(EnvVersion.sha == slow, StageRun.stage == "build")
                )
                is not None
            ):
                break
        time.sleep(0.2)
    else:
        pytest.fail("the slow build never started")
    live.alice.change_discussion_status(REPO, num, "closed", comment="Not now", repo_type="space")
    live.tasks()  # another worker handles the webhook while the first one builds
    builder.join(180)
    assert outcome == [["cancelled"]]
    with live.factory() as s:
        stages = [
            r.stage
            for r in s.scalars(
                select(StageRun)
                .join(EnvVersion, EnvVersion.id == StageRun.version_id)
                .where(EnvVersion.sha == slow)
                .order_by(StageRun.id)
            )
        ]
    assert stages == ["fetch", "validate", "build"]  # smoke never started
    assert _version(live, slow).state == "cancelled"
    [comment] = live.bot_comments(REPO, num)
    assert "This pull request is closed; its checks were stopped" in comment.content
    env = live.env(REPO)
    assert (env.status, env.latest_version_id, env.cold_start_s) == main
