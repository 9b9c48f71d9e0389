"""Issue 37: no input makes the Hub answer 5xx. 1,000 requests (seeded, so a failure replays) over
the JSON API (every operation of its OpenAPI spec, path and query parameters drawn from hostile
values: huge integers, NUL and control characters, long strings, broken digests), the webhook
(random bytes, random JSON, payloads with broken fields, with and without the secret) and
Gradio's own routes (queue joins, calls, event streams with random bodies and ids). Every answer
must be below 500, and the service must still answer its health check afterwards.

Issue 47: random draws missed a 500 that one value of one parameter caused (an audit-log `before`
past the database's integers). So the boundary values of each parameter's type, read from the
app's own OpenAPI document (an endpoint added later is covered without editing this file), are
also swept: every value for every path, query and header parameter of every operation, one
request each, the other parameters naming what exists so that the value reaches the database.
Integers get 0, ±1, the edges of 32- and 64-bit integers (signed and not), 10**30 and the declared
minimum and maximum ±1; strings get the empty string, one past the declared length, very long
ones, NUL and control characters, unicode, percent-escapes, and bytes that are not UTF-8."""

from __future__ import annotations

import json
import random
import string
import time
from typing import Any, NamedTuple
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
MAINTAINER = "fuzz-maintainer-token"
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


# Path parameters that name what the test indexed, so that other values reach the database.
VALID = {"owner": "user0", "name": "env_00000", "revision": f"{0:040x}", "stage": "build", "lock_id": "a" * 64}

_INTS = [0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**32, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30)]
# Not integers, or integers in a form a careless parser takes or chokes on.
_INT_LIKE = ["", " 1", "1 ", "1.5", "1e3", "0x10", "+1", "-0", "0" * 40 + "1", "1_000", "NaN", "١٢٣", "9" * 5000]
_FLOATS = ["1e309", "-1e309", "inf", "-inf", "NaN", "5e-324", "1.7976931348623157e308", "-0.0"]
_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\x01\x1f\x7f\t\n",
    "a" * 4000,
    "ü\u202e\U0001f600",
    "\ufeff\u2028",
    "%",
    "%00",
    "%ff",
    "../../etc/passwd",
    "-1",
    "9" * 40,
    "1e309",
    "true",
    "{}",
    "*",
    "_%",
    "'; --",
]
# Sent as they are, not quoted: the server percent-decodes them to bytes that are not UTF-8, or to NUL.
_RAW = ["%ff%fe", "%c3%28", "%ed%a0%80", "%00", "%"]


class Value(NamedTuple):
    """A parameter's value; `raw` ones go into the URL unquoted (they are percent-escapes)."""

    text: str
    raw: bool = False
    repeat: int = 1  # an array parameter: the value this many times


def _schema(param: dict[str, Any]) -> dict[str, Any]:
    """The parameter's schema without its `null` option (FastAPI writes `X | None` as anyOf)."""
    schema = param.get("schema") or {}
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    if len(options) != 1:
        raise AssertionError(f"parameter {param['name']!r}: teach the fuzz test the schema {schema}")
    return options[0]


def boundaries(schema: dict[str, Any]) -> list[Value]:
    """The boundary values of a parameter's type (its OpenAPI schema); an unknown type fails the test
    (it must learn the new type rather than skip the parameter)."""
    kind = schema.get("type")
    if kind == "integer":
        declared = [schema[k] + d for k in ("minimum", "maximum") if k in schema for d in (-1, 0, 1)]
        return [Value(str(v)) for v in dict.fromkeys(_INTS + declared)] + [Value(v) for v in _INT_LIKE]
    if kind == "number":
        return [Value(str(v)) for v in _INTS] + [Value(v) for v in _FLOATS + _INT_LIKE]
    if kind == "boolean":
        return [Value(v) for v in ("true", "false", "", "2", "yes", "TRUE", "\x00")] + [Value("%ff", raw=True)]
    if kind == "array":
        items = boundaries(schema.get("items") or {"type": "string"})
        return [*items, Value("a", repeat=500), Value("a" * 100, repeat=100)]
    if kind == "string" or "enum" in schema:
        lengths = [schema[k] + d for k in ("minLength", "maxLength") if k in schema for d in (-1, 0, 1)]
        sized = [Value("a" * n) for n in dict.fromkeys(lengths) if n >= 0]
        enum = [Value(str(v)) for v in schema.get("enum", [])] + [Value(str(v).upper()) for v in schema.get("enum", [])]
        return [Value(v) for v in _STRINGS] + sized + enum + [Value(v, raw=True) for v in _RAW]
    raise AssertionError(f"teach the fuzz test the parameter type of {schema}")


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


def _sendable_in_header(value: Value) -> bool:
    text = value.text
    return not value.raw and value.repeat == 1 and text.isascii() and text.isprintable() and text == text.strip()


def _url(template: str, path_values: dict[str, Value], query: list[tuple[str, Value]]) -> str:
    path = template
    for name, value in path_values.items():
        path = path.replace("{" + name + "}", value.text if value.raw else quote(value.text, safe=""))
    parts = [
        f"{quote(name)}={value.text if value.raw else quote(value.text, safe='')}"
        for name, value in query
        for _ in range(value.repeat)
    ]
    return path + ("?" + "&".join(parts) if parts else "")


def _minimal(spec: dict[str, Any], schema: dict[str, Any]) -> Any:
    """The smallest value `schema` accepts (required properties only), so that a call's parameters
    are what the server judges, not its body."""
    if "$ref" in schema:
        return _minimal(spec, spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]])
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    schema = options[0] if options else schema
    kind = schema.get("type", "object")
    if kind == "object":
        required = schema.get("required", [])
        return {k: _minimal(spec, v) for k, v in schema.get("properties", {}).items() if k in required}
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "string":
        return str(schema["enum"][0]) if "enum" in schema else "a" * max(schema.get("minLength", 0), 7)
    return {"array": [], "boolean": False}.get(kind)


def _body_of(spec: dict[str, Any], op: dict[str, Any]) -> bytes | None:
    content = (op.get("requestBody") or {}).get("content", {})
    if "application/json" not in content:
        return None
    return json.dumps(_minimal(spec, content["application/json"].get("schema", {}))).encode()


class Call(NamedTuple):
    method: str
    url: str
    body: bytes | None
    headers: dict[str, str]


def boundary_sweep(spec: dict[str, Any], maintainer_token: str) -> tuple[list[Call], dict[str, int]]:
    """One call per boundary value of every path, query and header parameter of every operation in
    `spec`; the other path parameters name what exists, the other query parameters are left out,
    the body is the smallest one the operation accepts, and maintainers' operations get the token.
    Returns the calls and how many parameters of each type were swept."""
    calls: list[Call] = []
    swept: dict[str, int] = {}
    for method, template, op in _operations(spec):
        params = [p for p in op.get("parameters", []) if p["in"] in ("path", "query", "header")]
        body = _body_of(spec, op)
        auth = {"authorization": f"Bearer {maintainer_token}"} if "maintainers" in op.get("tags", []) else {}
        for param in params:
            schema = _schema(param)
            kind = str(schema.get("type", "enum"))
            swept[kind] = swept.get(kind, 0) + 1
            for value in boundaries(schema):
                path_values = {p["name"]: Value(VALID.get(p["name"], "x")) for p in params if p["in"] == "path"}
                query: list[tuple[str, Value]] = []
                headers = dict(auth)
                if param["in"] == "path":
                    path_values[param["name"]] = value
                elif param["in"] == "query":
                    query.append((param["name"], value))
                elif _sendable_in_header(value):
                    headers = {k: v for k, v in headers.items() if k != param["name"].lower()}
                    headers[param["name"]] = value.text
                else:
                    continue  # no HTTP client sends it as a header
                calls.append(Call(method, _url(template, path_values, query), body, headers))
    return calls, swept


def _hostile(rng: random.Random, param: dict[str, Any]) -> Value:
    if rng.random() < 0.5:
        return rng.choice(boundaries(_schema(param)))
    return Value(_text(rng))


def _api_requests(rng: random.Random, spec: dict[str, Any], n: int) -> list[tuple[str, str, bytes | None]]:
    operations = [(m, path, op) for m, path, op in _operations(spec) if m in ("GET", "POST")]
    out = []
    for _ in range(n):
        method, template, op = rng.choice(operations)
        path_values: dict[str, Value] = {}
        query: list[tuple[str, Value]] = []
        for param in op.get("parameters", []):
            # Path parameters mostly name what exists, so that hostile query values reach the database.
            odds = 0.85 if param["in"] == "path" else 0.3
            value = Value(VALID.get(param["name"], "1")) if rng.random() < odds else _hostile(rng, param)
            if param["in"] == "path":
                path_values[param["name"]] = value if value.text else Value("x")
            elif param["in"] == "query" and rng.random() < 0.7:
                query.append((param["name"], value))
        body = _body(rng, _json_value(rng)) if method == "POST" else None
        out.append((method, _url(template, path_values, query), body))
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


def test_boundary_values_of_every_parameter_get_no_server_error(clean_factory, hub_settings) -> None:
    index_source(clean_factory, ListSource([space(0), space(7)]))  # user0/env_00000 and user0/env_00007
    settings = hub_settings.model_copy(
        update={
            "website": True,
            "webhook_secret": SecretStr(SECRET),
            "maintainer_token": SecretStr(MAINTAINER),
            "hf_endpoint": "http://127.0.0.1:9",  # nothing is asked of a real Hub
            "play_max_sessions": 0,
            **{f"rate_{kind}_burst": 100_000 for kind in ("api", "webhook", "web", "play", "model")},
            **{f"rate_{kind}_per_minute": 1e7 for kind in ("api", "webhook", "web", "play", "model")},
        }
    )
    with serve_app(create_app(settings, run_migrations=False)) as url, httpx.Client(base_url=url, timeout=30) as client:
        calls, swept = boundary_sweep(client.get("/openapi.json").json(), MAINTAINER)
        assert swept.get("integer", 0) >= 5 and swept.get("string", 0) >= 20, swept  # the schema was read
        started = time.monotonic()
        failures = []
        statuses: dict[int, int] = {}
        for call in calls:
            headers = {**call.headers, **({"content-type": "application/json"} if call.body is not None else {})}
            try:
                response = client.request(call.method, call.url, content=call.body, headers=headers)
            except httpx.TransportError as exc:  # the server broke the connection off: a server error too
                failures.append(f"{call.method} {call.url[:200]} {call.headers} -> {exc!r}")
                continue
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code >= 500:
                failures.append(f"{call.method} {call.url[:200]} {call.headers} -> {response.status_code}")
        elapsed = time.monotonic() - started
        assert not failures, failures[:10]
        assert client.get("/api/v1/health").json()["status"] == "ok"
    print(f"{len(calls)} values of {swept} parameters in {elapsed:.1f}s, statuses {dict(sorted(statuses.items()))}")


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
