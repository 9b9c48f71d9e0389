"""A stand-in image registry over real HTTP on 127.0.0.1 (Docker's registry API, v2), for what the
real one in scripts/registry cannot be made to do on demand: answer 404 for a manifest, refuse
anonymous pulls the way Docker Hub does (a Bearer challenge, an anonymous token, then 401 for a
repository that does not exist), or be in trouble (503). The Docker engine pulls from it too
(127.0.0.0/8 is plain HTTP to the engine)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

Mode = Literal["open", "bearer", "trouble"]


@contextmanager
def stand_in_registry(mode: Mode = "open") -> Iterator[str]:
    """Serve a registry that has no images; yields its `host:port`.

    `open`: manifests answer 404 MANIFEST_UNKNOWN. `bearer`: every request wants a token, the
    token service gives anonymous ones, and with one a manifest answers 401 (Docker Hub's answer
    for a repository that does not exist). `trouble`: every request answers 503.
    """

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet in test output
            return

        def _reply(self, status: int, body: dict[str, object], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Docker-Distribution-Api-Version", "registry/2.0")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_GET(self) -> None:
            host = self.headers.get("Host", "")
            if mode == "trouble":
                return self._reply(503, {"errors": [{"code": "UNAVAILABLE", "message": "try again later"}]})
            if self.path.startswith("/token"):
                return self._reply(200, {"token": "anonymous", "access_token": "anonymous"})
            if mode == "bearer":
                challenge = f'Bearer realm="http://{host}/token",service="stand-in"'
                if self.headers.get("Authorization") != "Bearer anonymous" or "/manifests/" in self.path:
                    error = {"code": "UNAUTHORIZED", "message": "authentication required"}
                    return self._reply(401, {"errors": [error]}, {"WWW-Authenticate": challenge})
            if self.path in ("/v2/", "/v2"):
                return self._reply(200, {})
            if "/manifests/" in self.path:
                return self._reply(404, {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]})
            return self._reply(404, {"errors": [{"code": "NAME_UNKNOWN", "message": "repository name not known"}]})

        do_HEAD = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="stand-in-registry", daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
