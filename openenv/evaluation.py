"""Evaluate a chat model on an environment, and submit the score to an OpenEnv Hub service.

    from openenv import GenericEnvClient
    from openenv.evaluation import ChatPolicy, evaluate, fetch_action_schema

    async with await GenericEnvClient.from_hub("owner/name") as env:
        schema = await fetch_action_schema(env.base_url)
        policy = ChatPolicy("https://router.huggingface.co/v1", "meta-llama/Llama-3.1-8B-Instruct",
                            api_key=token, action_schema=schema, env_name="owner/name")
        result = await evaluate(env, policy, episodes=10, max_steps=50)
    print(result.mean, result.ci_low, result.ci_high)

The model acts through an OpenAI-compatible `POST {base_url}/chat/completions`: each turn it sees
the latest observation as JSON and answers with one action, a JSON object valid against the
env's action schema. An answer without a JSON object, or an action the env refuses or fails on, counts as an
unusable turn; three in a row end the episode. An endpoint that cannot be reached or refuses the
request (a wrong URL, token or model name) stops the evaluation with `ModelEndpointError`.

Speaks HTTP with the standard library (in worker threads), so the client's base install needs
nothing more.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import statistics
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openenv.errors import EnvServerError, InvalidActionError, OpenEnvError

__all__ = [
    "ChatPolicy",
    "EvalResult",
    "EvalSubmitError",
    "ModelEndpointError",
    "evaluate",
    "fetch_action_schema",
    "mean_interval",
    "observation_text",
    "parse_action",
    "revision_state",
    "submit_eval",
]

GIVE_UP_AFTER = 3  # unusable turns in a row that end an episode
_MAX_OBS_CHARS = 6000
_HISTORY_TURNS = 4
_RETRIES = 2  # for 429 and 5xx answers of the model endpoint
# Student's t at 0.975 for 1..30 degrees of freedom; 1.96 beyond.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


class ModelEndpointError(OpenEnvError):
    """The model endpoint could not be reached or refused the request; the message says what to check."""


class EvalSubmitError(OpenEnvError):
    """The Hub service did not take the submitted eval; `status` is its HTTP status (0: unreachable)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def mean_interval(returns: Sequence[float]) -> tuple[float, float, float]:
    """The mean of `returns` and its 95% interval (Student's t; one episode's interval is the point).

    Raises:
        ValueError: `returns` is empty.
    """
    if not returns:
        raise ValueError("no episode returns to average")
    mean = statistics.fmean(returns)
    if len(returns) < 2:
        return mean, mean, mean
    df = len(returns) - 1
    half = (_T975[df - 1] if df <= len(_T975) else 1.96) * statistics.stdev(returns) / math.sqrt(len(returns))
    return mean, mean - half, mean + half


def parse_action(text: str) -> dict[str, Any]:
    """The first JSON object in a model's answer (code fences and prose around it allowed).

    Raises:
        ValueError: the answer holds no JSON object.
    """
    if not text or not text.strip():
        raise ValueError("the model answered nothing")
    decoder = json.JSONDecoder()
    for chunk in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        for match in re.finditer(r"\{", chunk):
            try:
                value, _ = decoder.raw_decode(chunk, match.start())
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise ValueError(f"no JSON object in the answer: {text.strip()[:120]!r}")


def _opener() -> urllib.request.OpenerDirector:
    # No proxies from the environment and no redirects: the URL given is the URL called.
    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _error_detail(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:200].decode(errors="replace").strip()
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            problems = [
                f"{'.'.join(str(p) for p in e.get('loc', [])[1:])}: {e.get('msg')}"
                for e in error.get("errors") or []
                if isinstance(e, dict)
            ]
            return "; ".join([str(error["message"]), *problems[:3]])[:500]
        for key in ("message", "detail", "error"):
            if isinstance(body.get(key), str):
                return str(body[key])[:300]
    return str(body)[:200]


def _post_json(
    url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float
) -> tuple[int, dict[str, Any] | None, str]:
    """POST JSON; (status, JSON reply or None, error detail). Raises OSError when it cannot connect."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
    )
    try:
        with _opener().open(request, timeout=timeout_s) as reply:
            raw = reply.read()
            status = int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code, None, _error_detail(exc.read())
    try:
        document = json.loads(raw)
    except ValueError:
        return status, None, "the answer is not JSON"
    return status, document if isinstance(document, dict) else None, ""


async def fetch_action_schema(base_url: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """The env server's action schema (`GET /schema`'s `action`); {} when it offers none."""

    def get() -> dict[str, Any]:
        request = urllib.request.Request(base_url.rstrip("/") + "/schema", headers={"Accept": "application/json"})
        with _opener().open(request, timeout=timeout_s) as reply:
            document = json.loads(reply.read())
        action = document.get("action") if isinstance(document, dict) else None
        return action if isinstance(action, dict) else {}

    try:
        return await asyncio.to_thread(get)
    except (OSError, ValueError):
        return {}


@dataclass
class ChatPolicy:
    """A chat model behind an OpenAI-compatible endpoint, asked for one JSON action per step."""

    base_url: str
    model: str
    api_key: str | None = None
    action_schema: dict[str, Any] = field(default_factory=dict)
    env_name: str = "an environment"
    description: str = ""
    timeout_s: float = 60.0
    temperature: float = 0.0
    turns: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelEndpointError(
                f"the model's base URL must be http(s)://host/..., not {self.base_url!r} "
                "(e.g. https://router.huggingface.co/v1)"
            )
        lean = {k: v for k, v in self.action_schema.items() if k != "title"}
        self.system = (
            f"You are playing the reinforcement-learning environment {self.env_name}. {self.description}\n"
            "Each turn you see the latest observation as JSON. Reply with exactly one action: a JSON object "
            "valid against this JSON Schema, and nothing else.\n"
            f"Action schema: {json.dumps(lean, separators=(',', ':'))}"
        )

    def reset(self) -> None:
        """Forget the previous episode's turns."""
        self.turns = []

    async def act(self, observation: Any, step: int) -> tuple[dict[str, Any] | None, str]:
        """(the action, the model's raw answer); the action is None when the answer holds none.

        Raises:
            ModelEndpointError: the endpoint cannot be reached or refuses the request.
        """
        prompt = f"Step {step}. Observation: {observation_text(observation)}\nYour action (JSON only):"
        messages = [
            {"role": "system", "content": self.system},
            *self.turns[-2 * _HISTORY_TURNS :],
            {"role": "user", "content": prompt},
        ]
        raw = await asyncio.to_thread(self._complete, messages)
        self.turns += [{"role": "user", "content": prompt}, {"role": "assistant", "content": raw}]
        try:
            return parse_action(raw), raw
        except ValueError:
            return None, raw

    def refused(self, why: str) -> None:
        """Tell the model why its last answer was not accepted (it hears it next turn)."""
        self.turns += [
            {"role": "user", "content": f"That answer was not accepted: {why}"},
            {"role": "assistant", "content": "Understood."},
        ]

    def _complete(self, messages: list[dict[str, str]]) -> str:
        url = f"{self.base_url}/chat/completions"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": self.model, "messages": messages, "temperature": self.temperature}
        for attempt in range(_RETRIES + 1):
            try:
                status, reply, detail = _post_json(url, body, headers, self.timeout_s)
            except (OSError, TimeoutError) as exc:
                reason = getattr(exc, "reason", exc)
                raise ModelEndpointError(
                    f"the model endpoint {self.base_url} could not be reached ({reason}); "
                    "check --base-url and that the server is up"
                ) from None
            if (status == 429 or status >= 500) and attempt < _RETRIES:
                time.sleep(1.0 + 2.0 * attempt)
                continue
            if status >= 400 or reply is None:
                raise ModelEndpointError(_refusal(self.base_url, self.model, status, detail))
            return _content(reply)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _refusal(base_url: str, model: str, status: int, detail: str) -> str:
    hints = {
        401: "the token was refused: pass the endpoint's key with --api-key (or OPENAI_API_KEY)",
        403: "access was refused: check the key's permissions",
        404: f"no model {model!r} or no chat/completions at this URL: check --model and --base-url (it usually ends in /v1)",
        429: "it is rate limiting: try again later, or with fewer episodes",
    }
    hint = hints.get(
        status, "the endpoint failed: try again later" if status >= 500 else "check --base-url and --model"
    )
    said = f" (it said: {detail})" if detail else ""
    return f"the model endpoint {base_url} answered HTTP {status}{said}; {hint}"


def _content(reply: dict[str, Any]) -> str:
    choices = reply.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def observation_text(observation: Any) -> str:
    """The observation as compact JSON for a model's prompt: no images (base64 screens), within a size bound."""

    def lean(value: Any) -> Any:
        if isinstance(value, str) and len(value) > 512 and re.fullmatch(r"[A-Za-z0-9+/=\s]+", value[:1024]):
            return "<image omitted>"
        if isinstance(value, dict):
            return {k: lean(v) for k, v in value.items() if k != "metadata" or v}
        if isinstance(value, list):
            return [lean(v) for v in value[:256]]
        return value

    text = json.dumps(lean(observation), separators=(",", ":"), default=str)
    return text if len(text) <= _MAX_OBS_CHARS else text[:_MAX_OBS_CHARS] + "…"


@dataclass
class EvalResult:
    """What `evaluate` measured: each episode's return, unusable turns and turns played."""

    returns: list[float]
    invalid: int = 0
    steps: int = 0

    @property
    def mean(self) -> float:
        return mean_interval(self.returns)[0]

    @property
    def ci_low(self) -> float:
        return mean_interval(self.returns)[1]

    @property
    def ci_high(self) -> float:
        return mean_interval(self.returns)[2]


async def evaluate(
    env: Any,
    policy: ChatPolicy,
    *,
    episodes: int,
    max_steps: int,
    seed: int | None = None,
    on_episode: Callable[[int, float, int], None] | None = None,
) -> EvalResult:
    """Play `episodes` episodes of at most `max_steps` turns with `policy` on a connected client `env`.

    `on_episode(episode, return, steps)` is called as each one ends.

    Raises:
        ModelEndpointError: the model endpoint failed; nothing is scored.
        openenv.errors.EnvClientError: the env failed or went away.
    """
    if episodes < 1 or max_steps < 1:
        raise ValueError("episodes and max_steps must be at least 1")
    result = EvalResult(returns=[])
    for episode in range(1, episodes + 1):
        policy.reset()
        reply = await env.reset(**({"seed": seed + episode - 1} if seed is not None else {}))
        observation, done, total, streak, turn = reply.observation, bool(reply.done), 0.0, 0, 0
        while not done and turn < max_steps and streak < GIVE_UP_AFTER:
            turn += 1
            action, _ = await policy.act(observation, turn)
            why = "" if action is not None else "no JSON object in it"
            if action is not None:
                try:
                    reply = await env.step(action)
                except EnvServerError as exc:  # refused (invalid) or failed on this action; the session goes on
                    what = "refused" if isinstance(exc, InvalidActionError) else "failed on"
                    why = f"the env {what} the action: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                else:
                    observation, done = reply.observation, bool(reply.done)
                    total += float(reply.reward or 0.0)
            if why:
                streak += 1
                result.invalid += 1
                policy.refused(why)
            else:
                streak = 0
        result.steps += turn
        result.returns.append(total)
        if on_episode is not None:
            on_episode(episode, total, turn)
    return result


def revision_state(hub_url: str, repo_id: str, sha: str, timeout_s: float = 10.0) -> str | None:
    """The Hub service's state of a revision (queued, running, passed, failed, ...); None when it cannot say."""
    url = (
        f"{hub_url.rstrip('/')}/api/v1/envs/{urllib.parse.quote(repo_id, safe='/')}/versions/{urllib.parse.quote(sha)}"
    )
    try:
        with _opener().open(
            urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=timeout_s
        ) as reply:
            document = json.loads(reply.read())
    except (OSError, ValueError):
        return None
    state = document.get("state") if isinstance(document, dict) else None
    return state if isinstance(state, str) else None


def submit_eval(
    hub_url: str,
    repo_id: str,
    *,
    token: str,
    model: str,
    base_url: str | None,
    revision: str,
    returns: Sequence[float],
    max_steps: int | None = None,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """Send a scored run to the Hub service's `POST /api/v1/envs/{owner}/{name}/evals`; returns the stored eval.

    Raises:
        EvalSubmitError: the service is unreachable or refused it (`status`; the message says why).
    """
    url = f"{hub_url.rstrip('/')}/api/v1/envs/{urllib.parse.quote(repo_id, safe='/')}/evals"
    body = {
        "model": model,
        "base_url": base_url,
        "revision": revision,
        "episodes": len(returns),
        "returns": list(returns),
        **({"max_steps": max_steps} if max_steps else {}),
    }
    try:
        status, reply, detail = _post_json(url, body, {"Authorization": f"Bearer {token}"}, timeout_s)
    except (OSError, TimeoutError) as exc:
        raise EvalSubmitError(
            f"the Hub service {hub_url} could not be reached ({getattr(exc, 'reason', exc)})"
        ) from None
    if status >= 400 or reply is None:
        raise EvalSubmitError(f"the Hub service answered {status}: {detail or 'no reason given'}", status)
    return reply
