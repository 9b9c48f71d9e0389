"""The limit: the ceiling's JSON echo (`_ceiling_app.py`) over raw WebSocket frames, with no HTTP
framework, no ASGI and no session layer: a picows server on one event loop, which parses each
frame, builds the same reply and sends it. What one Python process can do with these frames on
this machine, against which the stacks' steps per second are read.

    python _raw_app.py --host 127.0.0.1 --port P

GET /health answers 200 (the harness polls it); /ws is the echo; any other path gets 404.
"""

from __future__ import annotations

import argparse

import _eventloop
import orjson
from picows import (
    WSFrame,
    WSListener,
    WSMsgType,
    WSTransport,
    WSUpgradeRequest,
    WSUpgradeResponse,
    WSUpgradeResponseWithListener,
    ws_create_server,
)


class Echo(WSListener):  # type: ignore[misc]
    def on_ws_frame(self, transport: WSTransport, frame: WSFrame) -> None:
        if frame.msg_type == WSMsgType.TEXT:
            msg = orjson.loads(frame.get_payload_as_bytes())
            reply = {"type": "observation", "data": {"observation": msg.get("data"), "reward": 0.0, "done": False}}
            transport.send(WSMsgType.TEXT, orjson.dumps(reply))
        elif frame.msg_type == WSMsgType.CLOSE:
            transport.send_close(frame.get_close_code())
            transport.disconnect()


def route(request: WSUpgradeRequest) -> WSListener | WSUpgradeResponseWithListener | None:
    if request.path == b"/ws":
        return Echo()
    if request.path == b"/health":
        ok = WSUpgradeResponse.create_ok_response(b'{"status":"healthy"}', {"Content-Type": "application/json"})
        return WSUpgradeResponseWithListener(ok, None)
    return None


async def main(host: str, port: int) -> None:
    server = await ws_create_server(route, host, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    _eventloop.run(main(args.host, args.port))
