"""Infrastructure trouble is never blamed on an env: a revision the machine could not check (no
Docker engine, a base image that cannot be pulled) waits for it, with the reason, and runs again
by itself when the cause is fixed; `openenv hub rerun` runs it again at once.

And the evidence is the Hub's own (issue 47):
- a failed RUN step is checked against the network by a container of the Hub's own image, never the
  Space's base: a base whose programs lie or hang cannot keep a revision waiting or a worker stuck;
- a host that is not set up as the settings ask (a runtime the engine lacks) waits with its own code,
  `host_setup`, not counted against the env, shown on the Hub's health endpoint and the env page, and
  the revision runs by itself once a worker sees the host fixed;
- an engine that merely goes on answering does not reset a wait's backoff (only evidence it changed does);
- a stage past its deadline asks the engine before it blames the env.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import shutil
import socket
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import delete, select, update

from hub_service.app import create_app
from hub_service.audit.models import EnvEvent
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.stage_runs import StageRun
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.queue.errors import Transient
from hub_service.queue.models import Job
from hub_service.settings import HubSettings
from hub_service.ui.views import figures
from hub_service.worker import Worker
from tests.support.dockerd import engine_past_its_start_up
from tests.support.servers import ROOT, serve_app
from tests.support.socket_relay import SocketRelay
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _copy_echo(settings: HubSettings) -> Path:
    root = Path(settings.local_source)
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _one(factory, model):
    with factory() as s:
        return s.scalar(select(model))


def _base_image() -> str:
    image = os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not image:
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    return image


def test_no_engine_makes_the_revision_wait_then_it_passes_when_the_engine_answers(
    clean_factory, hub_settings, monkeypatch
) -> None:
    _base_image()
    sock_dir = Path(tempfile.mkdtemp(prefix="oe-engine-"))
    relay = SocketRelay(sock_dir / "docker.sock")
    # Nobody answers there yet. `openenv.engines` keeps one engine (and client) per host, so this
    # one is made anew for the relay and the process's usual engine is left as it was.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{relay.path}")
    settings = hub_settings.model_copy(
        update={"builder": "container", "infra_retry_s": 60.0, "infra_retry_max_s": 600.0, "infra_probe_s": 0.1}
    )
    index_source(clean_factory, LocalSource(_copy_echo(settings)))
    worker = Worker(settings, clean_factory)
    try:
        assert worker.run_once() == "waiting"
        version, env, job = _one(clean_factory, EnvVersion), _one(clean_factory, EnvRecord), _one(clean_factory, Job)
        assert (version.state, version.waiting_code, env.status) == ("waiting", "no_engine", "waiting")
        assert version.failure_stage is None and version.failure_reason is None
        assert "Docker engine" in version.waiting_reason and version.waiting_since is not None
        # Backoff, and no attempt used: a machine without an engine can wait for as long as it takes.
        assert job.state == "queued" and job.attempts == 0 and job.infra_retries == 1 and job.run_after is not None
        with clean_factory() as s:
            build = s.scalar(select(StageRun).where(StageRun.stage == "build"))
            kinds = [e.kind for e in s.scalars(select(EnvEvent).order_by(EnvEvent.id))]
        assert build.status == "failed" and "not the env's failure" in build.log
        assert kinds[-1] == "waiting" and "failed" not in kinds
        assert worker.run_once() is None  # not due yet (60 s), and the engine still does not answer
        assert _one(clean_factory, Job).run_after is not None

        relay.start()  # the engine answers: the idle worker notices and runs the revision now
        time.sleep(0.2)  # the worker's next look (infra_probe_s)
        outcomes = worker.run_until_idle(max_wait_s=5)
        assert outcomes == ["passed"]
        version, env = _one(clean_factory, EnvVersion), _one(clean_factory, EnvRecord)
        assert (version.state, env.status, version.waiting_code, version.waiting_reason) == (
            "passed",
            "passing",
            None,
            None,
        )
        assert _one(clean_factory, Job).attempts == 1
    finally:
        relay.stop()


def test_a_base_image_that_cannot_be_pulled_waits_with_what_to_do(clean_factory, hub_settings) -> None:
    _base_image()
    settings = hub_settings.model_copy(
        update={"builder": "container", "base_image": "openenv-local/no-such-base:1", "infra_retry_s": 30.0}
    )
    index_source(clean_factory, LocalSource(_copy_echo(settings)))
    assert Worker(settings, clean_factory).run_once() == "waiting"
    version, env = _one(clean_factory, EnvVersion), _one(clean_factory, EnvRecord)
    assert (version.state, version.waiting_code, env.status) == ("waiting", "base_image", "waiting")
    assert (
        "openenv-local/no-such-base:1" in version.waiting_reason and "OPENENV_HUB_BASE_IMAGE" in version.waiting_reason
    )


def test_a_build_network_without_dns_waits_but_an_unknown_host_is_the_envs_failure(clean_factory, hub_settings) -> None:
    base = _base_image()
    engine_past_its_start_up()  # the typo below is the env's own failure, on an engine up a while
    root = _copy_echo(hub_settings)
    dockerfile = (
        root / "echo_env" / "Dockerfile"
    )  # a step of its own, so that no earlier build's layers stand in for pip's
    dockerfile.write_text(
        dockerfile.read_text().replace("COPY . /app/env", f"RUN echo {uuid.uuid4().hex}\nCOPY . /app/env")
    )
    # No resolver on the build network (an outage): pip cannot resolve PyPI, and neither can the probe.
    settings = hub_settings.model_copy(update={"builder": "container", "build_network": "none", "infra_retry_s": 30.0})
    index_source(clean_factory, LocalSource(root))
    assert Worker(settings, clean_factory).run_once() == "waiting"
    version = _one(clean_factory, EnvVersion)
    assert version.waiting_code == "network" and "pypi.org" in version.waiting_reason, version.waiting_reason
    assert version.failure_reason is None and _one(clean_factory, EnvRecord).status == "waiting"

    # A typo in the env's own index URL: the name does not exist, which is the env's doing.
    dockerfile.write_text(
        dockerfile.read_text().replace(
            'RUN pip install --no-cache-dir "${OPENENV_SDK}"',
            'RUN pip install --index-url https://no-such-index.invalid/simple "${OPENENV_SDK}"',
        )
    )
    with clean_factory.begin() as s:
        s.execute(delete(Job))
        s.execute(delete(StageRun))
        s.execute(delete(EnvEvent))
        s.execute(delete(EnvVersion))
        s.execute(delete(EnvRecord))
    index_source(clean_factory, LocalSource(root))
    usual = settings.model_copy(update={"build_network": None, "base_image": base})
    assert Worker(usual, clean_factory).run_once() == "failed"
    version = _one(clean_factory, EnvVersion)
    assert (version.state, version.failure_stage, version.waiting_code) == ("failed", "build", None)
    assert _one(clean_factory, EnvRecord).status == "failing"


def test_hub_rerun_runs_waiting_and_failed_revisions_now(clean_factory, hub_settings, run_cli, tmp_path: Path) -> None:
    base = _base_image()
    settings = hub_settings.model_copy(
        update={"builder": "container", "base_image": "openenv-local/no-such-base:1", "infra_retry_s": 600.0}
    )
    index_source(clean_factory, LocalSource(_copy_echo(settings)))
    assert Worker(settings, clean_factory).run_once() == "waiting"
    env = {"OPENENV_HUB_DATABASE_URL": settings.sqlalchemy_url, "OPENENV_HUB_LOCAL_SOURCE": settings.local_source or ""}

    bad = run_cli("hub", "rerun", "local", env=env)
    assert bad.returncode == 2 and "owner/name" in bad.stderr
    missing = run_cli("hub", "rerun", "local/echo_envv", env=env)
    assert missing.returncode == 1 and "did you mean local/echo_env" in missing.stderr

    # The operator made the base image available: the waiting revision runs now, not in 10 minutes.
    done = run_cli("hub", "rerun", "local/echo_env", "--json", env=env)
    assert done.returncode == 0, done.stderr
    queued = json.loads(done.stdout)["queued"]
    assert [q["env"] for q in queued] == ["local/echo_env"] and "runs again now" in queued[0]["summary"]
    assert _one(clean_factory, Job).run_after is None
    fixed = settings.model_copy(update={"base_image": base})
    assert Worker(fixed, clean_factory).run_until_idle(max_wait_s=1) == ["passed"]

    assert json.loads(run_cli("hub", "rerun", "--failed", "--json", env=env).stdout) == {"queued": []}
    with clean_factory.begin() as s:  # say the revision had failed (an older Hub blamed the env for the machine)
        version = s.scalar(select(EnvVersion))
        version.state, version.failure_stage, version.failure_reason = "failed", "build", "no Docker engine reachable"
        s.scalar(select(EnvRecord)).status = "failing"
    again = run_cli("hub", "rerun", "--failed", env=env)
    assert (
        again.returncode == 0
        and "local/echo_env" in again.stdout
        and "queued for the pipeline again (was failed)" in again.stdout
    )
    assert _one(clean_factory, EnvVersion).state == "queued"
    busy = run_cli("hub", "rerun", "local/echo_env", env=env)
    assert busy.returncode == 1 and "already queued or running" in busy.stderr
    assert Worker(fixed, clean_factory).run_until_idle(max_wait_s=1) == ["passed"]
    assert _one(clean_factory, EnvRecord).status == "passing"


def _probe_containers() -> list[str]:
    import docker

    return [c.id for c in docker.from_env().containers.list(all=True, filters={"label": "org.openenv.probe"})]


@pytest.mark.parametrize("program", ["lies", "hangs"])
def test_a_base_whose_programs_lie_or_hang_fails_at_build_in_one_attempt(
    clean_factory, hub_settings: HubSettings, program: str
) -> None:
    """The old probe ran `python3` from the Space's base and believed what it printed: a base whose
    python3 printed well-known host names kept the revision waiting for "network"; one whose python3
    never returned held the worker for good. The probe now runs the Hub's own image."""
    import docker

    base = _base_image()
    engine_past_its_start_up()  # a young engine's failures are retried as the engine's
    client = docker.from_env()
    lying = f"openenv-test/{program}-base:{uuid.uuid4().hex[:8]}"
    script = (
        "#!/bin/sh\necho pypi.org deb.debian.org\n" if program == "lies" else "#!/bin/sh\nexec sleep 100000\n"
    ).replace("\n", "\\n")
    client.images.build(
        fileobj=_dockerfile(
            f"FROM {base}\nRUN printf '{script}' > /usr/local/bin/python3 && chmod 755 /usr/local/bin/python3\n"
        ),
        custom_context=True,
        tag=lying,
        rm=True,
        network_mode="none",
    )
    try:
        # RFC 008's gate off: this Dockerfile has no OCI labels, which static.oci_labels fails at
        # validate; the build's failure is what this test is about (tests/hub/test_rfc008_gate.py is the gate's)
        settings = hub_settings.model_copy(
            update={
                "builder": "container",
                "build_network": None,
                "build_egress": True,
                "infra_retry_s": 600.0,
                "rfc008_gate": "off",
            }
        )
        root = _copy_echo(settings)
        (root / "echo_env" / "Dockerfile").write_text(f"FROM {lying}\nRUN exit 3\n")
        index_source(clean_factory, LocalSource(root))
        outcome: list[str | None] = []
        worker = threading.Thread(
            target=lambda: outcome.append(Worker(settings, clean_factory).run_once()), daemon=True
        )
        began = time.monotonic()
        worker.start()
        worker.join(120)
        assert not worker.is_alive(), "the worker is stuck on the build's network probe"
        assert outcome == ["failed"], outcome
        version = _one(clean_factory, EnvVersion)
        assert (version.state, version.failure_stage, version.waiting_code) == ("failed", "build", None)
        assert "exit code 3" in version.failure_reason
        assert _one(clean_factory, Job).attempts == 1  # one attempt, no wait
        assert time.monotonic() - began < 120
        assert _probe_containers() == []  # the probe's container went with it
    finally:
        client.images.remove(lying, force=True)


def _dockerfile(text: str) -> io.BytesIO:
    """A build context of one Dockerfile (for docker-py's `custom_context`)."""
    data = text.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        entry = tarfile.TarInfo("Dockerfile")
        entry.size = len(data)
        tar.addfile(entry, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def test_a_host_not_set_up_waits_uncounted_is_shown_and_runs_by_itself_once_fixed(
    clean_factory, hub_settings: HubSettings
) -> None:
    """A runtime the engine lacks is the operator's to fix: the revision waits with `host_setup`
    however many times it comes back (the cap of tries is for the infrastructure's outages, and
    counting this against the env would end in `failed`), the health endpoint says so, and a worker
    that finds the host set up runs it at once."""
    _base_image()
    engine_past_its_start_up()
    broken = hub_settings.model_copy(
        update={
            "builder": "container",
            "sandbox_runtime": "no-such-runtime",
            "infra_retry_s": 600.0,
            "infra_wait_max_count": 2,
            "infra_wait_max_s": 1.0,
        }
    )
    index_source(clean_factory, LocalSource(_copy_echo(broken)))
    worker = Worker(broken, clean_factory)
    for _ in range(3):  # past both caps: still waiting, never failed
        assert worker.run_once() == "waiting"
        time.sleep(0.5)
        with clean_factory.begin() as s:  # due again now (as after its backoff)
            s.execute(update(Job).values(run_after=None))
    version, env = _one(clean_factory, EnvVersion), _one(clean_factory, EnvRecord)
    assert (version.state, version.waiting_code, env.status) == ("waiting", "host_setup", "waiting")
    assert "no runtime 'no-such-runtime'" in version.waiting_reason and version.failure_reason is None
    assert _one(clean_factory, Job).infra_waits == 0  # not one counted
    with serve_app(create_app(broken)) as base:
        health = httpx.get(f"{base}/api/v1/health").json()
    assert health["waiting"] == {"host_setup": 1}
    assert health["host_setup"]["revisions"] == 1 and "no-such-runtime" in health["host_setup"]["reason"]
    page = figures(version)  # the env page's figures: the operator's to fix, not retried into a verdict
    assert "waiting for this Hub's host" in page and "once the Hub's operator fixes the host's set-up" in page

    with clean_factory.begin() as s:  # its backoff runs long; the fix must not wait for it
        s.execute(update(Job).values(run_after=dt.datetime.now(dt.UTC) + dt.timedelta(days=1)))
    fixed = Worker(broken.model_copy(update={"sandbox_runtime": "runc", "infra_probe_s": 0.05}), clean_factory)
    assert fixed.run_once() is None  # not due; this worker sees the host set up and wakes the revision
    assert fixed.run_until_idle(max_wait_s=5) == ["passed"]
    assert _one(clean_factory, EnvVersion).state == "passed"


def test_an_engine_that_goes_on_answering_does_not_reset_a_waits_backoff(
    clean_factory, hub_settings: HubSettings, monkeypatch
) -> None:
    """Only evidence that the engine changed (it answers after it did not, or it restarted) wakes
    the revisions waiting for it; an engine that answers all along did not fix anything, and waking
    them at every look spent the cap of tries in minutes."""
    _base_image()
    gone = Path(tempfile.mkdtemp(prefix="oe-engine-")) / "docker.sock"  # nobody listens there
    monkeypatch.setenv("DOCKER_HOST", f"unix://{gone}")
    settings = hub_settings.model_copy(update={"builder": "container", "infra_retry_s": 600.0, "infra_probe_s": 0.01})
    index_source(clean_factory, LocalSource(_copy_echo(settings)))
    assert Worker(settings, clean_factory).run_once() == "waiting"
    assert _one(clean_factory, EnvVersion).waiting_code == "no_engine"
    due = _one(clean_factory, Job).run_after

    monkeypatch.delenv("DOCKER_HOST")  # the Hub's engine, which answers (and did all along)
    worker = Worker(settings, clean_factory)
    for _ in range(5):
        assert worker.run_once() is None
        time.sleep(0.05)
    job = _one(clean_factory, Job)
    assert job.run_after == due and job.infra_retries == 1 and job.state == "queued"


class _SilentEngine:
    """A Unix socket that takes connections and never answers: a hung engine."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="oe-hung-")) / "docker.sock"
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        self.server.listen(16)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._hold, daemon=True).start()

    def _hold(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


def test_a_stage_past_its_deadline_asks_the_engine_before_it_blames_the_env(hub_settings, monkeypatch) -> None:
    """A hung engine (it takes the connection and never answers) or one that is gone makes the
    revision wait (`engine_lost`); an engine that answers as before leaves the env's failure."""
    from hub_service.pipeline.deadline import within
    from hub_service.pipeline.stage_kit import StageFailed

    _base_image()
    settings = hub_settings.model_copy(update={"builder": "container", "smoke_deadline_s": 0.3, "engine_answer_s": 1.0})

    def stuck(log, abort) -> None:
        stop = threading.Event()
        abort.on_abort(stop.set)
        stop.wait(30)

    def run() -> BaseException:
        with pytest.raises((Transient, StageFailed)) as caught:
            within(settings, "smoke", stuck, lambda line: None, job_id=1)
        return caught.value

    hung = _SilentEngine()
    try:
        monkeypatch.setenv("DOCKER_HOST", f"unix://{hung.path}")
        began = time.monotonic()
        verdict = run()
        assert isinstance(verdict, Transient) and verdict.code == Transient.ENGINE_LOST, verdict
        assert "did not answer within 1s" in str(verdict) and time.monotonic() - began < 10
    finally:
        hung.close()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{hung.path.parent / 'nobody.sock'}")
    verdict = run()
    assert isinstance(verdict, Transient) and "stopped answering" in str(verdict)
    monkeypatch.delenv("DOCKER_HOST")
    verdict = run()
    assert isinstance(verdict, StageFailed) and "did not finish within 0.3s" in str(verdict)
    # Stages that never touch the engine keep the env's failure without asking it.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{hung.path.parent / 'nobody.sock'}")
    with pytest.raises(StageFailed):
        within(settings.model_copy(update={"stage_deadline_s": 0.3}), "validate", stuck, lambda line: None, job_id=1)
