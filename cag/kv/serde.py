"""Save and load chunk caches as safetensors files with their metadata and a checksum inside.

File layout: tensors `k.{layer}`, `v.{layer}` (kv_heads, T, head_dim), `token_ids` (T,),
`offsets` (T, 2); header metadata `cag.meta` (ChunkMeta JSON), `cag.text` (the chunk text),
`cag.dtype` and `cag.sha256`: sha256 over every tensor's name, dtype, shape and bytes plus the
metadata, verified on load. Writes are atomic (temp file + rename).

Storage dtypes: fp32, fp16, bf16 (the K/V as they are), and the integer schemes of
cag.kv.quantize (int8, int4, int4k-int3v: KIVI-style codes with per-group ranges,
`k.q|min|step`, `v.q|min|step` stacked over the layers, or per layer as `k.{layer}.q|...` in files
written before; `cag.key_group` / `cag.value_group` give the ranges' groups, and
`cag.value_rotation` whether values were rotated), read back as fp16. A file from before the groups
were recorded is read with the groups its scheme had then (cag.kv.quantize.GROUPS_BEFORE_RECORDED).
"""

import hashlib
import json
import struct
from pathlib import Path

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from cag.atomic import atomic_write_bytes
from cag.errors import CagError, CorruptCacheError
from cag.kv.chunk_cache import FORMAT_VERSION, ChunkCache, ChunkMeta
from cag.kv.quantize import GROUPS_BEFORE_RECORDED, SCHEMES, can_rotate, dequantize, hadamard, quantize

STORAGE_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
CACHE_DTYPES = (*STORAGE_DTYPES, *SCHEMES)  # what `cag ingest --cache-dtype` takes
DEFAULT_CACHE_DTYPE = "fp16"  # a new store's
CACHE_DTYPE_HELP = ("Storage of chunk caches: fp16, bf16, fp32, or int8 / int4 / int4k-int3v (integer codes with "
                    "per-group ranges, KIVI-style: keys per channel, values per token; 0.52 / 0.27 / 0.24 of fp16's "
                    "bytes; int4k-int3v: int4 keys over 128 tokens, int3 values over 64 channels after a Hadamard "
                    "rotation). Translations made from a store below 8 bits are kept in int8.")


def _digest(tensors: dict, meta: dict) -> str:
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    for key in sorted(meta):
        digest.update(f"{key}={meta[key]}".encode())
    return digest.hexdigest()


def chunk_cache_bytes(cache: ChunkCache, dtype: str = "fp16") -> bytes:
    """Serialize `cache` to safetensors bytes in storage `dtype` (CACHE_DTYPES)."""
    check_cache_dtype(dtype)
    tensors = {"token_ids": cache.token_ids.to(torch.int64).contiguous(),
               "offsets": cache.offsets.to(torch.int64).contiguous()}
    meta = _quantize_layers(cache, SCHEMES[dtype], tensors) if dtype in SCHEMES else {}
    if dtype in STORAGE_DTYPES:
        for layer, (k, v) in enumerate(zip(cache.keys, cache.values)):
            tensors[f"k.{layer}"] = k.detach().to("cpu", STORAGE_DTYPES[dtype]).contiguous()
            tensors[f"v.{layer}"] = v.detach().to("cpu", STORAGE_DTYPES[dtype]).contiguous()
            if dtype == "fp16" and not (torch.isfinite(tensors[f"k.{layer}"]).all()
                                        and torch.isfinite(tensors[f"v.{layer}"]).all()):
                raise CagError(f"Layer {layer} K/V overflow fp16; store this model's caches as bf16.")
    meta.update({"cag.meta": json.dumps(cache.meta.to_dict(), sort_keys=True), "cag.text": cache.text,
                 "cag.dtype": dtype, "cag.format_version": str(FORMAT_VERSION)})
    meta["cag.sha256"] = _digest(tensors, meta)
    return st_save(tensors, metadata=meta)


def _quantize_layers(cache: ChunkCache, scheme, tensors: dict) -> dict:
    """Add `scheme`'s parts to `tensors`: `k.q|min|step` and `v.q|min|step`, each stacked over the
    layers (one header entry per part, not one per layer and part); the metadata it needs."""
    # rotation needs a power-of-two head size; other models store their values as they are
    rotate = scheme.rotate_values and can_rotate(cache.meta.head_dim)
    rotation = hadamard(cache.meta.head_dim) if rotate else None
    parts = {}
    for k, v in zip(cache.keys, cache.values):
        k, v = k.detach().to("cpu"), v.detach().to("cpu")  # (H, T, D); keys per channel, values per token
        v = v.float() @ rotation if rotate else v
        for name, x, bits, per, group in (("k", k, scheme.key_bits, "channel", scheme.key_group),
                                          ("v", v, scheme.value_bits, "token", scheme.value_group)):
            for part, t in quantize(x, bits, per, group).items():
                parts.setdefault(f"{name}.{part}", []).append(t)
    tensors.update({name: torch.stack(layers).contiguous() for name, layers in parts.items()})  # (L, ...)
    meta = {"cag.key_group": str(scheme.key_group), "cag.value_group": str(scheme.value_group)}
    if scheme.rotate_values:
        meta["cag.value_rotation"] = "hadamard" if rotate else "none"
    return meta


def _dequantize_layers(tensors: dict, info: ChunkMeta, scheme, meta: dict) -> tuple[list, list]:
    """fp16 keys and values (H, T, D) per layer from `_quantize_layers`' parts; stores written before
    the parts were stacked name them per layer (`k.{layer}.q`, ...)."""
    shape = (info.kv_heads, tensors["token_ids"].numel(), info.head_dim)
    stacked = "k.q" in tensors
    if "cag.key_group" in meta:  # the file's own groups
        key_group, value_group = int(meta["cag.key_group"]), int(meta["cag.value_group"])
    else:
        key_group, value_group = GROUPS_BEFORE_RECORDED.get(meta["cag.dtype"], (scheme.key_group, scheme.value_group))

    def layer(name, i, bits, per, group):
        parts = {p: tensors[f"{name}.{p}"][i] if stacked else tensors[f"{name}.{i}.{p}"] for p in ("q", "min", "step")}
        return dequantize(parts, shape, bits, per, group)

    keys = [layer("k", i, scheme.key_bits, "channel", key_group).half() for i in range(info.num_layers)]
    values = [layer("v", i, scheme.value_bits, "token", value_group) for i in range(info.num_layers)]
    if meta.get("cag.value_rotation") == "hadamard":
        rotation = hadamard(info.head_dim)  # symmetric and orthonormal: its own inverse
        values = [v @ rotation for v in values]
    return keys, [v.half() for v in values]


def check_cache_dtype(dtype: str) -> None:
    if dtype not in CACHE_DTYPES:
        raise CagError(f"Unknown cache dtype {dtype!r}; choose one of {', '.join(CACHE_DTYPES)}.")


def derived_cache_dtype(dtype: str) -> str:
    """How a store of `dtype` caches keeps the caches it derives from them (translations): never
    coarser than int8. A translation of a quantized cache already carries that quantization's
    error; quantizing it again at 4 bits about doubled the generator's KL to fp16's answers
    (records/translated_quantization-smollm2-135m-qwen2.5-coder-0.5b.json), so a stored translation
    would answer worse than the fresh one; at int8 it adds about 0.0005."""
    scheme = SCHEMES.get(dtype)
    return "int8" if scheme is not None and min(scheme.key_bits, scheme.value_bits) < 8 else dtype


def save_chunk_cache(cache: ChunkCache, path: Path, dtype: str = "fp16") -> int:
    """Write `cache` to `path` atomically; returns the bytes written."""
    data = chunk_cache_bytes(cache, dtype)
    atomic_write_bytes(Path(path), data)
    return len(data)


def _read_header_metadata(data: bytes, path: Path) -> dict:
    if len(data) < 8:
        raise CorruptCacheError(f"Chunk cache {path} is truncated ({len(data)} bytes).")
    (header_len,) = struct.unpack("<Q", data[:8])
    if 8 + header_len > len(data):
        raise CorruptCacheError(f"Chunk cache {path} is truncated (header runs past the end).")
    try:
        header = json.loads(data[8:8 + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptCacheError(f"Chunk cache {path} has a corrupted header: {exc}.") from exc
    if not isinstance(header, dict):  # valid JSON, but not the object safetensors writes
        raise CorruptCacheError(f"Chunk cache {path} has a corrupted header: a JSON {type(header).__name__}, "
                                "not an object.")
    meta = header.get("__metadata__") or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CorruptCacheError(f"Chunk cache {path} has a corrupted header: its metadata is not an object of strings.")
    if "cag.sha256" not in meta:
        raise CorruptCacheError(f"{path} is not a cag chunk cache (no cag metadata).")
    return meta


def load_chunk_cache(path: Path) -> ChunkCache:
    """Read and verify a chunk cache; CorruptCacheError names the file on any damage."""
    path = Path(path)
    if not path.is_file():
        raise CagError(f"Chunk cache {path} does not exist.")
    data = path.read_bytes()
    meta = _read_header_metadata(data, path)
    try:
        tensors = st_load(data)
    except Exception as exc:  # safetensors raises its own error type for short/bad buffers
        raise CorruptCacheError(f"Chunk cache {path} is truncated or corrupted: {exc}.") from exc
    stored = meta.pop("cag.sha256")
    if _digest(tensors, meta) != stored:
        raise CorruptCacheError(f"Chunk cache {path} failed its checksum: the file is corrupted.")
    if int(meta["cag.format_version"]) != FORMAT_VERSION:
        raise CagError(f"Chunk cache {path} has format version {meta['cag.format_version']}; "
                       f"this cag reads version {FORMAT_VERSION}. Re-create it.")
    info = ChunkMeta(**json.loads(meta["cag.meta"]))
    dtype = meta.get("cag.dtype", "fp16")
    if dtype in SCHEMES:
        keys, values = _dequantize_layers(tensors, info, SCHEMES[dtype], meta)
    else:
        keys = [tensors[f"k.{i}"] for i in range(info.num_layers)]
        values = [tensors[f"v.{i}"] for i in range(info.num_layers)]
    return ChunkCache(keys, values, tensors["token_ids"], tensors["offsets"], info,
                      meta.get("cag.text", ""))
