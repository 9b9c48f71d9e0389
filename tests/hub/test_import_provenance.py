"""An env written by `openenv import` and passed by the Hub's pipeline says where it came from: its
catalog page (in Chromium) and the API's detail name the source's ecosystem, id and version, read
from the `imported_from:` block the import wrote into its openenv.yaml. A hand-written env says
nothing of the kind."""

from __future__ import annotations

import concurrent.futures
import shutil
from pathlib import Path

import gymnasium
import httpx
import pytest
from playwright.sync_api import expect

from hub_service.app import create_app
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.web.conftest import mark_passed
from tests.support.cli import Run
from tests.support.servers import ROOT, serve_app

pytestmark = [pytest.mark.slow]


@pytest.fixture(params=["sqlite"])  # the detail reads the stored manifest, the same on both backends
def db_url(request: pytest.FixtureRequest, _databases) -> str:  # type: ignore[no-untyped-def]
    return _databases.url(request.param)


@pytest.mark.pages  # in scripts/test's page run (tests/support/browser.py)
def test_an_imported_envs_page_and_detail_name_its_source_and_version(
    clean_factory, hub_settings: HubSettings, run_cli: Run, new_page, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_OFFLINE", "1")  # the process builder's venv comes from uv's cache
    settings = hub_settings.model_copy(update={"builder": "process", "play_instance_linger_s": 0.0})
    root = Path(settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    made = run_cli("import", "CartPole-v1", "-o", str(root / "cartpole_env"))
    assert made.returncode == 0, made.stderr
    shutil.copytree(ROOT / "envs" / "echo_env", root / "echo_env", ignore=shutil.ignore_patterns("__pycache__"))
    index_source(clean_factory, LocalSource(root, trusted=True))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # Playwright holds this thread's loop later
        assert pool.submit(Worker(settings, clean_factory).run_until_idle).result() == ["passed", "passed"]

    with serve_app(create_app(settings)) as url:
        detail = httpx.get(f"{url}/api/v1/envs/local/cartpole_env", timeout=30).json()
        assert detail["status"] == "passing"
        assert detail["imported_from"] == {
            "kind": "gymnasium",
            "name": "CartPole-v1",
            "version": gymnasium.__version__,
            "label": "Gymnasium",
        }
        assert httpx.get(f"{url}/api/v1/envs/local/echo_env", timeout=30).json()["imported_from"] is None

        page = new_page()
        page.goto(url + "/?panel=site&env=local/cartpole_env")
        expect(page.locator("#oe-env-title")).to_have_text("local/cartpole_env")
        expect(page.locator("#oe-imported")).to_have_text(
            f"imported from Gymnasium: CartPole-v1 · version {gymnasium.__version__}"
        )
        page.goto(url + "/?panel=site&env=local/echo_env")
        expect(page.locator("#oe-env-title")).to_have_text("local/echo_env")
        expect(page.locator("#oe-imported")).to_have_count(0)


def test_verifiers_and_ors_imports_name_their_source_in_the_api(
    clean_factory, hub_settings: HubSettings, run_cli: Run
) -> None:
    """The same for the other two kinds (their pipeline runs in tests/hub/test_import_pipeline.py,
    with Docker; here each revision is marked passed with its folder's manifest, as that run stores it)."""
    root = Path(hub_settings.local_source)
    root.mkdir(parents=True, exist_ok=True)
    fixtures = ROOT / "tests" / "fixtures" / "imports"
    for fixture in ("vf_arithmetic", "ors_guess"):
        made = run_cli("import", str(fixtures / fixture), "-o", str(root / f"{fixture}_env"))
        assert made.returncode == 0, made.stderr
    index_source(clean_factory, LocalSource(root, trusted=False))
    with clean_factory.begin() as db:
        mark_passed(db, root)
    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        found = {
            name: httpx.get(f"{url}/api/v1/envs/local/{name}", timeout=30).json()["imported_from"]
            for name in ("vf_arithmetic_env", "ors_guess_env")
        }
    assert found == {
        "vf_arithmetic_env": {"kind": "verifiers", "name": "vf-arithmetic", "version": "0.2.0", "label": "Verifiers"},
        "ors_guess_env": {"kind": "ors", "name": "ors-guess", "version": "1.0.1", "label": "ORS"},
    }
