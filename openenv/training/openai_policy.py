"""`OpenAIPolicy`: any OpenAI-compatible endpoint (OpenAI, vLLM, TGI, llama.cpp, ...) as a rollout policy.

    policy = OpenAIPolicy("Qwen/Qwen2.5-0.5B-Instruct", base_url="http://127.0.0.1:8000/v1",
                          system_prompt="You play blackjack. Answer hit or stand.", max_tokens=8)
    engine = RolloutEngine(env_url, policy, parse_action=parse_choice("action", ["hit", "stand"]))

Each call is one chat completion (or, with `chat=False`, one text completion); the `openai`
client's own connection pool and retries carry the concurrency. Needs the `training` extra.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import openai

from openenv.errors import ConfigurationError, OpenEnvError
from openenv.training import _settings
from openenv.training.records import Completion, PolicyInput, TokenPrompt

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

__all__ = ["OpenAIPolicy", "PolicyEndpointError"]


class PolicyEndpointError(OpenEnvError):
    """The model endpoint failed (after the client's retries); the message names it."""


class OpenAIPolicy:
    """Ask an OpenAI-compatible endpoint for each turn's answer.

    Args:
        model: the model name the endpoint serves.
        base_url: the API root, e.g. `http://127.0.0.1:8000/v1` (default: `OPENAI_BASE_URL`, else OpenAI).
        api_key: the key (default: `OPENAI_API_KEY`; local servers that need none get a placeholder).
        system_prompt: a system message put before each prompt (chat mode).
        chat: chat completions (default) or plain text completions.
        max_tokens, temperature: sampling limits for each answer.
        send_seed: send the episode's seed (mixed with the turn) so endpoints that honour `seed`
            answer reproducibly.
        max_concurrency: requests in flight at once.
        timeout_s, max_retries: per request, as the `openai` client takes them.
        client: an `openai.AsyncOpenAI` to use instead of building one.
        extra_body: endpoint-specific fields (e.g. vLLM's `{"top_k": 20}`).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        system_prompt: str | None = None,
        chat: bool = True,
        max_tokens: int = 64,
        temperature: float = 1.0,
        send_seed: bool = True,
        max_concurrency: int = 64,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        client: openai.AsyncOpenAI | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("OpenAIPolicy needs the model name the endpoint serves")
        if max_concurrency < 1:
            raise ConfigurationError("max_concurrency must be >= 1")
        self.model = model
        self.base_url = base_url or _settings.openai_base_url()
        self.client = client or openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=api_key or _settings.openai_api_key() or "not-needed",
            timeout=timeout_s,
            max_retries=max_retries,
        )
        self.system_prompt = system_prompt
        self.chat = chat
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.send_seed = send_seed
        self.extra_body = dict(extra_body or {})
        self._slots = asyncio.Semaphore(max_concurrency)

    async def __call__(self, inp: PolicyInput) -> Completion:
        """The endpoint's answer to `inp.prompt` (text or chat messages).

        Raises:
            PolicyEndpointError: the endpoint could not be reached or answered with an error.
        """
        options: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature}
        if self.send_seed and inp.seed is not None:
            options["seed"] = (inp.seed * 1000 + inp.turn) % (2**31)
        if self.extra_body:
            options["extra_body"] = self.extra_body
        prompt = inp.prompt.text if isinstance(inp.prompt, TokenPrompt) else inp.prompt
        async with self._slots:
            try:
                if self.chat:
                    reply = await self.client.chat.completions.create(messages=self._messages(prompt), **options)
                    text = reply.choices[0].message.content or ""
                else:
                    if not isinstance(prompt, str):
                        raise ConfigurationError("chat=False needs text prompts; use chat=True for message lists")
                    reply = await self.client.completions.create(prompt=prompt, **options)
                    text = reply.choices[0].text or ""
            except openai.APIConnectionError as exc:
                raise PolicyEndpointError(
                    f"cannot reach the model endpoint at {self.client.base_url}: {exc}; is it running?"
                ) from exc
            except openai.APIStatusError as exc:
                raise PolicyEndpointError(
                    f"the model endpoint at {self.client.base_url} answered {exc.status_code}: {exc.message}; "
                    f"check the model name ({self.model!r}), the key and the request options"
                ) from exc
        return Completion(text)

    def _messages(self, prompt: Any) -> list[ChatCompletionMessageParam]:
        messages: list[ChatCompletionMessageParam] = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        )
        if self.system_prompt and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages
