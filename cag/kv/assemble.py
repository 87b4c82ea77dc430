"""Assemble independently prefilled chunk caches into one transformers cache for a generator.

Layout: [native prefix (BOS / chat-template start, prefilled by the generator)] [chunk 1] ... [chunk n],
at contiguous positions 0..L-1, chunks in the order given. Rotary models get their keys rotated to
the assembled positions; absolute-position models must have each chunk prefilled at the offset it
lands on. Sliding-window layers keep only their window (the transformers cache layer trims them and
records the true context length).
"""

from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from cag.errors import CagError
from cag.kv.chunk_cache import ChunkCache, ids_sha256, run_prefill
from cag.kv.rotary import Rotary


@dataclass
class AssembledContext:
    cache: DynamicCache
    input_ids: torch.Tensor  # (L,) prefix + chunk token ids, in assembly order
    prefix_tokens: int
    chunk_spans: list = field(default_factory=list)  # (start, end) position of each chunk
    # a deferred blend's tokens (cag.kv.blend.PendingRecompute): their cached K/V are stale until
    # the next read (cag.kv.generate.read_after) recomputes them, in one forward with the question
    pending: object | None = None

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])


def check_positions(geometry, length: int, what: str = "context") -> None:
    if length > geometry.max_positions:
        raise CagError(f"The {what} needs {length} positions but {geometry.family} models handle "
                       f"at most {geometry.max_positions}: retrieve fewer or shorter chunks.")


def check_chunk_matches(lm, chunk: ChunkCache) -> None:
    """A chunk cache is assembled only for the model that prefilled it (another's is translated)."""
    meta = chunk.meta
    if meta.model_fingerprint == lm.fingerprint:
        return
    where = f"{meta.doc_id or '?'}#{meta.chunk_index}"
    raise CagError(f"Chunk cache {where} was prefilled by {meta.model_name} (fingerprint {meta.model_fingerprint[:12]}), "
                   f"not by {lm.name} ({lm.fingerprint[:12]}): translate it or prefill it natively.")


@torch.no_grad()
def assemble(lm, chunks: list[ChunkCache], prefix_ids=()) -> AssembledContext:
    """One DynamicCache for `lm` holding the native prefix followed by `chunks`."""
    geometry = lm.geometry
    prefix = torch.as_tensor(list(prefix_ids), dtype=torch.int64)
    total = prefix.numel() + sum(c.num_tokens for c in chunks)
    check_positions(geometry, total)
    if total == 0:
        raise CagError("Nothing to assemble: no prefix and no chunks.")  # generate from scratch instead
    device, dtype = lm.device, next(lm.model.parameters()).dtype
    layers_k = [[] for _ in range(geometry.num_layers)]
    layers_v = [[] for _ in range(geometry.num_layers)]
    if prefix.numel():
        keys, values = native_prefix_kv(lm, prefix)
        for layer in range(geometry.num_layers):
            layers_k[layer].append(keys[layer])
            layers_v[layer].append(values[layer])
    spans, pos = [], prefix.numel()
    for chunk in chunks:
        check_chunk_matches(lm, chunk)
        _check_absolute_offset(geometry, chunk, pos)
        spans.append((pos, pos + chunk.num_tokens))
        pos += chunk.num_tokens
    rotary = Rotary(lm.model, geometry) if geometry.is_rotary and chunks else None
    positions = torch.arange(prefix.numel(), total, device=device)
    cache = DynamicCache(config=lm.config)
    for layer in range(geometry.num_layers):
        # the chunks side by side in their stored dtype, then one rotation to their assembled
        # positions (elementwise, so the same as rotating each chunk at its own) and one conversion
        chunk_keys, chunk_values = [], []
        if chunks:
            keys = torch.cat([c.keys[layer] for c in chunks], dim=1).to(device)  # (kv_heads, T, head_dim)
            if rotary is not None:
                keys = rotary.apply(keys, positions, layer)
            chunk_keys = [keys.to(dtype)]
            chunk_values = [torch.cat([c.values[layer] for c in chunks], dim=1).to(device, dtype)]
        k = torch.cat(layers_k[layer] + chunk_keys, dim=1)[None]  # (1, kv_heads, L, head_dim)
        v = torch.cat(layers_v[layer] + chunk_values, dim=1)[None]
        cache.update(k, v, layer)
    input_ids = torch.cat([prefix] + [c.token_ids for c in chunks])
    return AssembledContext(cache, input_ids, prefix.numel(), spans)


def native_prefix_kv(lm, prefix: torch.Tensor) -> tuple[list, list]:
    """Per-layer K/V (kv_heads, P, head_dim) of the generator's own prefix, prefilled once per model."""
    key = ids_sha256(prefix.tolist())
    if key not in lm.prefix_kv:
        lm.prefix_kv[key] = run_prefill(lm.model, prefix, torch.arange(prefix.numel()))
    return lm.prefix_kv[key]


def _check_absolute_offset(geometry, chunk: ChunkCache, pos: int) -> None:
    if geometry.is_rotary:
        if not chunk.meta.rotary_removed:
            raise CagError("A rotary model's chunk cache must be stored with its rotary removed.")
        return
    if chunk.meta.position_start != pos:
        raise CagError(f"Chunk {chunk.meta.doc_id or '?'}#{chunk.meta.chunk_index} was prefilled at "
                       f"position {chunk.meta.position_start} but lands at {pos}; "
                       f"{geometry.family} uses absolute positions, so prefill it at its final offset.")


@torch.no_grad()
def warm_up(lm, prefix_ids=()) -> None:
    """Pay a loaded generator's one-time costs before anything is timed: prefill its native prefix
    (cached for every later question) and run one forward with logits, which pages in every weight
    (converted models are memory-mapped and load lazily). Once per model."""
    if lm.warm:
        return
    prefix = torch.as_tensor(list(prefix_ids), dtype=torch.int64)
    if prefix.numel():
        native_prefix_kv(lm, prefix)
    ids = prefix if prefix.numel() else torch.as_tensor(lm.tokenizer("a")["input_ids"][:1], dtype=torch.int64)
    lm.model(input_ids=ids[None].to(lm.device), logits_to_keep=1)
    lm.warm = True
