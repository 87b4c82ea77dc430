"""Chunk caches: one text chunk prefilled by one model, per-layer K/V plus what is needed to reuse it.

Rotary models store keys with the rotation removed (position-free), so a chunk can be placed at any
position later. Absolute-position models (GPT-2, OPT) bake positions into the layer-0 input, so
their chunks are prefilled at the offset they will occupy and can only be used there.
"""

import hashlib
from dataclasses import asdict, dataclass, field

import torch
from transformers import DynamicCache

from cag.errors import CagError
from cag.kv.rotary import Rotary
from cag.models.fingerprint import sha256_hex

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ChunkMeta:
    model_name: str
    model_fingerprint: str
    tokenizer_fingerprint: str
    family: str
    num_layers: int
    kv_heads: int
    head_dim: int
    position_start: int  # position of the first chunk token when it was prefilled
    rotary_removed: bool
    prefix_sha256: str  # sha256 of the prefix token ids the chunk was prefilled after ("" = none)
    prefix_tokens: int
    text_sha256: str
    doc_id: str = ""
    chunk_index: int = -1
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ChunkCache:
    keys: list  # per layer (kv_heads, T, head_dim); rotary models: rotation removed
    values: list  # per layer (kv_heads, T, head_dim)
    token_ids: torch.Tensor  # (T,) int64
    offsets: torch.Tensor  # (T, 2) int64 character span of each token in the chunk text
    meta: ChunkMeta
    text: str = field(default="", repr=False)

    @property
    def num_tokens(self) -> int:
        return int(self.token_ids.shape[0])

    @property
    def dtype(self) -> torch.dtype:
        return self.keys[0].dtype

    def to(self, dtype: torch.dtype) -> "ChunkCache":
        return ChunkCache([k.to(dtype) for k in self.keys], [v.to(dtype) for v in self.values],
                          self.token_ids, self.offsets, self.meta, self.text)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)


def ids_sha256(token_ids) -> str:
    """sha256 over the little-endian int64 bytes of a token id sequence."""
    ids = torch.as_tensor(list(token_ids), dtype=torch.int64)
    return hashlib.sha256(ids.numpy().astype("<i8").tobytes()).hexdigest()


def tokenize_chunk(tokenizer, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (T,) and character offsets (T, 2) of `text`, without special tokens."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if not enc["input_ids"]:
        raise CagError("Cannot prefill an empty chunk: the text has no tokens.")
    return (torch.tensor(enc["input_ids"], dtype=torch.int64),
            torch.tensor(enc["offset_mapping"], dtype=torch.int64).reshape(-1, 2))


@torch.no_grad()
def prefill_chunk(lm, text: str, prefix_ids=(), position_start: int | None = None,
                  doc_id: str = "", chunk_index: int = -1) -> ChunkCache:
    """Prefill `text` with `lm` after the native `prefix_ids` and keep the chunk's K/V.

    `position_start` (default: right after the prefix) is where the chunk's first token sits.
    """
    token_ids, offsets = tokenize_chunk(lm.tokenizer, text)
    prefix = torch.as_tensor(list(prefix_ids), dtype=torch.int64)
    n_prefix, n_chunk = prefix.numel(), token_ids.numel()
    start = n_prefix if position_start is None else int(position_start)
    if start < n_prefix:
        raise CagError(f"position_start {start} overlaps the {n_prefix}-token prefix.")
    geometry = lm.geometry
    _check_fits(geometry, start + n_chunk, what="chunk")
    positions = torch.cat([torch.arange(n_prefix), torch.arange(start, start + n_chunk)])
    keys, values = run_prefill(lm.model, torch.cat([prefix, token_ids]), positions)
    keys, values = [k[:, n_prefix:] for k in keys], [v[:, n_prefix:] for v in values]
    if geometry.is_rotary:
        rotary = Rotary(lm.model, geometry)
        chunk_pos = positions[n_prefix:].to(keys[0].device)
        keys = [rotary.remove(k, chunk_pos, layer) for layer, k in enumerate(keys)]
    meta = chunk_meta(lm, start, prefix, text, doc_id, chunk_index)
    return ChunkCache([k.contiguous() for k in keys], [v.contiguous() for v in values],
                      token_ids, offsets, meta, text)


def chunk_meta(lm, start: int, prefix: torch.Tensor, text: str, doc_id: str,
               chunk_index: int) -> ChunkMeta:
    """Metadata of a chunk cache in `lm`'s space (prefilled, or translated into it)."""
    geometry = lm.geometry
    return ChunkMeta(
        model_name=lm.name, model_fingerprint=lm.fingerprint,
        tokenizer_fingerprint=lm.tokenizer_fingerprint, family=geometry.family,
        num_layers=geometry.num_layers, kv_heads=geometry.kv_heads, head_dim=geometry.head_dim,
        position_start=start, rotary_removed=geometry.is_rotary,
        prefix_sha256=ids_sha256(prefix.tolist()) if prefix.numel() else "",
        prefix_tokens=prefix.numel(), text_sha256=sha256_hex(text.encode()), doc_id=doc_id,
        chunk_index=chunk_index)


def run_prefill(model, input_ids: torch.Tensor, positions: torch.Tensor) -> tuple[list, list]:
    """Run the model's own forward over (T,) ids at (T,) positions; per-layer K, V (kv_heads, T, hd).

    The cache is built without the config so that sliding-window layers keep every token (the
    model's masks still apply the window).
    """
    device = next(model.parameters()).device
    cache = DynamicCache()
    model(input_ids=input_ids[None].to(device), position_ids=positions[None].to(device),
          cache=cache, use_cache=True, logits_to_keep=1)
    keys = [layer.keys[0] for layer in cache.layers]  # (kv_heads, T, head_dim) each
    values = [layer.values[0] for layer in cache.layers]
    return keys, values


def _check_fits(geometry, length: int, what: str) -> None:
    if length > geometry.max_positions:
        raise CagError(f"The {what} needs {length} positions but {geometry.family} models handle "
                       f"at most {geometry.max_positions}: use fewer or shorter chunks.")


@torch.no_grad()
def prefill_chunks(lm, texts: list[str], prefix_ids=(), batch_size: int = 8,
                   doc_ids=None, chunk_indices=None) -> list[ChunkCache]:
    """`prefill_chunk` for many texts, batched: the prefix is prefilled once and shared, chunks are
    right-padded (a causal model's real tokens never attend to the padding after them).

    Rotary models only: absolute-position chunks depend on their offset and are prefilled one by one.
    """
    n = len(texts)
    doc_ids = doc_ids or [""] * n
    chunk_indices = chunk_indices or [-1] * n
    if not lm.geometry.is_rotary or batch_size <= 1:
        return [prefill_chunk(lm, t, prefix_ids, doc_id=d, chunk_index=i)
                for t, d, i in zip(texts, doc_ids, chunk_indices)]
    tokenized = [tokenize_chunk(lm.tokenizer, t) for t in texts]
    order = sorted(range(n), key=lambda i: tokenized[i][0].numel())  # similar lengths together
    prefix = torch.as_tensor(list(prefix_ids), dtype=torch.int64)
    prefix_kv = run_prefill(lm.model, prefix, torch.arange(prefix.numel())) if prefix.numel() else None
    results: list[ChunkCache | None] = [None] * n
    for start in range(0, n, batch_size):
        batch = order[start:start + batch_size]
        keys, values = _prefill_batch(lm, [tokenized[i][0] for i in batch], prefix.numel(), prefix_kv)
        for row, i in enumerate(batch):
            results[i] = _chunk_from_kv(lm, keys[row], values[row], tokenized[i], texts[i], prefix,
                                        doc_ids[i], chunk_indices[i])
    return results


def _prefill_batch(lm, chunk_ids: list, n_prefix: int, prefix_kv):
    """Per row, per layer K/V (kv_heads, T_row, head_dim) of right-padded chunks after a shared prefix."""
    device = lm.device
    lengths = [ids.numel() for ids in chunk_ids]
    width, rows = max(lengths), len(chunk_ids)
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((rows, width), pad, dtype=torch.int64)
    mask = torch.zeros((rows, n_prefix + width), dtype=torch.int64)
    mask[:, :n_prefix] = 1
    for row, ids in enumerate(chunk_ids):
        input_ids[row, :ids.numel()] = ids
        mask[row, n_prefix:n_prefix + ids.numel()] = 1
    cache = DynamicCache()
    if prefix_kv is not None:
        for layer, (k, v) in enumerate(zip(*prefix_kv)):
            cache.update(k[None].expand(rows, -1, -1, -1).contiguous(),
                         v[None].expand(rows, -1, -1, -1).contiguous(), layer)
    positions = torch.arange(n_prefix, n_prefix + width)[None].expand(rows, -1)
    lm.model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
             position_ids=positions.to(device), cache=cache, use_cache=True, logits_to_keep=1)
    keys = [[layer.keys[row, :, n_prefix:n_prefix + lengths[row]] for layer in cache.layers]
            for row in range(rows)]
    values = [[layer.values[row, :, n_prefix:n_prefix + lengths[row]] for layer in cache.layers]
              for row in range(rows)]
    return keys, values


def _chunk_from_kv(lm, keys, values, tokenized, text, prefix, doc_id, chunk_index) -> ChunkCache:
    token_ids, offsets = tokenized
    geometry, n_prefix = lm.geometry, prefix.numel()
    positions = torch.arange(n_prefix, n_prefix + token_ids.numel(), device=keys[0].device)
    rotary = Rotary(lm.model, geometry)
    keys = [rotary.remove(k, positions, layer).contiguous() for layer, k in enumerate(keys)]
    meta = chunk_meta(lm, n_prefix, prefix, text, doc_id, chunk_index)
    return ChunkCache(keys, [v.contiguous() for v in values], token_ids, offsets, meta, text)
