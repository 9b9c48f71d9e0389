"""The ceiling: a bare Starlette WebSocket JSON echo (no validation, no env, no sessions)."""

import orjson
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocketDisconnect


async def echo(websocket):
    await websocket.accept()
    try:
        while True:
            msg = orjson.loads(await websocket.receive_text())
            reply = {"type": "observation", "data": {"observation": msg.get("data"), "reward": 0.0, "done": False}}
            await websocket.send_text(orjson.dumps(reply).decode())
    except WebSocketDisconnect:
        pass


async def health(request):
    return JSONResponse({"status": "healthy"})


app = Starlette(routes=[Route("/health", health), WebSocketRoute("/ws", echo)])
