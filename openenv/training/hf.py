"""`TransformersPolicy`: a Hugging Face `transformers` causal LM as a rollout policy, batched.

Every session of a rollout calls the policy on its own; the policy gathers the calls that arrive
within `batch_window_s` (or until `max_batch_size`) and answers them with one `generate` over a
left-padded batch, run in a worker thread so the event loop keeps serving the env sessions.

    policy = TransformersPolicy(model, tokenizer, max_new_tokens=8, temperature=0.7)
    engine = RolloutEngine(url, policy, parse_action=parse_choice("action", ["hit", "stand"]))

Needs the `training` extra (torch, transformers).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import torch

from openenv.errors import ConfigurationError
from openenv.training.records import Completion, PolicyInput, TokenPrompt

__all__ = ["TransformersPolicy"]


class TransformersPolicy:
    """Generate each turn's answer with a causal LM; concurrent calls share one `generate`.

    Args:
        model: a `transformers` causal LM (any device; inputs follow the model).
        tokenizer: its tokenizer; it needs a pad token (the EOS token is used when it has none).
        max_new_tokens: the longest answer per turn.
        temperature: sampling temperature; 0 decodes greedily.
        top_p, top_k: nucleus / top-k sampling (None: off).
        system_prompt: a system message put before text prompts when `chat` is on.
        chat: wrap text prompts in the tokenizer's chat template (default: when it has one).
        max_batch_size: the most prompts in one `generate`.
        batch_window_s: how long the first waiting call waits for others to join its batch.
        generation_kwargs: further `generate` arguments.

    A prompt may be text, chat messages (a list of `{"role", "content"}` dicts) or a
    `TokenPrompt` (token ids used as they are). Answers are `Completion`s with the generated
    token ids (through the EOS token when the model stopped) and their log-probabilities under
    the sampling temperature.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 32,
        temperature: float = 1.0,
        top_p: float | None = None,
        top_k: int | None = None,
        system_prompt: str | None = None,
        chat: bool | None = None,
        max_batch_size: int = 64,
        batch_window_s: float = 0.005,
        generation_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if max_new_tokens < 1 or max_batch_size < 1:
            raise ConfigurationError("max_new_tokens and max_batch_size must be >= 1")
        if temperature < 0:
            raise ConfigurationError("temperature must be >= 0 (0 decodes greedily)")
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.system_prompt = system_prompt
        self.chat = bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_s
        self.generation_kwargs = dict(generation_kwargs or {})
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if self.pad_id is None:
            raise ConfigurationError("the tokenizer has neither a pad token nor an EOS token; set tokenizer.pad_token")
        eos = getattr(model.generation_config, "eos_token_id", None) if hasattr(model, "generation_config") else None
        eos = eos if eos is not None else tokenizer.eos_token_id
        self.eos_ids: set[int] = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
        self._pending: list[tuple[list[int], asyncio.Future[Completion]]] = []
        self._batcher: asyncio.Task[None] | None = None
        self._full: asyncio.Event | None = None
        self.batches = 0  # generate calls made (for tests and tuning of batch_window_s)

    # -- the policy ---------------------------------------------------------------------------------------

    async def __call__(self, inp: PolicyInput) -> Completion:
        """The model's answer to `inp.prompt`."""
        ids = self.encode(inp.prompt)
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._pending.append((ids, future))
        if self._batcher is None or self._batcher.done():
            self._full = asyncio.Event()
            self._batcher = asyncio.create_task(self._run_batches())
        elif len(self._pending) >= self.max_batch_size and self._full is not None:
            self._full.set()
        return await future

    def encode(self, prompt: Any) -> list[int]:
        """Token ids of a prompt (text, chat messages, or a `TokenPrompt`)."""
        if isinstance(prompt, TokenPrompt):
            return list(prompt.ids)
        if isinstance(prompt, str) and not self.chat:
            return list(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        if self.system_prompt and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        out = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)

    # -- batching -----------------------------------------------------------------------------------------

    async def _run_batches(self) -> None:
        while self._pending:
            if len(self._pending) < self.max_batch_size and self._full is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.batch_window_s)
            batch, self._pending = self._pending[: self.max_batch_size], self._pending[self.max_batch_size :]
            self._full = asyncio.Event()
            try:
                answers = await asyncio.to_thread(self.generate, [ids for ids, _ in batch])
            except BaseException as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, future), answer in zip(batch, answers, strict=True):
                if not future.done():
                    future.set_result(answer)

    def generate(self, prompts: list[list[int]]) -> list[Completion]:
        """One `generate` over left-padded prompts; returns their completions (blocking)."""
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids) :] = 1
        sample = self.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": sample,
            "pad_token_id": self.pad_id,
            "return_dict_in_generate": True,
            "output_logits": True,
            **({"temperature": self.temperature} if sample else {}),
            **({"top_p": self.top_p} if sample and self.top_p is not None else {}),
            **({"top_k": self.top_k} if sample and self.top_k is not None else {}),
            **({"eos_token_id": sorted(self.eos_ids)} if self.eos_ids else {}),
            **self.generation_kwargs,
        }
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                out = self.model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device), **kwargs)
        finally:
            if was_training:
                self.model.train()
        self.batches += 1
        new = out.sequences[:, width:].cpu()
        logits = torch.stack(out.logits, dim=1).float().cpu()  # (batch, new tokens, vocab)
        logps = torch.log_softmax(logits / (self.temperature if sample else 1.0), dim=-1)
        token_logps = logps.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        answers = []
        for row in range(len(prompts)):
            ids = new[row].tolist()
            cut = len(ids)
            for i, tok in enumerate(ids):
                if tok in self.eos_ids:
                    cut = i + 1  # keep the EOS token: the model learns to stop
                    break
            ids = ids[:cut]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            answers.append(Completion(text, ids, token_logps[row, :cut].tolist()))
        return answers
