"""The Hub smoke-tests an MCP env the way its users' client speaks to it (issue 47, item 1).

tests/fixtures/upstream/mcp_echo_env is upstream's echo_env with WebSocket steps that go through
its sync `step`: a tool call sent as a `step` frame on a plain `/ws` session gets no reply (until
upstream's 30 s tool-call timeout), while the MCP session path upstream 0.10.0's MCPToolClient
takes (`POST /mcp openenv/session/create`, `/ws?session_id=`, tools over `POST /mcp`) answers at
once. As a Space, through the whole Hub (indexed, validated, built, smoke-tested), it passes: the
episode goes the MCP session path and decides, the plain path is played too and its silence is
noted, not counted (openenv/validation/paths.py). The image's first layers are tools_env's
(tests/hub/test_upstream_spaces.py builds them), so the build is mostly cached.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from hub_service.db import make_engine, migrate, sessionmaker_for
from hub_service.indexer.service import index_source
from hub_service.indexer.sources import HfSource
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_upstream_spaces import UpstreamHub, _files
from tests.support.dockerd import engine_past_its_start_up
from tests.support.hf_hub import HubStandIn
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def echo_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamHub]:
    base = os.environ.get("OPENENV_TEST_BASE_IMAGE")
    if not base:
        require_system("Docker", "OPENENV_TEST_BASE_IMAGE is not set: run through `bash scripts/test`")
    engine_past_its_start_up()
    work = tmp_path_factory.mktemp("mcp-echo-hub")
    url = f"sqlite:///{work / 'hub.sqlite3'}"
    migrate(url)
    factory = sessionmaker_for(make_engine(url))
    with HubStandIn(work / "hf") as hf:
        hf.create_space("alice/mcp_echo_env", files=_files("mcp_echo_env"), stage="PAUSED")
        settings = HubSettings(
            data_dir=work / "data",
            database_url=url,
            local_source=None,
            hf_enabled=True,
            hf_endpoint=hf.url,
            hf_token=SecretStr(hf.token),
            builder="container",
            base_image=base,
            smoke_timeout_s=90,
            build_timeout_s=900,
            step_timeout_s=5.0,  # the plain path's tool call gets no reply within it (nor within 10 s)
            image_prefix=f"openenv-hub-mcp-echo-{os.getpid()}",
        )
        index_source(factory, HfSource(hf.url, hf.token))
        outcomes = Worker(settings, factory).run_until_idle()
        try:
            yield UpstreamHub(settings, factory, hf, outcomes)
        finally:
            import docker

            from tests.support.images import remove_tagged

            remove_tagged(docker.from_env(), settings.image_prefix)


@pytest.mark.timeout(1500)
def test_upstreams_echo_env_passes_by_the_mcp_session_path(echo_hub: UpstreamHub) -> None:
    version = echo_hub.versions()["mcp_echo_env"]
    smoke = echo_hub.stage_log("mcp_echo_env", version.failure_stage or "smoke")
    assert (version.state, version.failure_reason) == ("passed", None), smoke[-4000:]
    # The MCP session path: tools listed and called over POST /mcp in the session, answered at once.
    mcp_part, _, plain_part = smoke.partition("plain /ws path (as GenericEnvClient)")
    assert "MCP session path (as upstream's MCPToolClient)" in mcp_part, smoke[-4000:]
    assert 'tools/list: ok → ["echo_message", "echo_with_length"]' in mcp_part
    assert '"tool_name": "echo_message"' in mcp_part and '"text": "hello"' in mcp_part
    assert "MCP session path: 5 of 5 steps returned an observation (PASSED)" in mcp_part
    # The plain path, what the smoke stage alone played before: the listing answers, the first tool
    # call does not; noted and not counted, and the session's place waited for.
    assert 'tools/list: ok → ["echo_message", "echo_with_length"]' in plain_part
    assert "step 1: sent" in plain_part and "died EnvTimeoutError: no reply from" in plain_part, plain_part[:3000]
    assert "not counted: the MCP session path, the one upstream's MCPToolClient takes, decides" in plain_part
    assert "the server released the unanswered plain session's place after" in plain_part
    # `openenv validate --url`'s runtime checks, merged into the revision's report, went the same way.
    checks = {c["id"]: c for c in (version.validation or {})["checks"]}
    assert checks["runtime.step"]["status"] == "pass" and checks["runtime.step"]["details"]["path"] == "mcp-session"
    assert version.smoke_status == "passed" and version.step_p50_ms and version.step_p50_ms < 1000
    # The trust checks take the path that decided: the plain path's hang reads neither as a leak nor
    # as no answer (they played the plain /ws session before, and found the hung session's place held).
    assert version.determinism["verdict"] == "deterministic", version.determinism
    assert version.capacity["sessions_held"] >= 1 and "leak" not in str(version.capacity), json.dumps(version.capacity)
    assert version.reward_check["verdict"] != "unchecked", version.reward_check
