"""The job queue: atomic claims under concurrency, heartbeats, stale jobs reclaimed or failed."""

from __future__ import annotations

import threading
import time

from sqlalchemy import select

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.indexer.service import index_source
from hub_service.queue import jobs
from hub_service.queue.models import Job
from tests.hub.helpers import ListSource, space


def test_concurrent_workers_never_claim_the_same_job(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(i) for i in range(60)]))
    claimed: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        mine = claimed.setdefault(name, [])
        try:
            while (c := jobs.claim(clean_factory, name)) is not None:
                mine.append(c.job_id)
                assert jobs.finish(clean_factory, c.job_id, name, ok=True)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    all_ids = [j for ids in claimed.values() for j in ids]
    assert len(all_ids) == 60 and len(set(all_ids)) == 60
    with clean_factory() as s:
        assert {j.state for j in s.scalars(select(Job))} == {"done"}


def test_claim_marks_the_version_running_and_counts_attempts(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(1)]))
    claim = jobs.claim(clean_factory, "w1")
    assert claim is not None and claim.attempt == 1
    with clean_factory() as s:
        assert s.get(EnvVersion, claim.version_id).state == "running"
        assert s.get(Job, claim.job_id).worker_id == "w1"
    assert jobs.claim(clean_factory, "w2") is None
    assert jobs.heartbeat(clean_factory, claim.job_id, "w1")
    assert not jobs.heartbeat(clean_factory, claim.job_id, "w2")


def test_a_dead_workers_job_is_requeued_then_given_up(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(1)]), max_attempts=2)
    first = jobs.claim(clean_factory, "dies-1")
    time.sleep(0.3)
    assert jobs.reclaim_stale(clean_factory, stale_after_s=0.1) == [(first.job_id, "queued")]
    assert not jobs.finish(clean_factory, first.job_id, "dies-1", ok=True)  # the dead worker lost it
    second = jobs.claim(clean_factory, "dies-2")
    assert second.job_id == first.job_id and second.attempt == 2
    time.sleep(0.3)
    assert jobs.reclaim_stale(clean_factory, stale_after_s=0.1) == [(first.job_id, "failed")]
    with clean_factory() as s:
        job = s.get(Job, first.job_id)
        assert job.state == "failed" and "stopped responding" in job.error
        version = s.get(EnvVersion, job.version_id)
        assert version.state == "failed" and version.failure_stage == "worker"
        env = s.scalar(select(EnvRecord))
        assert env.status == "failing"


def test_fresh_heartbeats_are_not_reclaimed(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(1)]))
    claim = jobs.claim(clean_factory, "alive")
    time.sleep(0.3)
    jobs.heartbeat(clean_factory, claim.job_id, "alive")
    assert jobs.reclaim_stale(clean_factory, stale_after_s=0.2) == []


def test_requeue_after_a_transient_error(clean_factory) -> None:
    index_source(clean_factory, ListSource([space(1)]), max_attempts=2)
    c1 = jobs.claim(clean_factory, "w")
    assert jobs.requeue(clean_factory, c1.job_id, "w", "engine restarting") == "queued"
    c2 = jobs.claim(clean_factory, "w")
    assert jobs.requeue(clean_factory, c2.job_id, "w", "engine restarting") == "failed"
    with clean_factory() as s:
        assert "gave up after 2 attempts" in s.get(Job, c1.job_id).error
