"""Our `openenv validate --url` against upstream's (openenv 0.10.0, run as its own CLI in its own
venv) on the same servers: upstream-shaped envs (tests/fixtures/upstream) served by upstream's SDK.

Upstream's runtime mode checks the HTTP contract and plays no episode; ours plays one and judges
it (docs/validate.md, "The verdict rule"). Where both can see the case they agree; an env that
raises inside every step is the case only an episode shows, and the test pins that difference.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from openenv import GenericEnvClient
from openenv.errors import CapacityReachedError
from openenv.validation import validate_url
from openenv.validation.episode import reset_when_free
from tests.support.servers import ROOT, ProcessServer, free_port
from tests.support.upstream_validate import upstream_validate

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SHAPES = ROOT / "tests" / "fixtures" / "upstream"
# shape → (upstream's verdict, ours): what each validator must say.
EXPECTED = {
    "union_env": (True, True),  # a discriminated-union action, with illegal moves
    "rejecting_env": (True, True),  # an illegal move first, then legal ones
    "tools_env": (True, True),  # an MCP env: tools listed, then called
    "raising_env": (True, False),  # every step raises inside the env: upstream never steps
}


@pytest.fixture(scope="module")
def servers(upstream010_python: str) -> Iterator[dict[str, str]]:
    started: list[ProcessServer] = []
    try:
        for shape in EXPECTED:
            started.append(
                ProcessServer(
                    [upstream010_python, "-m", "uvicorn", "server.app:app"],
                    cwd=SHAPES / shape,
                    env={"PYTHONPATH": str(SHAPES)},
                )
            )
        yield {shape: server.wait(timeout=400) for shape, server in zip(EXPECTED, started, strict=True)}
    finally:
        for server in started:
            server.stop()


def _upstream_verdicts(python: str, urls: list[str]) -> dict[str, tuple[bool, dict[str, object]]]:
    verdicts = {}
    for row in upstream_validate(python, [["--url", url, "--json", "--timeout", "10"] for url in urls], timeout_s=300):
        report = row["report"] or {}
        assert (row["exit_code"] == 0) == bool(report.get("passed")), row  # the exit code says what the report says
        verdicts[row["args"][1]] = (row["exit_code"] == 0, report)
    return verdicts


@pytest.mark.timeout(900)  # four upstream servers start first (upstream's SDK imports slowly on a busy machine)
def test_both_validators_agree_where_both_can_see_the_case(upstream010_python: str, servers: dict[str, str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    upstream = _upstream_verdicts(upstream010_python, [*servers.values(), dead])
    seen = {}
    for shape, url in servers.items():
        ours = validate_url(url, latency_steps=3)
        seen[shape] = (upstream[url][0], ours.exit_code == 0)
        if shape == "raising_env":
            assert ours.results("runtime.step")[0].details["verdict"] == "NO_STEP_SUCCEEDED"
            failed = [c["id"] for c in upstream[url][1]["criteria"] if not c["passed"]]  # type: ignore[union-attr]
            assert failed == [], failed  # upstream's criteria are all about HTTP routes, which this env serves
    assert seen == EXPECTED
    assert (upstream[dead][0], validate_url(dead, timeout_s=2).exit_code == 0) == (False, False)


def test_a_session_opened_while_upstream_releases_the_last_one_waits_for_it(servers: dict[str, str]) -> None:
    """tools_env's tool session takes a second to end, and upstream's server (one session at a time,
    its default) holds the place until then: a client that reconnects at once is refused. The
    checks' sessions (`reset_when_free`) wait for the place instead of failing the env."""
    url = servers["tools_env"]

    async def scenario() -> tuple[float, dict[str, object]]:
        first = GenericEnvClient(url)
        await first.reset()
        await first.close()
        at_once = GenericEnvClient(url)
        with pytest.raises(CapacityReachedError) as refused:
            await at_once.reset()
        await at_once.close()
        assert refused.value.max_sessions == 1
        patient = GenericEnvClient(url)
        try:
            result, waited = await reset_when_free(patient, 10.0, seed=1)
        finally:
            await patient.close()
        return waited, result.observation

    waited, observation = asyncio.run(scenario())
    assert 0.2 < waited < 5.0, waited  # the rest of the second the place was held
    assert observation["metadata"]["question"] == "How much did ACME gain in 2024?"
    # The runtime checks' episode opens right after `patient` closed, and their bad-frame session
    # right after the episode's closed: both wait, and every check passes.
    report = validate_url(url, latency_steps=3)
    assert report.exit_code == 0, [(c.id, c.message) for c in report.problems()]
    errors = report.results("runtime.errors")[0]
    assert errors.status == "pass", errors.message
