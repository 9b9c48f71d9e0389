"""A tiny causal LM and word-level tokenizer built in code: no downloads, seconds on a CPU.

For smoke tests, docs and CI runs of a training pipeline (the weights are random: it proves the
loop runs, it does not play well):

    model, tokenizer = tiny_causal_lm(["hit", "stand", "Your", "hand", ...])

Needs the `training` extra (torch, transformers, tokenizers).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openenv.errors import ConfigurationError

__all__ = ["SPECIAL_TOKENS", "tiny_causal_lm", "word_tokenizer"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")


def word_tokenizer(words: Iterable[str]) -> Any:
    """A `PreTrainedTokenizerFast` over `words` (plus pad/unk/bos/eos), splitting on spaces and punctuation.

    Returns a tokenizer that pads on the left (what batched generation and TRL expect).

    Raises:
        ConfigurationError: `words` is empty.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for word in words:
        if word and word not in vocab:
            vocab[word] = len(vocab)
    if len(vocab) == len(SPECIAL_TOKENS):
        raise ConfigurationError("word_tokenizer needs at least one word")
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="[PAD]",
        unk_token="[UNK]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        padding_side="left",
    )
    return tokenizer


def tiny_causal_lm(
    words: Iterable[str], *, hidden_size: int = 64, layers: int = 2, heads: int = 4, seed: int = 0
) -> tuple[Any, Any]:
    """A randomly initialised Llama-architecture model sized for a CPU, and its word-level tokenizer.

    Returns:
        (model, tokenizer); the model's `generation_config` stops at the tokenizer's EOS token.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = word_tokenizer(words)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
