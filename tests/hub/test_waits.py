"""Every wait is bounded and honest (issue 29): whose trouble a failed build is comes from what a
Space cannot forge (the engine's API, a registry's HTTP status), never from the words a build step
prints; a revision that waits for the infrastructure fails at the Hub's caps with its last wait's
stage, code and reason in the API; and a build failure's reason names the step, its command and
its first error line. Fixtures: tests/hub/envs/{engine_words,missing_copy,missing_base}."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from hub_service.app import create_app
from hub_service.audit.models import EnvEvent
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.queue.models import Job
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_pipeline import _needs_docker, make_envs, verdicts
from tests.support.dockerd import engine_past_its_start_up
from tests.support.oci_registry import stand_in_registry
from tests.support.servers import serve_app

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_forged_engine_words_a_missing_copy_and_a_missing_base_fail_in_one_attempt(
    clean_factory, hub_settings: HubSettings
) -> None:
    _needs_docker()
    engine_past_its_start_up()
    settings = hub_settings.model_copy(update={"builder": "container", "infra_retry_s": 600.0})
    root = make_envs(Path(settings.local_source), "engine_words", "missing_copy", "missing_base")
    with stand_in_registry("open") as registry:  # answers 404 for every manifest: the image exists nowhere
        dockerfile = root / "missing_base" / "Dockerfile"
        dockerfile.write_text(dockerfile.read_text().replace("registry.invalid/", f"{registry}/"))
        index_source(clean_factory, LocalSource(root))
        assert Worker(settings, clean_factory).run_until_idle(max_wait_s=1) == ["failed"] * 3
    v = verdicts(clean_factory)
    for name in ("engine_words", "missing_copy", "missing_base"):
        assert (v[name].state, v[name].failure_stage, v[name].failure_code) == ("failed", "build", None), name
        assert v[name].waiting_code is None and v[name].waiting_since is None, name

    # The reason names the step, its command and its first error line, not the log's last line.
    words = v["engine_words"].failure_reason
    assert words.startswith("failed at step [4/4] `RUN echo 'runc run failed") and words.endswith("(exit code 1)"), (
        words
    )
    copy = v["missing_copy"].failure_reason
    assert copy.startswith("failed at step [4/4] `COPY assets/ /app/assets/`:") and '"/assets" not found' in copy, copy
    base = v["missing_base"].failure_reason
    assert f"{registry}/openenv-test/no-such-base:1" in base and "answered HTTP 404" in base, base

    with clean_factory() as s:
        jobs = s.scalars(select(Job)).all()
        kinds = [e.kind for e in s.scalars(select(EnvEvent))]
    assert [(j.state, j.attempts, j.infra_waits) for j in jobs] == [("failed", 1, 0)] * 3  # one attempt, no wait
    assert "waiting" not in kinds


def test_a_registry_nobody_reaches_waits_then_fails_at_the_cap_with_its_stage_code_and_reason(
    clean_factory, hub_settings: HubSettings
) -> None:
    _needs_docker()
    # registry.invalid resolves nowhere: no registry answers (the machine's trouble, not the env's), so it waits...
    settings = hub_settings.model_copy(
        update={"builder": "container", "infra_retry_s": 0.05, "infra_retry_max_s": 0.05, "infra_wait_max_count": 3}
    )
    index_source(clean_factory, LocalSource(make_envs(Path(settings.local_source), "missing_base")))
    worker = Worker(settings, clean_factory)
    assert worker.run_once() == "waiting"
    version = verdicts(clean_factory)["missing_base"]
    assert (version.state, version.waiting_code) == ("waiting", "base_image")
    assert "registry.invalid does not answer" in version.waiting_reason
    # ...up to the Hub's cap: the third try is the last.
    assert worker.run_until_idle(max_wait_s=1) == ["waiting", "failed"]
    version = verdicts(clean_factory)["missing_base"]
    assert (version.state, version.failure_stage, version.failure_code) == ("failed", "build", "base_image")
    reason = version.failure_reason
    assert reason.startswith("gave up waiting for the infrastructure after 3 tries") and "cap is 3 tries" in reason
    assert "registry.invalid does not answer" in reason, reason
    with clean_factory() as s:
        job = s.scalar(select(Job))
    assert (job.state, job.infra_waits, job.attempts) == ("failed", 3, 1)

    with serve_app(create_app(settings, run_migrations=False)) as url:
        shown = httpx.get(f"{url}/api/v1/envs/local/missing_base").json()
    assert shown["status"] == "failing"
    latest = shown["versions"][0]
    assert (latest["state"], latest["failure_stage"], latest["failure_code"]) == ("failed", "build", "base_image")
    assert latest["failure_reason"] == reason


def test_the_time_cap_ends_a_wait_too(clean_factory, hub_settings: HubSettings) -> None:
    _needs_docker()
    settings = hub_settings.model_copy(
        update={"builder": "container", "infra_retry_s": 0.05, "infra_retry_max_s": 0.05, "infra_wait_max_s": 0.5}
    )
    index_source(clean_factory, LocalSource(make_envs(Path(settings.local_source), "missing_base")))
    worker = Worker(settings, clean_factory)
    assert worker.run_once() == "waiting"
    with clean_factory() as s:
        first = s.scalar(select(Job.first_waited_at))
    assert first is not None
    outcomes = worker.run_until_idle(max_wait_s=1)
    assert outcomes[-1] == "failed" and set(outcomes[:-1]) <= {"waiting"}
    version = verdicts(clean_factory)["missing_base"]
    assert (version.failure_stage, version.failure_code) == ("build", "base_image")
    assert "(the Hub's cap is 0.5s)" in version.failure_reason, version.failure_reason


def test_a_registry_that_refuses_or_is_in_trouble(clean_factory, hub_settings: HubSettings) -> None:
    """Docker Hub's answer for a repository that does not exist (401 to an anonymous token) is the
    env's failure; a registry answering 503 is the machine's (it waits)."""
    _needs_docker()
    settings = hub_settings.model_copy(update={"builder": "container", "infra_retry_s": 600.0})
    root = make_envs(Path(settings.local_source), "missing_base")
    dockerfile = root / "missing_base" / "Dockerfile"
    original = dockerfile.read_text()
    with stand_in_registry("bearer") as registry:
        dockerfile.write_text(original.replace("registry.invalid/", f"{registry}/"))
        index_source(clean_factory, LocalSource(root))
        assert Worker(settings, clean_factory).run_once() == "failed"
    refused = verdicts(clean_factory)["missing_base"]
    assert refused.failure_stage == "build" and "answered HTTP 401" in refused.failure_reason
    assert "anonymous pulls" in refused.failure_reason

    with stand_in_registry("trouble") as registry:
        dockerfile.write_text(original.replace("registry.invalid/", f"{registry}/").replace(":1", ":2"))
        index_source(clean_factory, LocalSource(root))
        assert Worker(settings, clean_factory).run_once() == "waiting"
    troubled = [v for v in verdicts_all(clean_factory) if v.state == "waiting"]
    assert len(troubled) == 1 and troubled[0].waiting_code == "base_image"
    assert "answered HTTP 503" in troubled[0].waiting_reason


def verdicts_all(factory) -> list:
    from hub_service.catalog.models import EnvVersion

    with factory() as s:
        return list(s.scalars(select(EnvVersion)))
