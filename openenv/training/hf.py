"""`TransformersPolicy`: a Hugging Face `transformers` causal LM as a rollout policy, batched.

Every session of a rollout calls the policy on its own; the policy gathers the calls that arrive
within `batch_window_s` (or until `max_batch_size`) and answers them with one `generate` over a
left-padded batch, run in a worker thread so the event loop keeps serving the env sessions.

Sampling is reproducible: which calls share a batch depends on timing, so no answer draws from
torch's global random stream. Each answer's tokens come from uniforms of its own, drawn from a
key made of the policy's `seed`, the episode's seed, index, turn and attempt, and the prompt's
token ids: the same episodes played twice get the same answers, however the batches formed.

    policy = TransformersPolicy(model, tokenizer, max_new_tokens=8, temperature=0.7)
    engine = RolloutEngine(url, policy, parse_action=parse_choice("action", ["hit", "stand"]))

Needs the `training` extra (torch, transformers).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import secrets
from typing import Any

import torch
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

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
        seed: mixed into every answer's sampling key (runs with different seeds sample differently).

    A prompt may be text, chat messages (a list of `{"role", "content"}` dicts) or a
    `TokenPrompt` (token ids used as they are). Answers are `Completion`s with the generated
    token ids (through the EOS token when the model stopped) and their log-probabilities under
    the sampling temperature.

    An answer's sampled tokens depend only on its key (see the module's docstring), never on
    the other prompts in its batch; a call for an episode without a seed gets a fresh random
    key (the env deals such an episode at random anyway).
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
        seed: int = 0,
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
        self.seed = seed
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if self.pad_id is None:
            raise ConfigurationError("the tokenizer has neither a pad token nor an EOS token; set tokenizer.pad_token")
        eos = getattr(model.generation_config, "eos_token_id", None) if hasattr(model, "generation_config") else None
        eos = eos if eos is not None else tokenizer.eos_token_id
        self.eos_ids: set[int] = set(eos if isinstance(eos, list) else [eos]) if eos is not None else set()
        self._pending: list[tuple[list[int], bytes, asyncio.Future[Completion]]] = []
        self._batcher: asyncio.Task[None] | None = None
        self._full: asyncio.Event | None = None
        self.batches = 0  # generate calls made (for tests and tuning of batch_window_s)
        self._direct_rows = 0  # rows of direct `generate` calls: their keys count up

    # -- the policy ---------------------------------------------------------------------------------------

    async def __call__(self, inp: PolicyInput) -> Completion:
        """The model's answer to `inp.prompt`."""
        ids = self.encode(inp.prompt)
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._pending.append((ids, self._key(inp, ids), future))
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

    def _key(self, inp: PolicyInput, ids: list[int]) -> bytes:
        # Rows of one GRPO group share a seed and a first prompt: the episode index tells them apart.
        episode = inp.seed if inp.seed is not None else f"unseeded-{secrets.randbits(64)}"
        return _key_bytes(self.seed, episode, inp.episode, inp.turn, inp.attempt, ids)

    # -- batching -----------------------------------------------------------------------------------------

    async def _run_batches(self) -> None:
        while self._pending:
            if len(self._pending) < self.max_batch_size and self._full is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.batch_window_s)
            batch, self._pending = self._pending[: self.max_batch_size], self._pending[self.max_batch_size :]
            self._full = asyncio.Event()
            try:
                answers = await asyncio.to_thread(
                    self.generate, [ids for ids, _, _ in batch], [key for _, key, _ in batch]
                )
            except BaseException as exc:
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, _, future), answer in zip(batch, answers, strict=True):
                if not future.done():
                    future.set_result(answer)

    def generate(self, prompts: list[list[int]], keys: list[bytes] | None = None) -> list[Completion]:
        """One `generate` over left-padded prompts; returns their completions (blocking).

        `keys` (one per prompt) fix each answer's random draws; without them a prompt's key is
        its ids and how many rows direct calls have sampled before it (the same calls in the
        same order sample the same answers).
        """
        if keys is None:
            first, self._direct_rows = self._direct_rows, self._direct_rows + len(prompts)
            keys = [_key_bytes(self.seed, "direct", first + i, ids) for i, ids in enumerate(prompts)]
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids) :] = 1
        sample = self.temperature > 0
        extra = dict(self.generation_kwargs)
        processors = LogitsProcessorList(extra.pop("logits_processor", None) or [])
        if sample:
            # `generate` decodes greedily over scores our processor has already sampled: one
            # token per row left, drawn with that row's own uniforms.
            draws = _uniforms(keys, int(extra.get("max_new_tokens", self.max_new_tokens)))
            processors.append(_KeyedSampler(self._warpers(extra), draws, width))
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": False,
            "pad_token_id": self.pad_id,
            "return_dict_in_generate": True,
            "output_logits": True,
            **({"logits_processor": processors} if processors else {}),
            **({"eos_token_id": sorted(self.eos_ids)} if self.eos_ids else {}),
            **extra,
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

    def _warpers(self, extra: dict[str, Any]) -> list[Any]:
        """Temperature, top-k, top-p and min-p, in `generate`'s order; unset ones fall back to the model's
        generation config, as `generate(do_sample=True)` would."""
        config = getattr(self.model, "generation_config", None)

        def option(name: str, mine: Any) -> Any:
            if name in extra:
                return extra.pop(name)
            return mine if mine is not None else getattr(config, name, None)

        top_k, top_p, min_p = option("top_k", self.top_k), option("top_p", self.top_p), option("min_p", None)
        extra.pop("temperature", None)
        extra.pop("do_sample", None)
        warpers: list[Any] = []
        if self.temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(self.temperature))
        if top_k:
            warpers.append(TopKLogitsWarper(top_k=int(top_k)))
        if top_p is not None and top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p=float(top_p)))
        if min_p is not None:
            warpers.append(MinPLogitsWarper(min_p=float(min_p)))
        return warpers


class _KeyedSampler(LogitsProcessor):
    """Samples each row's next token by inverting its CDF at the row's own uniform for this position.

    Returns scores that are -inf everywhere but the drawn token, so greedy decoding keeps it.
    Float64 keeps the CDF from rounding a small token's share away.
    """

    def __init__(self, warpers: list[Any], uniforms: torch.Tensor, width: int) -> None:
        self.warpers = warpers
        self.uniforms = uniforms  # (rows, max_new_tokens), float64
        self.width = width

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        position = input_ids.shape[1] - self.width
        wide = torch.float32 if scores.device.type == "mps" else torch.float64  # MPS has no float64
        cdf = torch.softmax(scores.to(wide), dim=-1).cumsum(dim=-1)
        total = cdf[:, -1]
        # u * total may round up to total: keep it below, so the draw never lands past the last
        # token with a share (tokens the warpers removed have none).
        uniforms = self.uniforms[:, position].to(device=cdf.device, dtype=wide)
        target = torch.minimum(uniforms * total, torch.nextafter(total, total * 0))
        tokens = torch.searchsorted(cdf, target.unsqueeze(-1), right=True).clamp_(max=scores.shape[-1] - 1)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, tokens, 0.0)  # type: ignore[return-value]


def _key_bytes(*parts: Any) -> bytes:
    ids = parts[-1]
    head = ":".join(str(p) for p in parts[:-1])
    return head.encode() + b"|" + b",".join(str(i).encode() for i in ids)


def _uniforms(keys: list[bytes], count: int) -> torch.Tensor:
    """`count` uniforms in [0, 1) per key, a pure function of the key (Python's Mersenne Twister)."""
    rows = []
    for key in keys:
        rng = random.Random(int.from_bytes(hashlib.blake2b(key, digest_size=16).digest(), "big"))
        rows.append([rng.random() for _ in range(count)])
    return torch.tensor(rows, dtype=torch.float64)
