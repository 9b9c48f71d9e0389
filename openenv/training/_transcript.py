"""Token transcripts of multi-turn episodes, in the shape GRPO trains on.

An episode becomes one sequence: the prompt (instruction + first observation), then the model's
completions interleaved with the environment's feedback. The model is trained on its own tokens
only (`env_mask` 1), never on the feedback (0). Token ids are appended, never re-tokenized, so
the trainer scores exactly the tokens that were sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatFormat", "TextFormat", "Transcript", "TurnFormat"]


@dataclass(slots=True)
class Transcript:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns_added: int = 0

    def add_completion(self, ids: list[int], logprobs: list[float] | None) -> None:
        self.completion_ids += ids
        self.env_mask += [1] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None and len(logprobs) == len(ids) else [0.0] * len(ids)
        self.turns_added += 1

    def add_feedback(self, ids: list[int]) -> None:
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)

    @property
    def context(self) -> list[int]:
        """Everything so far: what the model continues from."""
        return self.prompt_ids + self.completion_ids


class TurnFormat:
    """How the instruction, observations and answers are laid out as tokens."""

    def first(self, instruction: Any, observation: str) -> list[int]:
        """Token ids of the first prompt."""
        raise NotImplementedError

    def feedback(
        self, instruction: Any, history: list[tuple[str, str]], observation: str, last_ids: list[int]
    ) -> list[int]:
        """Token ids that follow the model's last answer and show it the next observation.

        `history` holds (observation, answer) pairs so far; `last_ids` the last answer's tokens.
        """
        raise NotImplementedError


class TextFormat(TurnFormat):
    """Plain text, for base models and tokenizers without a chat template:

    {instruction}\\n{observation}{cue}<answer>\\n{observation}{cue}<answer>...
    """

    def __init__(self, tokenizer: Any, cue: str = "\nAction:") -> None:
        self.tokenizer = tokenizer
        self.cue = cue

    def first(self, instruction: Any, observation: str) -> list[int]:
        head = f"{_text_of(instruction)}\n" if instruction else ""
        return list(self.tokenizer(f"{head}{observation}{self.cue}", add_special_tokens=True)["input_ids"])

    def feedback(
        self, instruction: Any, history: list[tuple[str, str]], observation: str, last_ids: list[int]
    ) -> list[int]:
        return list(self.tokenizer(f"\n{observation}{self.cue}", add_special_tokens=False)["input_ids"])


class ChatFormat(TurnFormat):
    """The tokenizer's chat template: observations are user messages, answers assistant messages.

    The feedback tokens are the template's text between the last answer and the next generation
    prompt (the end-of-turn marker the model already emitted is not repeated). Needs a template
    that renders earlier turns verbatim.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def _messages(
        self, instruction: Any, history: list[tuple[str, str]], observation: str | None
    ) -> list[dict[str, Any]]:
        if isinstance(instruction, list):
            base = [dict(m) for m in instruction]
        else:
            base = [{"role": "user", "content": _text_of(instruction)}] if instruction else []
        turns = [(obs, ans) for obs, ans in history]
        messages: list[dict[str, Any]] = []
        for i, (obs, ans) in enumerate(turns):
            messages += self._user(base if i == 0 else [], obs)
            messages.append({"role": "assistant", "content": ans})
        if observation is not None:
            messages += self._user(base if not turns else [], observation)
        return messages

    @staticmethod
    def _user(base: list[dict[str, Any]], observation: str) -> list[dict[str, Any]]:
        if base and base[-1].get("role") == "user":  # the observation joins the instruction's message
            return [*base[:-1], {**base[-1], "content": f"{base[-1]['content']}\n\n{observation}"}]
        return [*base, {"role": "user", "content": observation}]

    def first(self, instruction: Any, observation: str) -> list[int]:
        out = self.tokenizer.apply_chat_template(
            self._messages(instruction, [], observation), add_generation_prompt=True, tokenize=True
        )
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    def feedback(
        self, instruction: Any, history: list[tuple[str, str]], observation: str, last_ids: list[int]
    ) -> list[int]:
        answered = self.tokenizer.apply_chat_template(self._messages(instruction, history, None), tokenize=False)
        following = self.tokenizer.apply_chat_template(
            self._messages(instruction, history, observation), add_generation_prompt=True, tokenize=False
        )
        answer = history[-1][1]
        cut = answered.rfind(answer) + len(answer) if answer else len(answered.rstrip())
        if not following.startswith(answered[:cut]):
            raise ValueError(
                "the chat template does not render earlier turns verbatim; use TextFormat or a simpler template"
            )
        tail = following[cut:]
        if last_ids:
            emitted = self.tokenizer.decode(last_ids[-1:], skip_special_tokens=False)
            stripped = tail.lstrip()
            if emitted and stripped.startswith(emitted) and last_ids[-1] in _special_ids(self.tokenizer):
                tail = stripped[len(emitted) :]  # the model already produced the end-of-turn token
        return list(self.tokenizer(tail, add_special_tokens=False)["input_ids"])


def _special_ids(tokenizer: Any) -> set[int]:
    return set(getattr(tokenizer, "all_special_ids", []) or [])


def _text_of(instruction: Any) -> str:
    if isinstance(instruction, str):
        return instruction
    if isinstance(instruction, list):
        return "\n".join(str(m.get("content", "")) for m in instruction)
    return str(instruction or "")
