"""Bytes per context token of a store's chunk caches, per model: as the files are, and as this cag
writes the same caches now (each file read, verified and serialized again in its own storage).
For stores written before a change of file layout (e.g. integer parts stacked over layers).

Usage: python benchmarks/cache_bytes.py STORE [--out records/NAME.json]
"""

import argparse
import json
import time
from pathlib import Path

from safetensors import safe_open

from cag.kv.serde import chunk_cache_bytes, load_chunk_cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    files = sorted((args.store / "caches").rglob("*.safetensors"))
    if not files:
        raise SystemExit(f"{args.store} holds no chunk caches (no caches/**/*.safetensors)")
    models = {}
    for path in files:
        cache = load_chunk_cache(path)
        dtype = cache_dtype_of(path)
        row = models.setdefault(f"{cache.meta.model_name} ({dtype})", {"files": 0, "tokens": 0, "bytes_as_stored": 0,
                                                                     "bytes_written_now": 0})
        row["files"] += 1
        row["tokens"] += cache.token_ids.numel()
        row["bytes_as_stored"] += path.stat().st_size
        row["bytes_written_now"] += len(chunk_cache_bytes(cache, dtype))
    for row in models.values():
        for key in ("bytes_as_stored", "bytes_written_now"):
            row[key.replace("bytes", "bytes_per_token")] = round(row[key] / row["tokens"], 1)
    record = {"date": time.strftime("%Y-%m-%d"), "store": str(args.store), "models": models}
    print(json.dumps(record, indent=1))
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")


def cache_dtype_of(path: Path) -> str:
    with safe_open(str(path), "pt") as f:
        return f.metadata().get("cag.dtype", "fp16")


if __name__ == "__main__":
    main()
