"""Save and load chunk caches as safetensors files with their metadata and a checksum inside.

File layout: tensors `k.{layer}`, `v.{layer}` (kv_heads, T, head_dim), `token_ids` (T,),
`offsets` (T, 2); header metadata `cag.meta` (ChunkMeta JSON), `cag.text` (the chunk text),
`cag.dtype` and `cag.sha256`: sha256 over every tensor's name, dtype, shape and bytes plus the
metadata, verified on load. Writes are atomic (temp file + rename).

Storage dtypes: fp32, fp16, bf16 (the K/V as they are), int8 and int4 (KIVI-style integer codes
with per-group ranges, cag.kv.quantize: `k.{layer}.q|min|step`, `v.{layer}.q|min|step`),
read back as fp16.
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
from cag.kv.quantize import BITS, dequantize, quantize

STORAGE_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
CACHE_DTYPES = (*STORAGE_DTYPES, *BITS)  # what `cag ingest --cache-dtype` takes
_DTYPE_NAMES = {v: k for k, v in STORAGE_DTYPES.items()}


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
    """Serialize `cache` to safetensors bytes in storage `dtype` (fp32, fp16 or bf16)."""
    check_cache_dtype(dtype)
    tensors = {"token_ids": cache.token_ids.to(torch.int64).contiguous(),
               "offsets": cache.offsets.to(torch.int64).contiguous()}
    for layer, (k, v) in enumerate(zip(cache.keys, cache.values)):
        k, v = k.detach().to("cpu"), v.detach().to("cpu")
        if dtype in BITS:  # keys per channel, values per token
            for name, x, per in ((f"k.{layer}", k, "channel"), (f"v.{layer}", v, "token")):
                tensors.update({f"{name}.{part}": t for part, t in quantize(x, dtype, per).items()})
            continue
        tensors[f"k.{layer}"] = k.to(STORAGE_DTYPES[dtype]).contiguous()
        tensors[f"v.{layer}"] = v.to(STORAGE_DTYPES[dtype]).contiguous()
        if dtype == "fp16" and not (torch.isfinite(tensors[f"k.{layer}"]).all()
                                    and torch.isfinite(tensors[f"v.{layer}"]).all()):
            raise CagError(f"Layer {layer} K/V overflow fp16; store this model's caches as bf16.")
    meta = {"cag.meta": json.dumps(cache.meta.to_dict(), sort_keys=True), "cag.text": cache.text,
            "cag.dtype": dtype, "cag.format_version": str(FORMAT_VERSION)}
    meta["cag.sha256"] = _digest(tensors, meta)
    return st_save(tensors, metadata=meta)


def check_cache_dtype(dtype: str) -> None:
    if dtype not in CACHE_DTYPES:
        raise CagError(f"Unknown cache dtype {dtype!r}; choose one of {', '.join(CACHE_DTYPES)}.")


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
    meta = header.get("__metadata__") or {}
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
    if dtype in BITS:
        shape = (info.kv_heads, tensors["token_ids"].numel(), info.head_dim)
        layer = lambda name, per: dequantize({p: tensors[f"{name}.{p}"] for p in ("q", "min", "step")},  # noqa: E731
                                             shape, dtype, per).half()
        keys = [layer(f"k.{i}", "channel") for i in range(info.num_layers)]
        values = [layer(f"v.{i}", "token") for i in range(info.num_layers)]
    else:
        keys = [tensors[f"k.{i}"] for i in range(info.num_layers)]
        values = [tensors[f"v.{i}"] for i in range(info.num_layers)]
    return ChunkCache(keys, values, tensors["token_ids"], tensors["offsets"], info,
                      meta.get("cag.text", ""))


def storage_dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES[dtype]
