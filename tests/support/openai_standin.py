"""A local stand-in for an OpenAI-compatible endpoint, served over real HTTP on 127.0.0.1.

It speaks the wire format of `POST /v1/chat/completions`, `POST /v1/completions` and
`GET /v1/models` (what the `openai` client sends and parses), checks the bearer key, rejects
unknown models with a 404 in OpenAI's error shape, and records every request (`path`, `headers`,
`body`) so tests can see what the client really sent.

It answers from `replies`: a list of answers used in turn (the last repeats), or a function of the
request's text; by default, a blackjack player that hits below 17.

    with serve_app(openai_standin(api_key="test-key", models={"tiny"})) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="test-key")
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

__all__ = ["answer", "openai_standin"]

_TOTAL = re.compile(r"total (\d+)")


def answer(text: str) -> str:
    """The default answer: 'hit' when the last 'total N' in the text is under 17, else 'stand'."""
    totals = _TOTAL.findall(text)
    return "hit" if totals and int(totals[-1]) < 17 else "stand"


def _error(status: int, message: str, kind: str, code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}}, status_code=status)


def openai_standin(
    api_key: str | None = "test-key",
    models: set[str] | None = None,
    replies: list[str] | Callable[[str], str] | None = None,
) -> FastAPI:
    """The app; `app.state.requests` holds {"path", "headers", "body"} of every request, in order."""
    app = FastAPI()
    app.state.requests = []
    served = models or {"tiny-blackjack"}
    answered = [0]

    def reply_to(text: str) -> str:
        if replies is None:
            return answer(text)
        if callable(replies):
            return replies(text)
        chosen = replies[min(answered[0], len(replies) - 1)]
        answered[0] += 1
        return chosen

    async def check(request: Request) -> tuple[dict[str, Any] | None, JSONResponse | None]:
        body = await request.json()
        app.state.requests.append({"path": request.url.path, "headers": dict(request.headers), "body": body})
        if api_key is not None and request.headers.get("authorization") != f"Bearer {api_key}":
            return None, _error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        if body.get("model") not in served:
            return None, _error(
                404, f"The model `{body.get('model')}` does not exist.", "invalid_request_error", "model_not_found"
            )
        return body, None

    def usage(prompt: str, completion: str) -> dict[str, int]:
        p, c = len(prompt.split()), len(completion.split())
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": m, "object": "model", "created": 0, "owned_by": "standin"} for m in sorted(served)],
        }

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> Any:
        body, err = await check(request)
        if err is not None:
            return err
        text = " ".join(str(m.get("content", "")) for m in body.get("messages") or [] if m.get("role") == "user")
        reply = reply_to(text)
        return {
            "id": f"chatcmpl-{len(app.state.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": usage(text, reply),
        }

    @app.post("/v1/completions", response_model=None)
    async def complete(request: Request) -> Any:
        body, err = await check(request)
        if err is not None:
            return err
        reply = " " + reply_to(str(body.get("prompt", "")))
        return {
            "id": f"cmpl-{len(app.state.requests)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "text": reply, "finish_reason": "stop", "logprobs": None}],
            "usage": usage(str(body.get("prompt", "")), reply),
        }

    return app
