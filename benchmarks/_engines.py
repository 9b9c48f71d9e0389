"""The pipeline's throughput on one and on two container engines (issue 49, item 4), for hub.py.

The same work for every configuration: the bundled envs (or those named), each copied `k` times
under distinct names, so that every copy is its own env revision; a fresh nonce file per
configuration, so that no configuration finds the tested layers of another in an engine's cache
(the layers under them, base image and dependencies, are warmed on every engine first, untimed).

A configuration is a string of engine letters, one worker process per letter: "A" (one worker on
this machine's engine), "AA" (two workers, one engine), "AB" (one worker on each engine; the second
engine stands in for a second machine: it is reached over TCP and has its own images). Workers are
`python -m hub_service.worker` processes sharing one SQLite queue, as workers on two machines share
the Hub's database. Each configuration reports env-revisions per hour, from the workers' start to
the last verdict, and what shows the work was shared, never doubled: one build per revision, every
build and its smoke test in one run of one worker (so on one engine), and each image on the engine
whose worker built it.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from _harness import ROOT, BenchmarkError

BUNDLED = sorted(p.name for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file())
DONE = ("passed", "failed")
_TIMEOUT_S = 3600.0  # one configuration's longest wait for its verdicts


def engines(second: str | None) -> dict[str, str | None]:
    """Engine letter -> DOCKER_HOST (None: this process's own, DOCKER_HOST or the local socket)."""
    found: dict[str, str | None] = {"A": os.environ.get("DOCKER_HOST")}
    if second:
        found["B"] = second
    return found


def _client(host: str | None) -> Any:
    import docker

    return docker.DockerClient(base_url=host, timeout=600) if host else docker.from_env(timeout=600)


def _base_image_on(host: str | None, base: str) -> None:
    """Load the base image into an engine that lacks it (an engine elsewhere has its own images)."""
    import docker

    here = docker.from_env(timeout=600)
    there = _client(host)
    wanted = here.images.get(base)
    try:
        found = there.images.get(base).id
    except docker.errors.ImageNotFound:
        found = None
    if found != wanted.id:
        there.images.load(wanted.save(named=True))


def _tree(root: Path, envs: list[str], k: int, nonce: str) -> int:
    """`k` copies of each env under `root`, each with the nonce; returns how many revisions."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for name in envs:
        for copy in range(k):
            dest = root / (f"{name}_r{copy}" if k > 1 else name)
            shutil.copytree(ROOT / "envs" / name, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            (dest / "server").mkdir(exist_ok=True)
            (dest / "server" / "bench_nonce.txt").write_text(nonce)
    return len(envs) * k


def _settings(work: Path, base: str, prefix: str, light: bool) -> Any:
    from hub_service.settings import HubSettings

    extra: dict[str, Any] = (
        {"determinism_check": False, "reward_check": False, "capacity_check": False, "statistical_episodes": 0}
        if light
        else {}
    )
    return HubSettings(
        database_url=f"sqlite:///{work / 'hub.sqlite3'}",
        data_dir=work / "data",
        local_source=str(work / "envs"),
        base_image=base,
        image_prefix=prefix,
        builder="container",
        build_network="host",  # the second engine's bridge has no way out (scripts/docker-engine2)
        hf_enabled=False,
        **extra,
    )


def _run_config(
    work: Path, letters: str, hosts: dict[str, str | None], envs: list[str], k: int, base: str, light: bool
) -> dict[str, Any]:
    """Index the work, run one worker per letter until every revision has its verdict; the numbers."""
    from sqlalchemy import func, select

    from hub_service.catalog.models import EnvVersion
    from hub_service.catalog.stage_runs import StageRun
    from hub_service.db import make_engine, migrate, sessionmaker_for
    from hub_service.indexer.service import index_source
    from hub_service.indexer.sources import LocalSource
    from hub_service.queue.models import Job
    from hub_service.serve import settings_env

    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    prefix = f"openenv-bench-engines-{uuid.uuid4().hex[:8]}"
    settings = _settings(work, base, prefix, light)
    revisions = _tree(work / "envs", envs, k, uuid.uuid4().hex)
    migrate(settings.sqlalchemy_url)
    db = make_engine(settings.sqlalchemy_url)
    factory = sessionmaker_for(db)
    index_source(factory, LocalSource(work / "envs", trusted=True))
    env = {**os.environ, **settings_env(settings), "OPENENV_CONTAINER_ENGINE": "docker", "PYTHONPATH": str(ROOT)}
    procs: dict[int, tuple[str, subprocess.Popen[bytes]]] = {}
    logs = work / "logs"
    logs.mkdir()
    started = time.monotonic()
    try:
        for i, letter in enumerate(letters):
            child = dict(env)
            child.pop("DOCKER_HOST", None)
            if hosts[letter]:
                child["DOCKER_HOST"] = str(hosts[letter])
            with open(logs / f"worker{i}-{letter}.log", "wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "hub_service.worker"],
                    env=child,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=ROOT,
                )
            procs[proc.pid] = (letter, proc)
        while True:
            with factory() as s:
                done = s.scalar(select(func.count()).select_from(EnvVersion).where(EnvVersion.state.in_(DONE))) or 0
            if done >= revisions:
                break
            dead = [(letter, p) for letter, p in procs.values() if p.poll() is not None]
            if dead:
                raise BenchmarkError(
                    f"a worker on engine {dead[0][0]} exited ({dead[0][1].returncode}):\n{_log_tails(logs)}"
                )
            if time.monotonic() - started > _TIMEOUT_S:
                raise BenchmarkError(
                    f"{letters}: {done} of {revisions} revisions had a verdict after {_TIMEOUT_S:g} s:\n"
                    + _states(factory)
                    + "\n"
                    + _log_tails(logs)
                )
            time.sleep(0.25)
        wall_s = time.monotonic() - started
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    try:
        with factory() as s:
            versions = s.execute(select(EnvVersion.id, EnvVersion.state, EnvVersion.image_ref)).all()
            jobs = s.execute(select(Job.version_id, Job.worker_id, Job.attempts)).all()
            runs = s.execute(
                select(StageRun.version_id, StageRun.stage, StageRun.job_id, StageRun.attempt, StageRun.seconds)
            ).all()
        engine_of_job: dict[int, str] = {}
        for version_id, worker_id, _ in jobs:
            if version_id is None:
                continue
            pid = int(str(worker_id).split(":")[1]) if worker_id else -1
            engine_of_job[version_id] = procs[pid][0] if pid in procs else "?"
        builds: dict[int, list[tuple[int, int]]] = {}
        smokes: dict[int, list[tuple[int, int]]] = {}
        stage_s: dict[str, list[float]] = {}
        for version_id, stage, job_id, attempt, seconds in runs:
            stage_s.setdefault(str(stage), []).append(float(seconds or 0.0))
            (builds if stage == "build" else smokes if stage == "smoke" else {}).setdefault(version_id, []).append(
                (job_id, attempt)
            )
        doubled = sum(1 for v in builds.values() if len(v) > 1) + sum(1 for _, _, a in jobs if a > 1)
        apart = sum(1 for vid, b in builds.items() if smokes.get(vid) and smokes[vid] != b)
        tags = {letter: _tags(hosts[letter], prefix) for letter in set(letters)}
        misplaced = sum(
            1 for vid, state, ref in versions if ref and ref not in tags.get(engine_of_job.get(vid, "?"), set())
        )
        per_engine = {letter: sum(1 for e in engine_of_job.values() if e == letter) for letter in sorted(set(letters))}
        passed = sum(1 for _, state, _ in versions if state == "passed")
        failures = _states(factory)
    finally:
        db.dispose()
        for letter in set(letters):
            _remove(hosts[letter], prefix)
    if passed != revisions:
        raise BenchmarkError(f"{revisions - passed} of {revisions} revisions did not pass on {letters}:\n{failures}")
    return {
        "workers": len(letters),
        "engines": len(set(letters)),
        "revisions": revisions,
        "passed": passed,
        "wall_s": round(wall_s, 2),
        "revisions_per_hour": round(revisions / wall_s * 3600, 1),
        "per_engine": per_engine,
        "doubled": doubled,  # revisions built twice, or jobs run more than once: 0
        "build_and_smoke_apart": apart,  # revisions whose smoke test ran in another run than its build: 0
        "image_elsewhere": misplaced,  # images not on the engine of the worker that built them: 0
        # each stage's median seconds per revision: where the time goes
        "stage_median_s": {k: round(statistics.median(v), 2) for k, v in sorted(stage_s.items())},
    }


def _states(factory: Any) -> str:
    """Each revision not passed: its env, state and why (for a failed run's message)."""
    from sqlalchemy import select

    from hub_service.catalog.models import EnvRecord, EnvVersion

    with factory() as s:
        rows = s.execute(
            select(
                EnvRecord.name,
                EnvVersion.state,
                EnvVersion.failure_stage,
                EnvVersion.failure_reason,
                EnvVersion.waiting_reason,
            )
            .join(EnvRecord, EnvRecord.id == EnvVersion.env_id)
            .where(EnvVersion.state != "passed")
        ).all()
    return "\n".join(
        f"  {name}: {state} {stage or ''} {(why or waiting or '')[:300]}" for name, state, stage, why, waiting in rows
    )


def _log_tails(logs: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(logs.glob("*.log")))


def _tags(host: str | None, prefix: str) -> set[str]:
    return {tag for image in _client(host).images.list(name=f"{prefix}/*") for tag in image.tags}


def _remove(host: str | None, prefix: str) -> None:
    import contextlib

    import docker

    client = _client(host)
    for image in client.images.list(name=f"{prefix}/*"):
        for tag in image.tags:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                client.images.remove(tag, force=True)


def bench_engines(
    work: Path, envs: list[str], k: int, configs: list[str], second: str | None, light: bool, warm_up: bool = True
) -> dict[str, Any]:
    """Every configuration on the same work; what each measured."""
    base = os.environ.get("OPENENV_HUB_BASE_IMAGE") or os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not base:
        return {"skipped": "set OPENENV_HUB_BASE_IMAGE (bash scripts/base-image prints the one this machine builds on)"}
    unknown = sorted(set(envs) - set(BUNDLED))
    if unknown:
        raise BenchmarkError(f"--engine-envs: no bundled env {', '.join(unknown)} (bundled: {', '.join(BUNDLED)})")
    hosts = engines(second)
    wanted = sorted({letter for config in configs for letter in config})
    if any(letter not in hosts for letter in wanted):
        raise BenchmarkError(
            f"--engine-configs {' '.join(configs)} name an engine B: give --second-engine (e.g. tcp://127.0.0.1:54331, "
            "scripts/docker-engine2)"
        )
    for letter in wanted:
        _base_image_on(hosts[letter], base)
    warm = {}
    for letter in wanted if warm_up else ():  # the layers under the tested ones, on every engine, untimed
        t0 = time.monotonic()
        _run_config(work / f"warm-{letter}", letter, hosts, envs, 1, base, light)
        warm[letter] = round(time.monotonic() - t0, 1)
    out: dict[str, Any] = {
        "envs": envs,
        "copies": k,
        "light": light,
        "engines": {letter: hosts[letter] or "this machine's (DOCKER_HOST or the local socket)" for letter in wanted},
        "warm_up_s": warm,
        "cores": os.cpu_count(),
        "configs": {},
    }
    for config in configs:
        out["configs"][config] = _run_config(work / f"run-{config}", config, hosts, envs, k, base, light)
    return out
