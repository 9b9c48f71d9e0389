"""An env server that answers like a hostile Space, standard library only (it runs in any image).

`python hostile_env_server.py` serves `GET /health` like an OpenEnv server, and then, by its mode
(`HOSTILE_MODE`, else the file `mode.txt` beside this script):

- drip: `GET /schema` sends its headers, then one byte every half second, forever.
- huge_schema: `GET /schema` is a valid JSON schema padded to `HOSTILE_MB` MB (default 300).
- fragmented: `/schema` is fine; every WebSocket request gets a reply of `HOSTILE_MB` MB (default
  400) in 256 KB frames (one text frame, then continuation frames).
- big_frame: every WebSocket request gets one text frame of `HOSTILE_MB` MB (default 8).

Listens on `--host`/`--port`, else `HOST`:`PORT` (default 127.0.0.1:8000; its Dockerfile sets HOST=0.0.0.0 inside a container). Used by tests/hub/test_hostile_servers.py
(in a container) and tests/runtime/test_client_message_cap.py (as a local process on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import struct
import sys
from pathlib import Path

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_SCHEMA = {
    "action": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    "observation": {"type": "object"},
    "state": {"type": "object"},
}


def _mode() -> str:
    mode = os.environ.get("HOSTILE_MODE")
    if mode:
        return mode
    return (Path(__file__).with_name("mode.txt")).read_text().strip()


MODE = _mode()
MB = float(os.environ.get("HOSTILE_MB", {"huge_schema": 300, "fragmented": 400, "big_frame": 8}.get(MODE, 1)))


def _head(status: str, length: int, kind: str = "application/json") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n".encode()
    )


async def _schema(writer: asyncio.StreamWriter) -> None:
    if MODE == "drip":
        writer.write(_head("200 OK", 1 << 20))
        while True:
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.5)
    if MODE == "huge_schema":
        start = json.dumps(_SCHEMA)[:-1].encode() + b', "padding": "'
        size = int(MB * (1 << 20))
        writer.write(_head("200 OK", len(start) + size + 2) + start)
        block = b"x" * (1 << 16)
        for _ in range(size // len(block)):
            writer.write(block)
            await writer.drain()
        writer.write(b"x" * (size % len(block)) + b'"}')
        await writer.drain()
        return
    body = json.dumps(_SCHEMA).encode()
    writer.write(_head("200 OK", len(body)) + body)
    await writer.drain()


def _frame(opcode: int, payload: bytes, fin: bool) -> bytes:
    first = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        return struct.pack("!BB", first, n) + payload
    if n < 1 << 16:
        return struct.pack("!BBH", first, 126, n) + payload
    return struct.pack("!BBQ", first, 127, n) + payload


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    first, second = await reader.readexactly(2)
    n = second & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    mask = await reader.readexactly(4) if second & 0x80 else b"\0\0\0\0"
    data = await reader.readexactly(n)
    return first & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


async def _websocket(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> None:
    key = next(
        line.split(b":", 1)[1].strip()
        for line in request.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key:")
    )
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest())
    writer.write(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
        + accept
        + b"\r\n\r\n"
    )
    await writer.drain()
    while True:
        opcode, _ = await _read_frame(reader)
        if opcode == 0x8:  # close
            return
        size = int(MB * (1 << 20))
        if MODE == "big_frame":
            writer.write(_frame(0x1, b'"' + b"x" * (size - 2) + b'"', fin=True))
            await writer.drain()
            continue
        chunk = b"x" * (1 << 18)
        writer.write(_frame(0x1, b'{"type": "observation", "data": {"padding": "', fin=False))
        for _ in range(size // len(chunk)):
            writer.write(_frame(0x0, chunk, fin=False))
            await writer.drain()
        writer.write(_frame(0x0, b'"}}', fin=True))
        await writer.drain()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        request = await reader.readuntil(b"\r\n\r\n")
        path = request.split(b" ", 2)[1].decode()
        if path == "/ws" and b"websocket" in request.lower():
            await _websocket(reader, writer, request)
        elif path == "/health":
            body = b'{"status": "healthy"}'
            writer.write(_head("200 OK", len(body)) + body)
        elif path == "/schema":
            await _schema(writer)
        else:
            writer.write(_head("404 Not Found", 2) + b"{}")
        await writer.drain()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass  # the client went away (or cut us off): that is what these tests want
    finally:
        writer.close()


async def main() -> None:
    args = sys.argv[1:]
    host = args[args.index("--host") + 1] if "--host" in args else os.environ.get("HOST", "127.0.0.1")
    port = int(args[args.index("--port") + 1] if "--port" in args else os.environ.get("PORT", "8000"))
    server = await asyncio.start_server(_handle, host, port)
    print(f"hostile env server ({MODE}) listening", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
