"""Who plays when "a model tries": an LLM behind an OpenAI-compatible endpoint, or a random baseline.

A policy's `act` returns a `Decision`: what it was asked (`prompt`), what it answered (`raw`),
and the action parsed from it, or the reason none could be (`error`): an answer that does not
parse is shown and counted, never a crash.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import httpcore2  # the openai client is built on httpx2 and httpcore2
import httpx2

from hub_service.addresses import why_not_public
from hub_service.play.errors import PlayError
from hub_service.schema_refs import deref
from openenv.evaluation import observation_text, parse_action

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

__all__ = [
    "FREE_FORM",
    "FREE_FORM_WHY",
    "Decision",
    "EndpointRefused",
    "LLMPolicy",
    "Policy",
    "RandomPolicy",
    "action_source",
    "bounded",
    "check_public_endpoint",
    "legal_action",
    "legal_choices",
    "parse_action",
    "random_action",
]

FREE_FORM = "no baseline for free-form actions"
FREE_FORM_WHY = (
    "the observation lists no legal actions (legal_actions, legal_moves, ...) and the action schema "
    "has a field no enum or bounds close (text, or a number without a minimum and a maximum)"
)
_WORDS = ("hello", "world", "apple", "crane", "north", "seven", "green", "river", "stone", "light", "print(1)", "ok")
_HISTORY_TURNS = 4


@dataclass
class Decision:
    action: dict[str, Any] | None
    prompt: str | None = None
    raw: str | None = None
    error: str | None = None
    fatal: bool = False  # the model cannot be asked at all (unreachable, token refused, no such model): stop the try


class Policy(Protocol):
    name: str

    async def act(self, observation: dict[str, Any], step: int) -> Decision: ...

    def feedback(self, decision: Decision, result: str) -> None: ...


# -- random baseline -------------------------------------------------------------------------


class RandomPolicy:
    """Plays a random legal action each step (`legal_action`); on an env whose actions are
    free-form it plays nothing and says so (`FREE_FORM`): random text would score nonsense."""

    name = "random baseline"

    def __init__(self, schema: dict[str, Any], seed: int | None = None) -> None:
        self.schema = schema
        self.rng = random.Random(seed)

    async def act(self, observation: dict[str, Any], step: int) -> Decision:
        action = legal_action(self.schema, observation, self.rng)
        if action is not None:
            return Decision(action=action)
        if action_source(self.schema, observation) == "free-form":
            return Decision(action=None, error=f"{FREE_FORM}: {FREE_FORM_WHY}", fatal=True)
        return Decision(action=None, error="the env lists no legal action in a running episode", fatal=True)

    def feedback(self, decision: Decision, result: str) -> None:
        return None


def legal_choices(schema: dict[str, Any], observation: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """Every legal action as an action body, when the env names them: the observation's list of legal
    actions (`legal_actions`, `legal_moves`, ..., or the same in its `metadata`; an integer field indexes
    a list of names, as Atari's does) or the enum / Literal / bool of the action's one field, as
    `openenv.render.action_choices` reads them (its buttons on the `/web` page). None when they are
    not named; an empty list when nothing is legal now."""
    from openenv.render import action_choices

    choices = action_choices(schema, observation, limit=None)
    return None if choices is None else [dict(choice.action) for choice in choices]


def bounded(schema: dict[str, Any]) -> bool:
    """Whether every action field is drawn from a closed set: an enum or constant, a bool, an integer
    or number with a minimum and a maximum, an array or object of such (`random_action` honours them).
    Text, a number without both bounds, or an object with no field is free-form."""
    props = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
    return bool(props) and all(_bounded(v, schema, 1) for v in props.values())


def _bounded(schema: Any, root: dict[str, Any], depth: int) -> bool:
    s = deref(schema, root) if isinstance(schema, dict) else {}
    if depth > 8 or not s:
        return False
    if (isinstance(s.get("enum"), list) and s["enum"]) or "const" in s:
        return True
    for key in ("anyOf", "oneOf"):
        if isinstance(s.get(key), list) and s[key]:
            options = [o for o in s[key] if deref(o, root).get("type") != "null"] or s[key]
            return all(_bounded(o, root, depth + 1) for o in options)
    kind = s.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"] or kind
        return all(_bounded({**s, "type": k}, root, depth + 1) for k in kinds)
    if kind in ("integer", "number"):
        return ("minimum" in s or "exclusiveMinimum" in s) and ("maximum" in s or "exclusiveMaximum" in s)
    if kind in ("boolean", "null"):
        return True
    if kind == "array":
        return _bounded(s.get("items") or {}, root, depth + 1)
    if kind == "object" or (kind is None and "properties" in s):
        props = {k: v for k, v in (s.get("properties") or {}).items() if k != "metadata"}
        return bool(props) and all(_bounded(v, root, depth + 1) for v in props.values())
    return False


def action_source(schema: dict[str, Any], observation: dict[str, Any] | None) -> str:
    """Where `legal_action` draws from: "listed" (the observation lists the legal actions),
    "declared" (the action schema closes them: an enum, a bool, bounds), or "free-form" (no legal
    action can be known)."""
    choices = legal_choices(schema, observation)
    if choices is not None and choices != legal_choices(schema, None):
        return "listed"
    return "declared" if choices is not None or bounded(schema) else "free-form"


def legal_action(
    schema: dict[str, Any], observation: dict[str, Any] | None, rng: random.Random
) -> dict[str, Any] | None:
    """A random legal action: one of `legal_choices` when the env names them, else a draw within the
    schema's bounds when it is `bounded`. None when the actions are free-form, or none is legal now."""
    choices = legal_choices(schema, observation)
    if choices is not None:
        return rng.choice(choices) if choices else None
    return random_action(schema, rng) if bounded(schema) else None


def random_action(schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A random action for an object schema: its required fields, each drawn within its constraints."""
    value = _random_value(schema, schema, rng, 0)
    return value if isinstance(value, dict) else {}


def _random_value(schema: Any, root: dict[str, Any], rng: random.Random, depth: int) -> Any:
    from openenv.validation import example_from_schema

    s = deref(schema, root)
    if depth > 8:
        return example_from_schema({**s, "$defs": root.get("$defs", {})})
    for key in ("anyOf", "oneOf"):
        if isinstance(s.get(key), list) and s[key]:
            options = [o for o in s[key] if deref(o, root).get("type") != "null"] or s[key]
            return _random_value(rng.choice(options), root, rng, depth + 1)
    if isinstance(s.get("enum"), list) and s["enum"]:
        return rng.choice(s["enum"])
    if "const" in s:
        return s["const"]
    kind = s.get("type")
    if isinstance(kind, list):
        kind = rng.choice([k for k in kind if k != "null"] or kind)
    if kind == "object" or (kind is None and "properties" in s):
        props = s.get("properties") or {}
        out = {name: _random_value(props.get(name, {}), root, rng, depth + 1) for name in s.get("required") or []}
        for name, sub in props.items():  # a union branch's tag (`Literal["move"] = "move"`): optional, yet needed
            fixed = deref(sub, root) if isinstance(sub, dict) else {}
            if name not in out and ("const" in fixed or len(fixed.get("enum") or []) == 1):
                out[name] = fixed["const"] if "const" in fixed else fixed["enum"][0]
        return out
    if kind == "integer":
        low = int(s["minimum"] if "minimum" in s else s["exclusiveMinimum"] + 1 if "exclusiveMinimum" in s else 0)
        high = int(
            s["maximum"] if "maximum" in s else s["exclusiveMaximum"] - 1 if "exclusiveMaximum" in s else low + 10
        )
        return rng.randint(low, max(low, high))
    if kind == "number":
        start = float(s.get("minimum", 0.0))
        return rng.uniform(start, float(s.get("maximum", start + 10.0)))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "string" and not s.get("pattern") and not s.get("format"):
        word = rng.choice(_WORDS)
        shortest, longest = int(s.get("minLength", 0)), s.get("maxLength")
        word = word + "x" * max(0, shortest - len(word))
        return word[: int(longest)] if longest is not None else word
    if kind == "array":
        count = int(s.get("minItems", 0)) or (1 if rng.random() < 0.5 else 0)
        return [_random_value(s.get("items", {}), root, rng, depth + 1) for _ in range(count)]
    return example_from_schema({**s, "$defs": root.get("$defs", {})}, variant=rng.randrange(4))


# -- LLM ---------------------------------------------------------------------------------------


class LLMPolicy:
    """Asks a chat model behind an OpenAI-compatible endpoint for one JSON action per step."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        token: str | None,
        schema: dict[str, Any],
        env_name: str,
        description: str,
        timeout_s: float = 60.0,
        temperature: float = 0.0,
        public_only: bool = True,
    ) -> None:
        """`public_only`: connect only to public addresses (an endpoint a visitor typed); False only
        for endpoints the operator configured, which may well be on a private network."""
        from openai import AsyncOpenAI

        self.name = f"LLM {model}"
        self.model = model
        self.base_url = base_url
        self.schema = schema
        self.temperature = temperature
        # No redirects (a public endpoint must not bounce the Hub to an internal one), no proxies
        # from the environment, and for visitors' endpoints every connection checked on its way out
        # (so a name that resolves differently the second time still cannot reach inside).
        transport = _PublicOnlyTransport() if public_only else httpx2.AsyncHTTPTransport(trust_env=False)
        http = httpx2.AsyncClient(transport=transport, follow_redirects=False, trust_env=False, timeout=timeout_s)
        # max_retries=0: a failing endpoint is shown at once; the visitor decides to try again.
        self.client = AsyncOpenAI(
            base_url=base_url, api_key=token or "no-token", timeout=timeout_s, max_retries=0, http_client=http
        )
        self.system = (
            f"You are playing the reinforcement-learning environment {env_name}. {description}\n"
            "Each turn you see the latest observation as JSON. Reply with exactly one action: a JSON object "
            "valid against this JSON Schema, and nothing else.\n"
            f"Action schema: {json.dumps(_lean_schema(schema), separators=(',', ':'))}"
        )
        self.turns: list[ChatCompletionMessageParam] = []

    async def act(self, observation: dict[str, Any], step: int) -> Decision:
        from openai import OpenAIError

        prompt = f"Step {step}. Observation: {observation_text(observation)}\nYour action (JSON only):"
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": self.system},
            *self.turns[-2 * _HISTORY_TURNS :],
            {"role": "user", "content": prompt},
        ]
        try:
            reply = await self.client.chat.completions.create(
                model=self.model, messages=messages, temperature=self.temperature
            )
        except OpenAIError as exc:
            fatal = _fatal_reason(exc, self.base_url, self.model)
            if fatal is not None:
                return Decision(action=None, prompt=prompt, error=fatal, fatal=True)
            return Decision(action=None, prompt=prompt, error=f"the model endpoint failed: {_openai_error(exc)}")
        raw = (reply.choices[0].message.content or "") if reply.choices else ""
        self.turns += [{"role": "user", "content": prompt}, {"role": "assistant", "content": raw}]
        try:
            action = parse_action(raw)
        except ValueError as exc:
            return Decision(action=None, prompt=prompt, raw=raw, error=str(exc))
        return Decision(action=action, prompt=prompt, raw=raw)

    def feedback(self, decision: Decision, result: str) -> None:
        # The model hears why its last answer was refused, so it can do better next turn.
        if decision.error or result:
            self.turns.append({"role": "user", "content": f"That answer was not accepted: {decision.error or result}"})
            self.turns.append({"role": "assistant", "content": "Understood."})


_STATUS_REASONS = {
    401: "the token was refused",
    403: "access was refused",
    404: "no such model or path at this endpoint",
    408: "it timed out",
    413: "the request was too large for it",
    429: "it is rate limiting; try again later",
}


def _fatal_reason(exc: Exception, base_url: str, model: str) -> str | None:
    """One line when no later turn can do better (the endpoint is unreachable, refuses the token, or
    has no such model), else None (a timeout, a rate limit, a server error may pass)."""
    from openai import APIConnectionError, APIStatusError, APITimeoutError

    if isinstance(exc, APITimeoutError):
        return None
    if isinstance(exc, APIConnectionError):
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, EndpointRefused):
                return f"cannot reach the model endpoint at {base_url}: {cause}"
            if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
                return f"cannot reach the model endpoint at {base_url}: connection refused"
            cause = cause.__cause__ or cause.__context__
        return f"cannot reach the model endpoint at {base_url}: no connection (check the base URL)"
    if isinstance(exc, APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else body
        code = str(error.get("code") or "") if isinstance(error, dict) else ""
        if exc.status_code in (401, 403):
            return f"the model endpoint at {base_url} refused the token (HTTP {exc.status_code}); check the token"
        if exc.status_code == 404 or code == "model_not_found":
            return (
                f"the model endpoint at {base_url} has no model {model!r} (HTTP {exc.status_code}); "
                "check the model's name and the base URL"
            )
    return None


def _openai_error(exc: Exception) -> str:
    """Status and a short generic reason; never the endpoint's own text (it may be an internal page)."""
    from openai import APIConnectionError, APIStatusError, APITimeoutError

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, EndpointRefused):
            return str(cause)
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, APIStatusError):
        status = exc.status_code
        if 300 <= status < 400:
            reason = "it answered with a redirect, which this Hub does not follow; use the endpoint's final URL"
        elif status >= 500:
            reason = "the endpoint itself failed"
        else:
            reason = _STATUS_REASONS.get(status, "the request was refused")
        return f"HTTP {status}: {reason}"
    if isinstance(exc, APITimeoutError):
        return "it did not answer in time"
    if isinstance(exc, APIConnectionError):
        return "could not connect to it; check the base URL"
    return f"it gave an answer this Hub cannot read ({type(exc).__name__})"


# -- which endpoints a visitor may make the Hub call ------------------------------------------


class EndpointRefused(httpcore2.ConnectError):
    """A visitor's endpoint resolves to an address the Hub does not call for visitors."""


async def _public_addresses(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, when all are public.

    Raises:
        EndpointRefused: any address is not public, or the name does not resolve.
    """
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise EndpointRefused(
            f"the model endpoint's host {host!r} does not resolve ({exc}); check the base URL"
        ) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        why = why_not_public(address)
        if why is not None:
            raise EndpointRefused(
                f"the model endpoint's host {host!r} resolves to {why}: this Hub lets visitors' models "
                "play only through public endpoints (an operator can list a private one in "
                "OPENENV_HUB_LLM_ALLOWED_ENDPOINTS)"
            )
    if not addresses:
        raise EndpointRefused(f"the model endpoint's host {host!r} has no address; check the base URL")
    return addresses


async def check_public_endpoint(base_url: str) -> None:
    """Refuse a visitor's endpoint unless it is http(s) and every address of its host is public.

    Raises:
        PlayError: what is wrong with the URL, or which address was refused and why.
    """
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PlayError(
            "the base URL must start with http:// or https:// and name a host (e.g. https://router.huggingface.co/v1)"
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise PlayError(f"the base URL's port is not a number: {base_url!r}", public_urls=[base_url]) from None
    try:
        await _public_addresses(parts.hostname, port)
    except EndpointRefused as exc:
        raise PlayError(str(exc)) from None


class _PublicOnlyBackend(httpcore2.AsyncNetworkBackend):
    """Connects only to public addresses, and to the very address it checked (no second lookup)."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore2.AsyncNetworkStream:
        addresses = await _public_addresses(host, port)
        return await self._inner.connect_tcp(
            addresses[0], port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore2.AsyncNetworkStream:
        raise EndpointRefused("the model endpoint must be an http(s) URL")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PublicOnlyTransport(httpx2.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__(trust_env=False)
        # The TLS handshake still names the original host (SNI, certificate check): only the TCP
        # connection goes to the checked address.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(), network_backend=_PublicOnlyBackend()
        )


def _lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    props = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
    return {**{k: v for k, v in schema.items() if k not in ("properties", "title")}, "properties": props}
