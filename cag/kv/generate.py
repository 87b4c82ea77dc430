"""Greedy generation that continues a cache: the generator prefills only the new tokens."""

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from cag.kv.assemble import AssembledContext, check_positions
from cag.models.geometry import keeps_every_position

_END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<|eot_id|>", "<|end|>", "</s>")


@dataclass
class Generation:
    text: str
    token_ids: list
    prefill_seconds: float  # the generator's own prefill of the new tokens
    ttft_seconds: float  # from the call to the first generated token
    total_seconds: float


def stop_token_ids(lm) -> set[int]:
    """The token ids that end an answer: the model's and tokenizer's EOS, and the special end-of-turn
    tokens it knows. Computed once per loaded model: every answer needs them before its first token."""
    cached = getattr(lm, "stop_ids", None)
    if cached is not None:
        return set(cached)
    ids: set[int] = set()
    for source in (getattr(lm.model, "generation_config", None), lm.tokenizer):
        eos = getattr(source, "eos_token_id", None)
        ids.update([eos] if isinstance(eos, int) else list(eos or []))
    # special tokens only, looked up one by one: tokenizer.get_vocab() builds the whole vocabulary
    # (116-200 ms of every answer for qwen2.5's 151k tokens on this CPU, when it was called here)
    specials = set(lm.tokenizer.all_special_tokens)
    ids.update(lm.tokenizer.convert_tokens_to_ids(t) for t in _END_TOKENS if t in specials)
    lm.stop_ids = frozenset(ids)
    return ids


PREFILL_CHUNK = 1024  # tokens per forward of a long prefill (direct mode's text)


@torch.no_grad()
def forward_new_tokens(lm, cache, new_ids: torch.Tensor, start: int, logits_to_keep: int = 1):
    """Run the model over (T,) `new_ids` at positions start.. continuing `cache`; (T', vocab) logits.
    A long `new_ids` is read PREFILL_CHUNK tokens per forward (the same result: each chunk attends
    to the cache and to itself causally), so the attention scores of one forward stay
    PREFILL_CHUNK x context: 32k tokens read in one forward would need tens of GB for them."""
    device = lm.device
    # peel whole chunks off the front while the rest still holds every token whose logits are kept
    # (logits_to_keep 0: all of them, so no chunking)
    while logits_to_keep and new_ids.numel() - PREFILL_CHUNK >= max(logits_to_keep, 1):
        positions = torch.arange(start, start + PREFILL_CHUNK, device=device)[None]
        lm.model(input_ids=new_ids[None, :PREFILL_CHUNK].to(device), position_ids=positions, cache=cache,
                 use_cache=True, logits_to_keep=1)
        new_ids, start = new_ids[PREFILL_CHUNK:], start + PREFILL_CHUNK
    positions = torch.arange(start, start + new_ids.numel(), device=device)[None]
    out = lm.model(input_ids=new_ids[None].to(device), position_ids=positions, cache=cache,
                   use_cache=True, logits_to_keep=logits_to_keep)
    return out.logits[0]


@torch.no_grad()
def read_after(lm, context: AssembledContext, new_ids: torch.Tensor) -> torch.Tensor:
    """Run the model over (T,) `new_ids` after `context`, continuing its cache; (1, vocab) logits of
    the last. A blend's deferred recompute (`context.pending`) runs in the same forward, unless a
    sliding window would drop context once the new tokens are in: then just before it."""
    pending = context.pending
    if pending is not None:
        if keeps_every_position(lm.geometry, context.length + new_ids.numel()):
            return pending.read_with(lm, context, new_ids)
        pending.settle(lm, context)
    return forward_new_tokens(lm, context.cache, new_ids, context.length)


@torch.no_grad()
def greedy_generate(lm, new_ids, context: AssembledContext | None = None,
                    max_new_tokens: int = 32, on_token: Callable[[str], None] | None = None) -> Generation:
    """Greedy-decode after `context` (or from scratch) given the uncached `new_ids`."""
    start_time = time.perf_counter()
    new_ids = torch.as_tensor(list(new_ids), dtype=torch.int64)
    cache = context.cache if context is not None else DynamicCache(config=lm.config)
    pos = context.length if context is not None else 0
    check_positions(lm.geometry, pos + new_ids.numel() + max_new_tokens, "context + question + answer")
    stops = stop_token_ids(lm)
    logits = read_after(lm, context, new_ids) if context is not None else forward_new_tokens(lm, cache, new_ids, pos)
    prefill_seconds = time.perf_counter() - start_time
    pos += new_ids.numel()
    generated: list[int] = []
    emitted, ttft = "", None
    for step in range(max_new_tokens):
        token = int(logits[-1].argmax())
        ttft = ttft if ttft is not None else time.perf_counter() - start_time
        if token in stops:
            break
        generated.append(token)
        if on_token is not None:
            # decode the whole answer so far: a single byte-level token can be half a character
            full = lm.tokenizer.decode(generated, skip_special_tokens=True)
            if not full.endswith("\ufffd"):
                on_token(full[len(emitted):])
                emitted = full
        if step + 1 == max_new_tokens:
            break  # the last token allowed: no forward for a token that will not be generated
        logits = forward_new_tokens(lm, cache, torch.tensor([token]), pos)
        pos += 1
    total = time.perf_counter() - start_time
    text = lm.tokenizer.decode(generated, skip_special_tokens=True)
    return Generation(text.strip(), generated, prefill_seconds, ttft or total, total)
