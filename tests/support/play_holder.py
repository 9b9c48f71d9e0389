"""Holds play sessions from a process of its own, as another Hub process would (tests of the caps
that every Hub process shares). Settings come from OPENENV_HUB_* variables.

    python -m tests.support.play_holder OWNER/NAME VISITOR COUNT

Prints one JSON line once the sessions are open, then holds them until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys

from hub_service.db import make_engine, sessionmaker_for
from hub_service.play.sessions import PlayManager
from hub_service.settings import HubSettings


async def _hold(env_id: str, visitor: str, count: int) -> None:
    settings = HubSettings()
    play = PlayManager(settings, sessionmaker_for(make_engine(settings.sqlalchemy_url)))
    owner, name = env_id.split("/")
    for i in range(count):
        await play.open(f"holder-tab-{i}", visitor, owner, name)
    print(json.dumps({"opened": count, "holder": play.leases.holder}), flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(_hold(sys.argv[1], sys.argv[2], int(sys.argv[3])))
