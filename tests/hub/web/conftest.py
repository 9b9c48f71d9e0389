"""Website fixtures: a Hub whose pipeline really ran (process builder) on echo_env, whose README
carries XSS payloads, and on a broken env; on SQLite and on PostgreSQL."""

from __future__ import annotations

import concurrent.futures
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.support.servers import ROOT

# Each tries to run script in the visitor's browser; none may (see test_browser.py).
XSS_README = """

## Hostile corner (the website must show this as inert content)
<img src="x" onerror="window.__pwned='img'">
<script>window.__pwned='script'</script>
<svg onload="window.__pwned='svg'"></svg>
<iframe srcdoc="<script>parent.__pwned='iframe'</script>"></iframe>
<a id="jslink" href="javascript:window.__pwned='link'">click me</a> [md link](javascript:window.__pwned='md')
<details open ontoggle="window.__pwned='details'"><summary>details</summary>body</details>
<div style="background:url(javascript:window.__pwned='css')">styled</div>
${window.__pwned='template'} {{constructor.constructor('window.__pwned="handlebars"')()}}
SAFE-README-MARKER
"""


@pytest.fixture(autouse=True)
def _no_index(monkeypatch: pytest.MonkeyPatch) -> None:
    # Env venvs are made from uv's cache (filled by scripts/bootstrap): tests reach no index.
    monkeypatch.setenv("UV_OFFLINE", "1")


@pytest.fixture()
def web_settings(clean_factory: sessionmaker[Session], hub_settings: HubSettings) -> Iterator[HubSettings]:
    """Settings of a Hub where echo_env passed the real pipeline and bad_manifest failed it."""
    settings = hub_settings.model_copy(update={"builder": "process", "play_instance_linger_s": 0.0})
    root = Path(settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        ROOT / "tests" / "hub" / "envs" / "bad_manifest",
        root / "bad_manifest",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    readme = root / "echo_env" / "README.md"
    readme.write_text(readme.read_text() + XSS_README)
    index_source(clean_factory, LocalSource(root, trusted=True))
    # In a thread of its own: the pipeline runs asyncio, and a browser test's Playwright holds this thread's loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        verdicts = pool.submit(Worker(settings, clean_factory).run_until_idle).result()
    assert sorted(verdicts) == ["failed", "passed"]
    yield settings


def mark_passed(db: Session, root: Path, readme: bool = False) -> list[tuple[EnvRecord, EnvVersion]]:
    """Mark each indexed env's revision passed, with its folder's manifest (and README), as the
    pipeline's process builder would: the pipeline is tests/hub/test_pipeline.py's subject, and
    running it on several envs in a page test would cost minutes for nothing the test looks at."""
    marked = []
    for env in db.scalars(select(EnvRecord)):
        version = db.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
        assert version is not None
        version.state, version.builder = "passed", "process"
        version.manifest = yaml.safe_load((root / env.name / "openenv.yaml").read_text())
        if readme:
            version.readme = (root / env.name / "README.md").read_text()
        apply_verdict(env, version)
        marked.append((env, version))
    return marked
