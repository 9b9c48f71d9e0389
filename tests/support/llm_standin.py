"""A local OpenAI-compatible chat endpoint, served over real HTTP on 127.0.0.1, for tests.

Speaks `POST /v1/chat/completions` and `GET /v1/models` in OpenAI's wire format (what the
`openai` client sends and parses), checks the bearer token, answers unknown models with OpenAI's
404 error body, and replies from a script: a list of answers used in turn (the last repeats), or
a function of the request's messages. Every request is recorded (path, headers, body) so tests
can see what the client really sent.

    app = llm_standin(replies=['{"message": "hi"}', "not json"], token="sk-test", models={"tiny"})
    with serve_app(app) as url:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

__all__ = ["llm_standin"]

Reply = Callable[[list[dict[str, Any]]], str]


def _error(status: int, message: str, code: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}, status_code=status)


def llm_standin(replies: list[str] | Reply, *, token: str | None = "sk-test", models: set[str] | None = None) -> FastAPI:
    """The app; `app.state.requests` lists {"path", "headers", "body"} of every request, in order."""
    app = FastAPI()
    app.state.requests = []
    served = models or {"tiny-model"}
    answered = [0]

    def reply_for(messages: list[dict[str, Any]]) -> str:
        if callable(replies):
            return replies(messages)
        text = replies[min(answered[0], len(replies) - 1)]
        answered[0] += 1
        return text

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "standin"} for m in sorted(served)]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> Any:
        body = await request.json()
        app.state.requests.append({"path": request.url.path, "headers": dict(request.headers), "body": body})
        if token is not None and request.headers.get("authorization") != f"Bearer {token}":
            return _error(401, "Incorrect API key provided.", "invalid_api_key")
        if body.get("model") not in served:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "model_not_found")
        content = reply_for(body.get("messages") or [])
        words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
        return {
            "id": f"chatcmpl-{len(app.state.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": words, "completion_tokens": len(content.split()), "total_tokens": words + len(content.split())},
        }

    return app
