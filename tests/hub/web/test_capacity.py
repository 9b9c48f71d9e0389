"""Fair capacity for visitors: a visitor who tries more envs in a row than the Hub may run at once
is never locked out (the least recently used idle instance is stopped for them); only when every
instance is in active use do they wait, told their place in line and an estimate."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hub_service.play.errors import AllInUse
from hub_service.play.instances import InstancePool, Target
from hub_service.play.sessions import PlayManager
from hub_service.settings import HubSettings
from openenv.client.providers import ProcessProvider

pytestmark = pytest.mark.slow


async def test_more_envs_than_the_cap_in_a_row_then_a_line_only_when_all_are_busy(
    web_settings: HubSettings, clean_factory: sessionmaker[Session]
) -> None:
    folder = Path(web_settings.local_source) / "echo_env"
    # Three distinct envs to the pool (each a real echo_env server), two allowed at once.
    targets = [
        Target(key=f"local/env_{i}@1", how="process", make_provider=lambda: ProcessProvider(folder)) for i in range(3)
    ]
    pool = InstancePool(max_instances=2, linger_s=600)  # idle ones linger far longer than this test
    play = PlayManager(web_settings.model_copy(update={"play_idle_timeout_s": 300}), clean_factory)
    play.pool = pool
    try:
        first = await pool.acquire(targets[0])
        await pool.release(first)
        second = await pool.acquire(targets[1])
        await pool.release(second)
        third = await pool.acquire(targets[2])  # the cap is reached: the least recently used idle one goes
        assert sorted(pool.instances) == [targets[1].key, targets[2].key]
        assert not first.provider.running and second.provider.running
        again = await pool.acquire(targets[0])  # back to the first env: the other idle one goes
        assert sorted(pool.instances) == [targets[0].key, targets[2].key] and not second.provider.running

        # Both in use now: a visitor waits, told their place and when a place may free up.
        with pytest.raises(AllInUse) as bob:
            await play.open("tab-b", "bob", "local", "echo_env")
        assert "all 2 environments this Hub runs for visitors are in use" in bob.value.message
        assert "number 1 in line" in bob.value.message and "about 5 min" in bob.value.message
        with pytest.raises(AllInUse, match="number 2 in line"):
            await play.open("tab-c", "carol", "local", "echo_env")
        with pytest.raises(AllInUse, match="number 1 in line"):  # asking again keeps one's place
            await play.open("tab-b", "bob", "local", "echo_env")
        assert play.sessions == {} and third.users == 1 and again.users == 1

        await pool.release(third)  # someone leaves: the next visitor gets in at once
        session = await play.open("tab-b", "bob", "local", "echo_env")
        assert session.instance.provider.running and not third.provider.running
        assert "bob" not in play._line
    finally:
        await play.aclose()
    assert pool.instances == {} and not again.provider.running
