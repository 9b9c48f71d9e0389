"""Indexing Spaces from a Hugging Face Hub (the local stand-in, through the real huggingface_hub)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from pydantic import SecretStr
from sqlalchemy import select

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import HfSource
from hub_service.worker import Worker
from tests.support.hf_hub import HubStandIn
from tests.support.servers import ROOT
from tests.support.systems import require_system

LIST = ("GET", "/api/{kind}")


def env_files(name: str = "echo_env") -> dict[str, bytes]:
    folder = ROOT / "envs" / name
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_hf_index_is_paged_expanded_and_incremental(hf_hub: HubStandIn, clean_factory) -> None:
    hf_hub.state.page_size = 50
    hf_hub.create_spaces(
        {
            "repo_id": f"org{i % 3}/env_{i:03d}",
            "tags": ["openenv", f"k{i % 2}"],
            "likes": i,
            "stage": "RUNNING" if i % 2 else "SLEEPING",
        }
        for i in range(230)
    )
    hf_hub.create_space("someone/not_an_env", tags=["gradio"])
    hf_hub.reset_requests()
    source = HfSource(hf_hub.url, hf_hub.token)
    report = index_source(clean_factory, source)
    assert (report.seen, report.new, report.jobs) == (230, 230, 230)
    # One listing pass with `expand`: pages only, no call per Space.
    assert hf_hub.request_count() == math.ceil(230 / 50) == hf_hub.request_count(*LIST)
    with clean_factory() as s:
        env = s.scalar(select(EnvRecord).where(EnvRecord.name == "env_007"))
        assert (env.owner, env.likes, env.stage, env.source, env.trusted) == ("org1", 7, "RUNNING", "hf", False)
        assert env.sha == hf_hub.space("org1/env_007").resolve("main").oid
        assert env.host and env.subdomain

    hf_hub.reset_requests()
    again = index_source(clean_factory, source)
    assert (again.jobs, again.new, again.changed) == (0, 0, 0)
    assert hf_hub.request_count() == math.ceil(230 / 50)

    hf_hub.commit("org0/env_000", {"NEW.md": "changed"})
    hf_hub.set_runtime("org0/env_003", stage="BUILDING")
    hf_hub.store.delete("space", "org2/env_002")
    third = index_source(clean_factory, source)
    assert (third.changed, third.jobs, third.gone, third.refreshed) == (1, 1, 1, 1)
    with clean_factory() as s:
        assert s.scalar(select(EnvRecord).where(EnvRecord.name == "env_002")).gone
        assert s.scalar(select(EnvRecord).where(EnvRecord.name == "env_003")).stage == "BUILDING"


def test_space_url_comes_from_the_hubs_own_domains(hf_hub: HubStandIn, clean_factory) -> None:
    hf_hub.create_space("Some-Org/my_cool_env", domains=["some-org-my-cool-env.hf.space"])
    index_source(clean_factory, HfSource(hf_hub.url, hf_hub.token))
    with clean_factory() as s:
        env = s.scalar(select(EnvRecord))
    assert env.host == "https://some-org-my-cool-env.hf.space"


def test_a_space_running_on_this_machine_is_reached_over_http(hf_hub: HubStandIn, clean_factory) -> None:
    hf_hub.create_space("alice/local_env", domains=["127.0.0.1:18123"])  # how a local Hub (the stand-in) runs Spaces
    index_source(clean_factory, HfSource(hf_hub.url, hf_hub.token))
    with clean_factory() as s:
        env = s.scalar(select(EnvRecord))
    assert env.host == "http://127.0.0.1:18123"


def test_hf_env_goes_through_the_pipeline_at_its_sha(
    hf_hub: HubStandIn, clean_factory, hub_settings, tmp_path: Path
) -> None:
    repo = hf_hub.create_space("alice/echo_env", files=env_files())
    first_sha = repo.resolve("main").oid
    settings = hub_settings.model_copy(
        update={
            "hf_endpoint": hf_hub.url,
            "hf_enabled": True,
            "builder": "container",
            "hf_token": SecretStr(hf_hub.token),
        }
    )
    index_source(clean_factory, HfSource(hf_hub.url, hf_hub.token))
    # The Space moves on after indexing: the pipeline still checks the indexed sha.
    hf_hub.commit("alice/echo_env", {"openenv.yaml": "not: [valid"})
    if shutil.which("docker") is None or not settings.base_image:
        require_system("Docker", "no Docker CLI or OPENENV_TEST_BASE_IMAGE: run through `bash scripts/test`")
    assert Worker(settings, clean_factory).run_until_idle() == ["passed"]
    with clean_factory() as s:
        env = s.scalar(select(EnvRecord))
        version = s.scalar(select(EnvVersion))
    assert env.status == "passing" and env.sha == version.sha == first_sha
    assert version.builder == "container"  # code from the Hub is never run as a process
