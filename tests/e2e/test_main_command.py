"""The README's main command, `bash scripts/serve`, as a user runs it on this machine.

On a clean data dir with no base image preset (and, here, no registry to pull one from), the Hub
comes up on 127.0.0.1, picks a base image by itself, builds and smoke-tests every bundled env and
lists each as passing. Started while the Docker engine is broken, it comes up anyway, shows the envs
as waiting for the infrastructure (never as failing), and once the engine is fixed they build and
pass by themselves, with nothing deleted; a restart afterwards finds everything as it was.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.servers import ROOT, free_port
from tests.support.socket_relay import SocketRelay
from tests.support.systems import require_system

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# What a user's shell would not have: base images chosen for them, and this test run's settings.
_PRESETS = ("OPENENV_HUB_", "OPENENV_BASE_IMAGE", "OPENENV_TEST_", "DOCKER_HOST")


def bundled_envs() -> set[str]:
    return {p.name for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file()}


def _registry_reachable() -> bool:
    out = subprocess.run(["docker", "pull", "-q", "python:3.11-slim"], capture_output=True, text=True, timeout=300)
    return out.returncode == 0


class Hub:
    """`bash scripts/serve PORT` in a process group of its own, with its log in a file."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / f"serve-{self.port}.log"
        clean = {k: v for k, v in os.environ.items() if not k.startswith(_PRESETS)}
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["bash", "scripts/serve", str(self.port)],
            cwd=ROOT,
            env={**clean, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        """What the person at the terminal saw."""
        return self.log_path.read_text(errors="replace")

    def full_log(self) -> str:
        """The full log: the file whose path the console printed once."""
        paths = [line.removeprefix("full log: ") for line in self.log().splitlines() if line.startswith("full log: ")]
        assert len(paths) == 1, self.log()[-3000:]
        return Path(paths[0]).read_text(errors="replace")

    def wait_full_log(self, predicate: Any, timeout: float, what: str) -> str:
        """The full log once `predicate(text)` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.full_log()
            if predicate(text):
                return text
            time.sleep(0.5)
        pytest.fail(f"timed out waiting for {what} in the full log:\n{self.full_log()[-3000:]}")

    def wait_console(self, predicate: Any, timeout: float, what: str) -> list[str]:
        """The console's lines once `predicate(lines)` holds (its verdicts come from a poll)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.log().splitlines()
            if predicate(lines):
                return lines
            time.sleep(0.5)
        pytest.fail(f"timed out waiting for {what} on the console:\n{self.log()[-3000:]}")

    def items(self) -> dict[str, dict[str, Any]]:
        """The catalog by env name (empty while the service is not up yet)."""
        assert self.proc.poll() is None, self.log()[-3000:]
        try:
            page = httpx.get(f"{self.url}/api/v1/envs", params={"limit": 100}, timeout=5).json()
        except httpx.HTTPError:
            return {}
        return {i["name"]: i for i in page["items"]}

    def wait_for(self, predicate: Any, timeout: float, what: str) -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        items: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            items = self.items()
            if items and predicate(items):
                return items
            time.sleep(2)
        statuses = {n: i.get("status") for n, i in items.items()}
        reasons = {n: self.latest(n).get("failure_reason") or self.latest(n).get("waiting_reason") for n in statuses}
        pytest.fail(f"timed out waiting for {what}: {statuses}\n{reasons}\n{self.log()[-3000:]}")

    def latest(self, name: str) -> dict[str, Any]:
        return httpx.get(f"{self.url}/api/v1/envs/local/{name}/versions/latest", timeout=10).json()

    def events(self, name: str) -> list[dict[str, Any]]:
        return httpx.get(f"{self.url}/api/v1/envs/local/{name}/events", params={"limit": 200}, timeout=10).json()[
            "items"
        ]

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
            pytest.fail(f"the Hub did not stop within 30 s of SIGTERM:\n{self.log()[-3000:]}")
        finally:
            self._log.close()
        deadline = time.monotonic() + 15
        left = ""
        while time.monotonic() < deadline:  # the server and its workers are all gone
            left = subprocess.run(
                ["ps", "-o", "pid=,stat=,cmd=", "-g", str(self.proc.pid)], capture_output=True, text=True
            ).stdout.strip()
            if not left:
                break
            time.sleep(0.5)
        assert not left, left


def _assert_console_for_people(console: list[str], wanted: set[str], full_log: str) -> None:
    """The main command's terminal, up to its summary line: short, one verdict line per env, no
    library chatter (that is in the full log, whose path it printed once)."""
    assert len(console) < 40, "\n".join(console)
    for name in wanted:
        verdicts = [line for line in console if line.startswith(f"✓ local/{name} passed in ")]
        assert len(verdicts) == 1 and verdicts[0].endswith(" s"), console
    chatter = [
        line for line in console if any(w in line for w in ("picows", "WS connection", "alembic", "httpx", " 200 OK"))
    ]
    assert not chatter, chatter
    assert "alembic" in full_log and "picows" in full_log, full_log[-2000:]  # heard, in the file


def _all(status: str, wanted: set[str]):
    return lambda items: set(items) >= wanted and all(items[n]["status"] == status for n in wanted)


def _settled(wanted: set[str]):
    return lambda items: set(items) >= wanted and all(items[n]["status"] in ("passing", "failing") for n in wanted)


@pytest.fixture()
def engine_answers() -> None:
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        require_system("Docker", "no Docker engine answers; `bash scripts/test` starts one")


# Alone (scripts/test's serial run): its capacity badge is earned from step latencies under a ramp of
# sessions, which the parallel workers' builds and browsers would skew.
@pytest.mark.serial
def test_scripts_serve_on_a_clean_data_dir_passes_every_bundled_env(
    tmp_path: Path, engine_answers: None, new_page: Any
) -> None:
    wanted = bundled_envs()
    registry = _registry_reachable()
    # RFC 008's statistical level with five episodes a policy (the Hub's default is 16): the fewest that
    # decide, so that this run, alone in the serial phase, pays a third of its time.
    hub = Hub(tmp_path, OPENENV_HUB_DATA_DIR=str(tmp_path / "hub"), OPENENV_HUB_STATISTICAL_EPISODES="5")
    try:
        items = hub.wait_for(_settled(wanted), 1200, "every bundled env to be checked")
        failing = {n: hub.latest(n).get("failure_reason") for n in wanted if items[n]["status"] != "passing"}
        assert not failing, failing
        summary = f"All {len(wanted)} envs passed. The Hub is at {hub.url} (Ctrl-C stops it)"
        console = hub.wait_console(lambda lines: summary in lines, 30, "the summary line")
        _assert_console_for_people(console[: console.index(summary) + 1], wanted, hub.full_log())
        log = hub.log()
        # The base image policy said, in one line, what it chose and why.
        chosen = [line for line in log.splitlines() if line.startswith("scripts/base-image:") and "base image" in line]
        assert len(chosen) == 1, log[-3000:]
        if registry:
            assert "python:3.11-slim" in chosen[0]
        else:
            assert "no registry reachable" in chosen[0] and "openenv-local/python:3.11" in chosen[0], chosen
        for name in wanted:
            assert items[name]["cold_start_s"] > 0 and items[name]["step_p50_ms"] > 0
            resolved = httpx.get(f"{hub.url}/api/v1/envs/local/{name}/resolve").json()
            assert resolved["image"].startswith("openenv-hub/local-") and resolved["status"] == "passing"
            # Trust signals, measured in the env's smoke container: every bundled env earns the deterministic
            # and capacity badges, "forkable" too except coding_env (a live process cannot be snapshotted),
            # and "reward checked" where its reward check concluded: a sparse reward that random legal play
            # never reached within the check's steps (Atari's points) is inconclusive, said once, no badge.
            # Its capacity card travels with the resolve record.
            reward = hub.latest(name)["reward_check"]
            assert reward["verdict"] in ("ok", "inconclusive"), (name, reward)
            assert reward["verdict"] == "ok" or "the reward may be sparse" in reward["notes"][0], (name, reward)
            forkable = set() if name == "coding_env" else {"forkable"}
            checked = {"reward_checked"} if reward["verdict"] == "ok" else set()
            assert set(items[name]["badges"]) == {"deterministic", "capacity"} | forkable | checked, (
                name,
                hub.latest(name),
            )
            assert resolved["capacity"]["sessions_held"] >= 1 and resolved["capacity"]["image_size_mb"] > 0
            # RFC 008, both lanes: the statistical level was played on the revision's container
            rfc008 = httpx.get(f"{hub.url}/api/v1/envs/local/{name}/report", params={"format": "rfc008"}).json()
            assert rfc008["lane"] == "hub" and rfc008["levels_run"] == [1, 2, 3, 4], (name, rfc008["levels_run"])
            played = [r for r in rfc008["results"] if r["check_id"].startswith("statistical.")]
            assert len(played) == 7 and all(r["measured"].get("seconds_all_policies") for r in played), played
            # The leaderboard has the random baseline where legal actions can be known (listed by the
            # observation, or closed by the action schema); free-form text (echo, coding, wordle) has none.
            board = httpx.get(f"{hub.url}/api/v1/envs/local/{name}/leaderboard").json()
            baseline = [e["model"] for e in board["entries"] if e["source"] == "baseline"]
            if reward["no_baseline"]:
                assert baseline == [] and reward["baseline_returns"] == [], (name, reward, board)
            else:
                assert baseline == ["random"] and reward["rejected_actions"] == 0, (name, reward, board)
        legal = {n for n in wanted if not hub.latest(n)["reward_check"]["no_baseline"]}
        assert {"atari_env", "blackjack_env", "chess_env", "grid_world_env"} <= legal, legal
        # A visitor sees them: badges on the catalog's cards, the trust card on an env's page, desktop and phone.
        for width in (1280, 390):
            page = new_page()
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(hub.url + "/")
            expect(page.locator("a.oe-card")).to_have_count(len(wanted))
            expect(page.locator("a.oe-card [data-badge='deterministic']")).to_have_count(len(wanted))
            page.locator("a.oe-card[data-env='local/chess_env']").click()
            expect(page.locator("#oe-env-title")).to_have_text("local/chess_env")
            expect(page.locator("#oe-capacity")).to_contain_text("sessions held")
            expect(page.locator("#oe-determinism")).to_contain_text("Deterministic: the same seed")
            expect(page.locator("#oe-reward-check")).to_contain_text("Rewards look sound")
    finally:
        hub.stop()


def test_scripts_serve_with_a_broken_engine_waits_then_recovers_by_itself(
    tmp_path: Path, engine_answers: None, new_page: Any
) -> None:
    wanted = bundled_envs()
    sock_dir = Path(tempfile.mkdtemp(prefix="oe-engine-"))  # short: a Unix socket path has ~100 bytes
    relay = SocketRelay(sock_dir / "docker.sock")
    env = {
        "OPENENV_HUB_DATA_DIR": str(tmp_path / "hub"),
        "DOCKER_HOST": f"unix://{relay.path}",
        "OPENENV_HUB_INFRA_RETRY_S": "2",
        "OPENENV_HUB_INFRA_RETRY_MAX_S": "30",
    }
    hub = Hub(tmp_path, **env)
    try:
        # The engine at DOCKER_HOST does not answer: the Hub comes up anyway; the envs wait, none fails.
        items = hub.wait_for(_all("waiting", wanted), 300, "every bundled env to wait for the engine")
        assert "the Hub starts anyway" in hub.log()
        # The console says so: each env waits, and why; then one summary line with the URL.
        summary = f"{len(wanted)} envs checked: 0 passed, {len(wanted)} waiting for the infrastructure."
        console = hub.wait_console(lambda lines: any(line.startswith(summary) for line in lines), 60, "the summary")
        for name in wanted:
            assert any(line.startswith(f"… local/{name} waiting: ") and "Docker engine" in line for line in console), (
                console
            )
        assert not [line for line in console if line.startswith("✗ ")], console
        for name in wanted:
            version = hub.latest(name)
            # waiting, or at that moment trying again: either way the reason is the engine's
            assert version["state"] in ("waiting", "queued", "running") and version["waiting_code"] == "no_engine", (
                version
            )
            assert version["failure_reason"] is None and "Docker engine" in version["waiting_reason"]
        shas = {n: hub.latest(n)["sha"] for n in wanted}
        # A visitor sees it on the website: waiting for the infrastructure, not failing, and why.
        page = new_page()
        page.goto(hub.url + "/?panel=site")  # the interactive catalog, with its status filter
        expect(page.locator("a.oe-card")).to_have_count(len(wanted))
        page.locator("#oe-status input").click()
        page.get_by_role("option", name="waiting for infrastructure").click()
        expect(page.locator("a.oe-card")).to_have_count(len(wanted))
        page.locator("a.oe-card[data-env='local/echo_env']").click()
        expect(page.locator("#oe-env-title")).to_have_text("local/echo_env")
        page.get_by_role("tab", name="Checks").click()
        expect(page.locator("#oe-figures")).to_contain_text("waiting for infrastructure")
        expect(page.locator("#oe-figures")).to_contain_text("no_engine")

        relay.start()  # the engine is fixed: nobody restarts the Hub
        items = hub.wait_for(_settled(wanted), 1200, "the envs to build once the engine answers")
        assert {n: items[n]["status"] for n in wanted} == dict.fromkeys(wanted, "passing"), {
            n: hub.latest(n) for n in wanted
        }
        for name in wanted:
            version = hub.latest(name)
            assert version["sha"] == shas[name] and version["state"] == "passed" and version["waiting_code"] is None
            kinds = [e["kind"] for e in reversed(hub.events(name))]
            assert "failed" not in kinds and kinds.index("waiting") < kinds.index("passed"), kinds
        summary = f"All {len(wanted)} envs passed. The Hub is at {hub.url} (Ctrl-C stops it)"
        console = hub.wait_console(lambda lines: summary in lines, 30, "the summary once the envs passed")
        for name in wanted:
            assert sum(line.startswith(f"✓ local/{name} passed in ") for line in console) == 1, console
    finally:
        hub.stop()

    # A restart keeps every record: the same revisions, passing, with their history; nothing to rebuild.
    hub = Hub(tmp_path, **env)
    try:
        items = hub.wait_for(_all("passing", wanted), 300, "the catalog after a restart")
        for name in wanted:
            assert hub.latest(name)["sha"] == shas[name]
            assert "waiting" in [e["kind"] for e in hub.events(name)]
        # The restart's crawl found every revision as it was. Waited for: the catalog above is the
        # database's, which answers before the leader's first crawl has run (seen in CI).
        hub.wait_full_log(lambda text: f"'unchanged': {len(wanted)}," in text, 120, "the restart's first crawl")
    finally:
        hub.stop()
        relay.stop()
