"""Sessions-at-scale driver: `python _scale_drivers.py KIND URL SESSIONS STEPS CAP_S` prints one JSON line.

SESSIONS clients connect at once; when every connect has finished, each connected session does a
reset and STEPS steps, all sessions at the same time, then closes. Every session is open while the
others step. KIND is:

- `neutral`: the same driver for any server, to measure servers: raw WebSocket frames of the
  protocol (`{"type": "reset"}`, `{"type": "step", "data": {...}}`) over picows, no compression
  offered, at most `HANDSHAKES` handshakes in flight (the others wait their turn), each handshake
  given `CONNECT_TIMEOUT_S` from its own start (not from its wait) and each reply `REPLY_TIMEOUT_S`.
- `ours` (openenv.EnvClient, typed) or `upstream` (openenv-core's own EnvClient; run with the
  upstream venv's Python): the clients as a user gets them, each with its defaults (10 s to
  connect, 60 s per reply; ours queues its handshakes 256 at a time, upstream's opens all at once).

A session succeeds when its reset and all its steps answered. A run still going after CAP_S
seconds is cut off there: its unfinished sessions count as failed ("cut off at the cap").
Every kind runs on the same event loop (`_eventloop.LOOP`, uvloop) and raises its soft limit of
open files to the hard one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

import _eventloop

MESSAGE = "hello world"
HERE = Path(__file__).resolve().parent
HANDSHAKES = 256  # the neutral driver's handshakes in flight at once
CONNECT_TIMEOUT_S = 10.0
REPLY_TIMEOUT_S = 60.0


def raise_open_files() -> int:
    """Soft limit of open files raised to the hard one; returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def _ours(url: str) -> tuple[Any, Any]:
    sys.path.insert(0, str(HERE.parent / "envs"))
    from echo_env import EchoAction, EchoEnv

    return (lambda: EchoEnv(url)), EchoAction(message=MESSAGE)


def _upstream(url: str) -> tuple[Any, Any]:
    sys.path.insert(0, str(HERE))
    from _upstream_echo import EchoAction, EchoClient

    return (lambda: EchoClient(url)), EchoAction(message=MESSAGE)


class _Neutral:
    """One session of the neutral driver: raw frames over a picows WebSocket."""

    gate: asyncio.Semaphore | None = None

    def __init__(self, url: str) -> None:
        self.url = url.replace("http", "ws", 1) + "/ws"
        self.transport: Any = None
        self.listener: Any = None

    async def connect(self) -> None:
        from picows import WSListener, ws_connect

        class Listener(WSListener):  # type: ignore[misc]
            def __init__(self) -> None:
                self.reply: asyncio.Future[bytes] | None = None

            def on_ws_frame(self, transport: Any, frame: Any) -> None:
                if self.reply is not None and not self.reply.done():
                    self.reply.set_result(frame.get_payload_as_bytes())

            def on_ws_disconnected(self, transport: Any) -> None:
                if self.reply is not None and not self.reply.done():
                    self.reply.set_exception(ConnectionError("the server closed the connection"))

        if _Neutral.gate is None:
            _Neutral.gate = asyncio.Semaphore(HANDSHAKES)
        async with _Neutral.gate:  # the wait for a turn is not part of the handshake's timeout
            try:
                self.transport, self.listener = await asyncio.wait_for(
                    ws_connect(Listener, self.url, websocket_handshake_timeout=None), CONNECT_TIMEOUT_S
                )
            except TimeoutError:
                raise TimeoutError(f"the handshake timed out after {CONNECT_TIMEOUT_S:g} s") from None

    async def _ask(self, frame: dict[str, Any]) -> dict[str, Any]:
        from picows import WSMsgType

        self.listener.reply = asyncio.get_running_loop().create_future()
        self.transport.send(WSMsgType.TEXT, json.dumps(frame).encode())
        try:
            reply = json.loads(await asyncio.wait_for(self.listener.reply, REPLY_TIMEOUT_S))
        except TimeoutError:
            raise TimeoutError(f"no reply within {REPLY_TIMEOUT_S:g} s") from None
        if reply.get("type") != "observation":
            raise RuntimeError(f"the server answered {reply.get('type')}: {str(reply.get('data'))[:60]}")
        return dict(reply)

    async def reset(self) -> dict[str, Any]:
        return await self._ask({"type": "reset", "data": {}})

    async def step(self, action: dict[str, Any]) -> dict[str, Any]:
        return await self._ask({"type": "step", "data": action})

    async def close(self) -> None:
        if self.transport is not None:
            self.transport.disconnect()


def _neutral(url: str) -> tuple[Any, Any]:
    return (lambda: _Neutral(url)), {"message": MESSAGE}


def _why(exc: BaseException) -> str:
    text = re.sub(r"(?:ws|http)s?://[^/\s]+(?:/ws)?", "the server", str(exc).split("\n")[0])  # runs differ in port only
    return f"{type(exc).__name__}: {text[:90]}" if text else type(exc).__name__


async def run(kind: str, url: str, sessions: int, steps: int, cap_s: float) -> dict[str, Any]:
    make, action = {"ours": _ours, "upstream": _upstream, "neutral": _neutral}[kind](url)
    perf = time.perf_counter
    connect_s: list[float] = []
    step_ns: list[int] = []
    failures: collections.Counter[str] = collections.Counter()
    done = {"connected": 0, "ok": 0, "steps": 0, "pending": sessions}
    all_connected = asyncio.Event()
    phase: dict[str, float] = {}

    def connect_finished() -> None:
        done["pending"] -= 1
        if done["pending"] == 0:
            phase["stepping"] = perf()
            all_connected.set()

    async def one() -> None:
        env = make()
        t0 = perf()
        try:
            await env.connect()
        except Exception as exc:
            failures["connect: " + _why(exc)] += 1
            connect_finished()
            return
        connect_s.append(perf() - t0)
        done["connected"] += 1
        connect_finished()
        try:
            await all_connected.wait()
            await env.reset()
            ns = time.perf_counter_ns
            for _ in range(steps):
                t1 = ns()
                await env.step(action)
                step_ns.append(ns() - t1)
                done["steps"] += 1
            done["ok"] += 1
        except Exception as exc:
            failures["episode: " + _why(exc)] += 1
        finally:
            with contextlib.suppress(Exception):  # closing is best effort: the server's side is measured
                await asyncio.wait_for(env.close(), 5)

    start = perf()
    tasks = [asyncio.ensure_future(one()) for _ in range(sessions)]
    _, unfinished = await asyncio.wait(tasks, timeout=cap_s)
    end = perf()
    if unfinished:
        failures[f"cut off at the cap of {cap_s:g} s"] += len(unfinished)
        for t in unfinished:
            t.cancel()
        await asyncio.wait(unfinished, timeout=10)
    connect_s.sort()
    step_ns.sort()
    stepping = end - phase.get("stepping", end)
    return {
        "sessions": sessions,
        "connected": done["connected"],
        "succeeded": done["ok"],
        "success_rate": done["ok"] / sessions,
        "failures": dict(failures.most_common(4)),
        "connect_p50_ms": round(connect_s[len(connect_s) // 2] * 1e3, 1) if connect_s else None,
        "connect_p99_ms": round(connect_s[int(len(connect_s) * 0.99)] * 1e3, 1) if connect_s else None,
        "connect_all_s": round(phase.get("stepping", end) - start, 2),
        "steps": done["steps"],
        "stepping_s": round(stepping, 2),
        "steps_per_s": round(done["steps"] / stepping) if stepping > 0 else 0,
        "p50_ms": round(step_ns[len(step_ns) // 2] / 1e6, 2) if step_ns else None,
        "p99_ms": round(step_ns[int(len(step_ns) * 0.99)] / 1e6, 2) if step_ns else None,
        "wall_s": round(end - start, 2),
        "loop": _eventloop.running(),
    }


def main() -> None:
    kind, url, sessions, steps, cap_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    files = raise_open_files()

    async def report() -> None:
        result = await run(kind, url, sessions, steps, cap_s)
        result["open_files_limit"] = files
        print(json.dumps(result), flush=True)
        os._exit(0)  # skip tearing down what a cut-off run left open: the numbers are out

    _eventloop.run(report())


if __name__ == "__main__":
    main()
