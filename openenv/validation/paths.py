"""Which way an episode reaches an MCP env: its users' MCP session path, and the plain `/ws` path.

An MCP env (its action is a tool call: `tool_name` and `arguments`) has two ways in:

- **the MCP session path**, what upstream 0.10.0's `MCPToolClient` uses (openenv/validation/
  mcp_session.py): a session made with `POST /mcp openenv/session/create`, a WebSocket attached to
  it for `reset` and `state`, and each tool call a `tools/call` over `POST /mcp`, run on the
  server's event loop;
- **the plain path**, what `GenericEnvClient` (ours and upstream's) uses: `tools/list` in an `mcp`
  frame and each tool call a `step` frame on `/ws`. Upstream's server runs such a step through the
  env's `step_async`, or its sync `step` in a worker thread; an env whose tool calls end up in the
  latter while the session's tool client is open on the server's loop never answers (upstream's
  `MCPEnvironment.step_async` docstring names that deadlock), until upstream's tool-call timeout
  (30 s) gives up, and meanwhile the session holds its place.

`play_paths` plays the episode on both, the MCP session path first, and the verdict is that
path's: an env passes when its users' client gets through, a plain path that does not answer is
noted, not counted, and an MCP session path that fails fails the env. The plain path decides
where there is no MCP session path to take: an env whose action is not a tool call, a server
without `openenv/session/create`, or one that cannot attach a WebSocket to such a session (an
upstream server older than 0.10.0: the MCP episode cannot even reset there, and the plain one
can).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from openenv.validation.episode import Episode, StepRecord, is_tool_schema, play_episode
from openenv.validation.mcp_session import McpSessionClient, NoSessionPath

__all__ = ["MCP_SESSION_PATH", "PLAIN_PATH", "play_paths"]

MCP_SESSION_PATH = "mcp-session"
PLAIN_PATH = "plain"
# After a plain-path step got no reply, how long the server may take to free that session's place:
# upstream's server answers (and lets the session go) when its tool-call timeout ends, 30 s after
# the step was sent (MCP_TOOL_CALL_TIMEOUT in openenv.core.env_server.mcp_environment).
RELEASE_AFTER_HANG_S = 40.0
_PLAIN_GRACE_S = 5.0  # for the plain episode's reset: the MCP session closed just before is being released


async def play_paths(
    client: Any,
    action_schema: dict[str, Any],
    steps: int,
    *,
    seed: int | None = 0,
    on_record: Callable[[StepRecord], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    release_grace_s: float = 0.0,
    release_after_hang_s: float = RELEASE_AFTER_HANG_S,
) -> Episode:
    """`play_episode` on the path(s) an env's users take (module docstring); returns the episode
    that decides, its `path` attribute set ("mcp-session" or "plain"). `client` is a
    `GenericEnvClient` for the plain path; for an MCP env it is closed when this returns, so that
    its session does not hold the server's place. `on_note` sees one line per path played and its
    outcome. Never raises for what the server does."""
    note = on_note or (lambda line: None)
    kw: dict[str, Any] = {"seed": seed, "on_record": on_record}
    if not is_tool_schema(action_schema):
        return _on(await play_episode(client, action_schema, steps, release_grace_s=release_grace_s, **kw), PLAIN_PATH)
    mcp = McpSessionClient.like(client)
    if not await _served(mcp, release_grace_s, note):
        return _on(await play_episode(client, action_schema, steps, release_grace_s=release_grace_s, **kw), PLAIN_PATH)
    note(
        "MCP session path (as upstream's MCPToolClient): POST /mcp openenv/session/create, /ws?session_id=, tools/call over POST /mcp"
    )
    try:
        by_mcp = await play_episode(mcp, action_schema, steps, release_grace_s=release_grace_s, **kw)
    finally:
        await mcp.close()
    note(f"MCP session path: {by_mcp.verdict.reason} ({by_mcp.verdict.code})")
    note("plain /ws path (as GenericEnvClient): tools/list in an mcp frame, each tool call a step frame")
    try:
        by_plain = await play_episode(
            client, action_schema, steps, release_grace_s=max(release_grace_s, _PLAIN_GRACE_S), **kw
        )
    finally:
        await client.close()
    mcp_reset = by_mcp.records[0].outcome == "ok"
    plain_decides = not mcp_reset and by_plain.verdict.ok
    said = f"plain /ws path: {by_plain.verdict.reason} ({by_plain.verdict.code})"
    if by_plain.verdict.ok or plain_decides:
        note(said)
    else:
        note(f"{said}; not counted: the MCP session path, the one upstream's MCPToolClient takes, decides")
    if not by_plain.verdict.ok and _hung(by_plain):
        await _released(mcp, release_after_hang_s, note)
    if plain_decides:
        note(
            "the server made an MCP session but the episode could not reset on it (attaching /ws?session_id= is "
            "upstream 0.10.0's; older servers open a session of their own): the plain /ws path decides"
        )
        return _on(by_plain, PLAIN_PATH)
    return _on(by_mcp, MCP_SESSION_PATH)


def _on(episode: Episode, path: str) -> Episode:
    episode.path = path
    return episode


async def _served(mcp: McpSessionClient, grace_s: float, note: Callable[[str], None]) -> bool:
    """Whether the server makes MCP sessions; the one made stays open for the episode (`mcp.reset`
    uses it). CAPACITY_REACHED is waited out for `grace_s`, as `reset_when_free` does for a reset."""
    from openenv.errors import CapacityReachedError, EnvClientError

    ends, pause = time.monotonic() + grace_s, 0.05
    while True:
        try:
            await mcp.open()
        except NoSessionPath as exc:
            note(f"no MCP session path on this server ({exc}): the plain /ws path decides")
            return False
        except CapacityReachedError:
            if time.monotonic() < ends:
                await asyncio.sleep(pause)
                pause = min(0.5, pause * 2)
                continue
            return True  # the episode's own reset meets the refusal, and records it
        except EnvClientError as exc:
            note(f"POST /mcp openenv/session/create failed ({exc}): the plain /ws path decides")
            return False
        return True


def _hung(episode: Episode) -> bool:
    """Whether a request of the episode got no reply in time (its session may still hold a place)."""
    return any(r.outcome == "died" and r.code == "EnvTimeoutError" for r in episode.records)


async def _released(mcp: McpSessionClient, limit_s: float, note: Callable[[str], None]) -> None:
    """Wait (at most `limit_s`) until the server makes a session again: the plain path's unanswered
    step holds its session's place until the server gives up on it, and the checks after this one
    need that place."""
    from openenv.errors import CapacityReachedError, EnvClientError

    started = time.monotonic()
    while True:
        try:
            await mcp.open()
        except CapacityReachedError:
            if time.monotonic() - started >= limit_s:
                note(f"the server still held the unanswered plain session's place after {limit_s:g}s")
                return
            await asyncio.sleep(0.5)
            continue
        except (EnvClientError, NoSessionPath) as exc:
            note(f"could not see whether the server released the unanswered plain session: {exc}")
            return
        await mcp.close()
        note(f"the server released the unanswered plain session's place after {time.monotonic() - started:.1f}s")
        return
