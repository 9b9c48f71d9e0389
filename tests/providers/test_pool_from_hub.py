"""The capacity card from a real Hub service on 127.0.0.1: `from_hub` keeps it on the client
(`hub_info`), and `EnvPool.from_hub(repo_id, sessions=N)` starts ceil(N / sessions_held) servers of
the image the Hub lists, with at most sessions_held sessions on each."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from echo_env import EchoAction, EchoEnv
from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.service import apply_verdict
from openenv.client.pool import EnvPool, servers_for
from openenv.errors import ConfigurationError, EnvTimeoutError, RemoteCodeError, ResolutionError
from tests.hub.helpers import listing_hub, space

CARD = {
    "cold_start_s": 0.5,
    "step_p50_ms": 1.0,
    "step_p95_ms": 2.0,
    "image_size_mb": None,
    "server_base_mb": 40.0,
    "idle_session_mb": 0.2,
    "active_session_mb": 0.5,
    "sessions_held": 4,
    "ramp": [{"sessions": 4, "p99_ms": 3.0, "errors": 0}],
    "stopped_because": "reached the ramp's ceiling",
}


@contextmanager
def _hub(tmp_path: Path, image: str, host: str | None = None, card: dict[str, Any] | None = CARD) -> Iterator[str]:
    """A Hub service on a migrated SQLite database that lists alice/echo_env (image `image`, capacity `card`)."""

    def prepare(s: Session) -> None:
        for name, capacity in (("echo_env", card), ("unmeasured_env", None)):
            env = s.scalar(select(EnvRecord).where(EnvRecord.name == name))
            version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
            version.state, version.image_ref, version.port, version.capacity = "passed", image, 8000, capacity
            s.flush()
            apply_verdict(env, version)

    spaces = [
        space(1, owner="alice", name="echo_env", host=host, stage="RUNNING" if host else "SLEEPING"),
        space(2, owner="alice", name="unmeasured_env"),
    ]
    with listing_hub(tmp_path, spaces, prepare) as (url, _):
        yield url


@pytest.fixture()
def hub_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo_url: str) -> Iterator[str]:
    with _hub(tmp_path, "providers-test/echo_env:latest", host=echo_url) as url:
        monkeypatch.setenv("OPENENV_HUB_URL", url)
        monkeypatch.delenv("OPENENV_TRUST_REMOTE_CODE", raising=False)
        yield url


def test_servers_for_rounds_up() -> None:
    assert [servers_for(n, CARD) for n in (1, 4, 5, 8, 9, 64)] == [1, 1, 2, 2, 3, 16]
    for card in (None, {}, {"sessions_held": None}, {"sessions_held": 0}, {"verdict": "unchecked", "reason": "x"}):
        with pytest.raises(ConfigurationError, match="sessions_held"):
            servers_for(8, card)


async def test_from_hub_keeps_the_hubs_record_and_its_capacity_card(hub_url: str, echo_url: str) -> None:
    env = await EchoEnv.from_hub("alice/echo_env")
    async with env:
        assert (await env.step(EchoAction(message="hi"))).observation.echoed_message == "hi"
    assert env.resolution == [("hub", f"connected to {echo_url}")]
    assert env.hub_info is not None and env.hub_info.capacity == CARD and env.hub_info.sessions_held == 4


def test_pool_from_hub_refuses_what_it_cannot_size_or_should_not_run(hub_url: str) -> None:
    with pytest.raises(RemoteCodeError, match="trust_remote_code=True"):
        EnvPool.from_hub("alice/echo_env", sessions=8)
    with pytest.raises(ConfigurationError, match=r"no measured capacity .* pass size="):
        EnvPool.from_hub("alice/unmeasured_env", sessions=8, trust_remote_code=True)
    with pytest.raises(ConfigurationError, match=r"sessions= .* or size="):
        EnvPool.from_hub("alice/echo_env", trust_remote_code=True)
    with pytest.raises(ResolutionError, match="does not know alice/no_such_env"):
        EnvPool.from_hub("alice/no_such_env", sessions=8, trust_remote_code=True)
    sized = EnvPool.from_hub("alice/unmeasured_env", size=2, trust_remote_code=True)  # not started: nothing runs
    assert len(sized.providers) == 2 and sized.max_sessions_per_instance is None


@pytest.mark.docker
async def test_pool_sized_from_the_capacity_card_starts_that_many_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo_image: str
) -> None:
    with _hub(tmp_path, echo_image) as url:
        monkeypatch.setenv("OPENENV_HUB_URL", url)
        pool = EnvPool.from_hub("alice/echo_env", sessions=10, client_cls=EchoEnv, trust_remote_code=True)
        assert pool.hub_info.sessions_held == 4 and pool.max_sessions_per_instance == 4
        async with pool:
            assert len(pool.providers) == 3 and len(set(pool.urls)) == 3  # ceil(10 / 4)
            ids = [p.container_id for p in pool.providers]  # type: ignore[attr-defined]
            clients = await asyncio.gather(*(pool.acquire(timeout_s=60) for _ in range(12)))
            per_server = Counter(c.base_url for c in clients)
            assert sorted(per_server.values()) == [4, 4, 4]
            with pytest.raises(EnvTimeoutError):  # every server holds what the card says it holds
                await pool.acquire(timeout_s=0.3)
            replies = await asyncio.gather(*(c.step(EchoAction(message=str(i))) for i, c in enumerate(clients)))
            assert [r.observation.echoed_message for r in replies] == [str(i) for i in range(12)]
            await pool.release(clients.pop())  # a freed slot is taken by the next session
            async with pool.session(timeout_s=5) as env:
                assert (await env.step(EchoAction(message="hi"))).observation.echoed_message == "hi"
        engine = pool.providers[0].client  # type: ignore[attr-defined]
        assert all(not engine.api.containers(all=True, filters={"id": cid}) for cid in ids)
