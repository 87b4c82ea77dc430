"""Could entropy coding take int4 chunk caches under a quarter of fp16's bytes?

Prefills distinct SQuAD dev contexts with each model (as ingest does: one chunk per context),
quantizes keys and values as the store's int4 does (cag/kv/quantize.py), and reports per model:
the empirical entropy of the 4-bit codes (bits per code, keys and values), and the bytes of the
int4 store (codes + ranges) with the packed codes as stored, zlib-9 and lzma compressed, each as a
fraction of fp16's bytes.

    python experiments/probe_int4_entropy.py [--contexts 40] [--models smollm2-135m,qwen2.5-coder-0.5b]

Writes runs/probes/int4_entropy.json (or --out).
"""

import argparse
import json
import lzma
import sys
import zlib
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from cag.kv.chunk_cache import prefill_chunk  # noqa: E402
from cag.kv.quantize import quantize  # noqa: E402
from cag.models import load_model  # noqa: E402
from eval.datasets import resolve_dataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def first_questions(count: int) -> list[dict]:
    """The first question of each of the first `count` distinct contexts of SQuAD dev."""
    seen, rows = set(), []
    with resolve_dataset("squad", None)[0].open() as f:
        for line in f:
            row = json.loads(line)
            if row["context"] not in seen:
                seen.add(row["context"])
                rows.append(row)
            if len(rows) == count:
                break
    return rows


def unpacked_codes(q: torch.Tensor) -> torch.Tensor:
    return torch.stack([q & 0x0F, q >> 4], -1).flatten()


def entropy_bits(codes: torch.Tensor) -> float:
    p = torch.bincount(codes.long(), minlength=16).double()
    p = p[p > 0] / p.sum()
    return float(-(p * p.log2()).sum())


def measure(model: str, contexts: list[str]) -> dict:
    lm = load_model(model, dtype="fp32")
    codes = {"keys": [], "values": []}
    packed, ranges, fp16_bytes, tokens = bytearray(), 0, 0, 0
    with torch.inference_mode():
        for text in contexts:
            chunk = prefill_chunk(lm, text)
            tokens += chunk.token_ids.numel()
            for kind, per, tensors in (("keys", "channel", chunk.keys), ("values", "token", chunk.values)):
                for x in tensors:  # (H, T, D) per layer
                    parts = quantize(x, 4, per, 128)  # the store's int4
                    codes[kind].append(unpacked_codes(parts["q"]))
                    packed += parts["q"].numpy().tobytes()
                    ranges += parts["min"].numel() * 2 + parts["step"].numel() * 2
                    fp16_bytes += x.numel() * 2
    raw = bytes(packed)
    return {
        "contexts": len(contexts), "tokens": tokens,
        "entropy_bits_per_code": {k: round(entropy_bits(torch.cat(v)), 3) for k, v in codes.items()},
        "fraction_of_fp16": {
            "int4 as stored": round((len(raw) + ranges) / fp16_bytes, 4),
            "int4 codes zlib-9": round((len(zlib.compress(raw, 9)) + ranges) / fp16_bytes, 4),
            "int4 codes lzma": round((len(lzma.compress(raw)) + ranges) / fp16_bytes, 4),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=40)
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "probes" / "int4_entropy.json")
    args = parser.parse_args()
    contexts = [row["context"] for row in first_questions(args.contexts)]
    record = {"date": "2026-12-04", "dataset": "squad dev, distinct contexts",
              "models": {m: measure(m, contexts) for m in args.models.split(",")}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
