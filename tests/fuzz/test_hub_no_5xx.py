"""Issue 37: no input makes the Hub answer 5xx. 1,000 requests (seeded, so a failure replays) over
the JSON API (every operation of its OpenAPI spec, path and query parameters drawn from hostile
values: huge integers, NUL and control characters, long strings, broken digests), the webhook
(random bytes, random JSON, payloads with broken fields, with and without the secret) and
Gradio's own routes (queue joins, calls, event streams with random bodies and ids). Every answer
must be below 500, and the service must still answer its health check afterwards."""

from __future__ import annotations

import json
import random
import string
import time
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from pydantic import SecretStr

from hub_service.app import create_app
from hub_service.indexer.service import index_source
from tests.hub.helpers import ListSource, space
from tests.support.servers import serve_app

pytestmark = pytest.mark.slow

SECRET = "fuzz-secret"
COUNTS = {"api": 500, "webhook": 200, "gradio": 300}
HOSTILE = [
    "9" * 40,
    "-9" * 20,
    "2147483648",
    "9223372036854775808",
    "-1",
    "0",
    "1e309",
    "NaN",
    "",
    " ",
    "a" * 3000,
    "\x00",
    "a\x00b",
    "\x01\x7f",
    "ü\u202e",
    "../../etc/passwd",
    "sha256:" + "z" * 64,
    "sha256:",
    "latest",
    "main",
    "%",
    "true",
    "{}",
    "[]",
]


def _text(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(HOSTILE)
    alphabet = string.printable + "üß\u0000\u2028"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randint(0, 7 if depth < 3 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, 2**63, -(2**70), 10**40, rng.randint(-100, 100)])
    if kind == 3:
        return rng.choice([0.5, -1e308, 1e308])
    if kind == 4:
        return _text(rng)
    if kind in (5, 6):
        return {_text(rng)[:12]: _json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def _body(rng: random.Random, shaped: Any) -> bytes:
    roll = rng.random()
    if roll < 0.2:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
    if roll < 0.4:
        return json.dumps(_json_value(rng)).encode()
    return json.dumps(shaped).encode()


def _api_requests(rng: random.Random, spec: dict[str, Any], n: int) -> list[tuple[str, str, bytes | None]]:
    valid = {"owner": "user0", "name": "env_00000", "revision": f"{0:040x}", "stage": "build", "lock_id": "a" * 64}
    operations = [
        (method.upper(), path, op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in ("get", "post")
    ]
    out = []
    for _ in range(n):
        method, template, op = rng.choice(operations)
        path, query = template, []
        for param in op.get("parameters", []):
            # Path parameters mostly name what exists, so that hostile query values reach the database.
            odds = 0.85 if param["in"] == "path" else 0.3
            value = valid.get(param["name"], "1") if rng.random() < odds else _text(rng)
            if param["in"] == "path":
                path = path.replace("{" + param["name"] + "}", quote(value, safe="") or "x")
            elif param["in"] == "query" and rng.random() < 0.7:
                query.append((param["name"], value))
        url = path + ("?" + urlencode(query) if query else "")
        body = _body(rng, _json_value(rng)) if method == "POST" else None
        out.append((method, url, body))
    return out


def _webhook_requests(rng: random.Random, n: int) -> list[tuple[str, str, bytes | None]]:
    out = []
    for _ in range(n):
        payload = {
            "event": {"action": rng.choice(["update", "create", "delete", _text(rng)]), "scope": _json_value(rng)},
            "repo": {"type": rng.choice(["space", "model", _text(rng)]), "name": _text(rng), "headSha": _text(rng)},
            "webhook": {"id": _text(rng), "version": rng.choice([3, 2, "3", None])},
        }
        if rng.random() < 0.3:
            payload["discussion"] = _json_value(rng)
        secret = rng.choice([SECRET, SECRET, _text(rng), None])
        url = "/webhooks/hf" + (f"?{urlencode({'secret': secret})}" if secret is not None else "")
        out.append(("POST", url, _body(rng, payload)))
    return out


def _gradio_requests(rng: random.Random, names: list[str], fns: int, n: int) -> list[tuple[str, str, bytes | None]]:
    out: list[tuple[str, str, bytes | None]] = []
    for _ in range(n):
        name = quote(rng.choice([*names, _text(rng) or "x"]), safe="")
        token = quote(_text(rng) or "t", safe="")
        event = {
            "data": _json_value(rng) if rng.random() < 0.5 else [_json_value(rng)],
            "fn_index": rng.choice([rng.randint(-2, fns + 2), 10**20, _text(rng), None]),
            "session_hash": rng.choice([_text(rng), "fuzz" + str(rng.randint(0, 9)), None]),
        }
        kind = rng.randint(0, 6)
        if kind == 0:
            out.append(("POST", "/gradio_api/queue/join", _body(rng, event)))
        elif kind == 1:
            out.append(("POST", f"/gradio_api/call/{name}", _body(rng, event)))
        elif kind == 2:
            out.append(("POST", f"/gradio_api/run/{name}", _body(rng, event)))
        elif kind == 3:
            out.append(("GET", f"/gradio_api/queue/data?{urlencode({'session_hash': _text(rng)})}", None))
        elif kind == 4:
            out.append(("GET", f"/gradio_api/call/{name}/{token}", None))
        elif kind == 5:
            out.append(("POST", f"/gradio_api/{token}", _body(rng, event)))
        else:
            out.append(("GET", rng.choice(["/gradio_api/info", "/config", f"/gradio_api/{token}"]), None))
    return out


def test_a_thousand_hostile_requests_get_no_server_error(clean_factory, hub_settings) -> None:
    index_source(clean_factory, ListSource([space(i) for i in range(5)]))
    settings = hub_settings.model_copy(
        update={
            "website": True,
            "webhook_secret": SecretStr(SECRET),
            "play_max_sessions": 0,  # a fuzzed queue join may name the play button: it starts nothing
            **{f"rate_{kind}_burst": 100_000 for kind in ("api", "webhook", "web", "play", "model")},
            **{f"rate_{kind}_per_minute": 1e7 for kind in ("api", "webhook", "web", "play", "model")},
        }
    )
    rng = random.Random(37)
    with serve_app(create_app(settings, run_migrations=False)) as url, httpx.Client(base_url=url, timeout=30) as client:
        spec = client.get("/openapi.json").json()
        names = [n.strip("/") for n in client.get("/gradio_api/info").json()["named_endpoints"]]
        fns = len(client.get("/config").json()["dependencies"])
        requests = (
            _api_requests(rng, spec, COUNTS["api"])
            + _webhook_requests(rng, COUNTS["webhook"])
            + _gradio_requests(rng, names, fns, COUNTS["gradio"])
        )
        rng.shuffle(requests)
        statuses: dict[int, int] = {}
        failures = []
        started = time.monotonic()
        for method, path, body in requests:
            headers = {"content-type": "application/json"} if body is not None else {}
            if path.startswith("/webhooks/") and "secret=" not in path and body and body[:1] == b"{":
                headers["x-webhook-secret"] = SECRET
            try:
                response = client.request(method, path, content=body, headers=headers)
            except httpx.TransportError as exc:  # the server broke the connection off: a server error too
                failures.append(f"{method} {path[:200]} {body[:200] if body else b''!r} -> {exc!r}")
                continue
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code >= 500:
                failures.append(f"{method} {path[:200]} {body[:200] if body else b''!r} -> {response.status_code}")
        elapsed = time.monotonic() - started
        assert len(requests) == sum(COUNTS.values()) == 1000
        assert not failures, failures[:10]
        assert client.get("/api/v1/health").json()["status"] == "ok"
    print(f"1000 requests in {elapsed:.1f}s, statuses {dict(sorted(statuses.items()))}")


def test_the_reported_inputs_get_a_4xx_that_names_the_field(clean_factory, hub_settings) -> None:
    """The red team's findings: a huge `attempt`, a huge `before`, random bytes to Gradio's routes."""
    index_source(clean_factory, ListSource([space(0)]))
    settings = hub_settings.model_copy(update={"website": True, "play_max_sessions": 0})
    huge = "9" * 40
    with serve_app(create_app(settings, run_migrations=False)) as url, httpx.Client(base_url=url, timeout=30) as client:
        for path, field in (
            (f"/api/v1/envs/user0/env_00000/versions/{0:040x}/logs/build?attempt={huge}", "attempt"),
            (f"/api/v1/envs/user0/env_00000/events?before={huge}", "before"),
        ):
            response = client.get(path)
            assert response.status_code == 422, response.text
            assert ["query", field] in [e["loc"] for e in response.json()["error"]["errors"]]
        garbage = b"\xff\xfe\x00{not json"
        for path in ("/gradio_api/queue/join", "/gradio_api/call/open_site"):
            response = client.post(path, content=garbage, headers={"content-type": "application/json"})
            assert response.status_code == 422, response.text
            assert response.json()["error"]["code"] == "invalid_request"
        response = client.post("/gradio_api/queue/join", json={"data": [], "fn_index": 10**6, "session_hash": "abc"})
        assert response.status_code == 422 and response.json()["error"]["errors"][0]["loc"] == ["body", "fn_index"]
        assert client.get("/gradio_api/queue/data", params={"session_hash": "nobody"}).status_code == 404
        assert client.get("/gradio_api/call/open_site/0123456789abcdef").status_code == 404
