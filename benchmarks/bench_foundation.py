"""Foundation benchmark, per packaged model, measured side by side in one run:

- load time straight from the GGUF file vs from cag's converted folder (and their ratio);
- prefill tokens/s at 512 and 2,048 tokens, fp32 and bf16;
- KV bytes per token per storage dtype, measured from a saved 512-token chunk cache file.

Writes runs/benchmarks/foundation.json (or --out; `--out records/foundation.json` replaces the
record) and prints a table. Usage:
    python benchmarks/bench_foundation.py [--models smollm2-135m,...] [--repeats 2]
"""

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from cag.kv.chunk_cache import prefill_chunk, run_prefill
from cag.kv.serde import save_chunk_cache
from cag.models import load_model
from cag.models.packaged import gguf_path

ROOT = Path(__file__).resolve().parent.parent


def time_gguf_load(name: str) -> float:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = gguf_path(name)
    start = time.perf_counter()
    AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return time.perf_counter() - start


def prefill_rate(lm, n_tokens: int, dtype: torch.dtype, repeats: int) -> float:
    model = lm.model.to(dtype)
    ids = torch.randint(100, 5000, (n_tokens,))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            run_prefill(model, ids, torch.arange(n_tokens))
        best = min(best, time.perf_counter() - start)
    lm.model.to(torch.float32)
    return n_tokens / best


def bytes_per_token(lm) -> dict:
    text = (lm.tokenizer.decode(torch.randint(100, 5000, (600,)).tolist()))
    ids = lm.tokenizer(text, add_special_tokens=False).input_ids[:512]
    chunk = prefill_chunk(lm, lm.tokenizer.decode(ids))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("fp32", "fp16", "bf16"):
            size = save_chunk_cache(chunk, Path(tmp) / f"{dtype}.safetensors", dtype=dtype)
            out[dtype] = round(size / chunk.num_tokens)
    out["tokens"] = chunk.num_tokens
    return out


def bench(name: str, repeats: int) -> dict:
    gguf_s = time_gguf_load(name)
    load_model(name)  # make sure the converted folder exists (not timed)
    folder_s = min(load_model(name).load_seconds for _ in range(repeats))
    lm = load_model(name)
    row = {"model": name, "load_gguf_s": round(gguf_s, 2), "load_converted_s": round(folder_s, 2),
           "load_speedup": round(gguf_s / folder_s, 1)}
    for n in (512, 2048):
        for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            row[f"prefill_tok_s_{n}_{label}"] = round(prefill_rate(lm, n, dtype, repeats), 1)
    row["kv_bytes_per_token"] = bytes_per_token(lm)
    row["kv_bytes_per_token_geometry_fp16"] = lm.geometry.kv_bytes_per_token(2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b,gemma3-270m")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "benchmarks" / "foundation.json",
                        help="result file")
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    for name in args.models.split(","):
        rows.append(bench(name, args.repeats))
        print(json.dumps(rows[-1]), flush=True)
    result = {"machine": f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
              "date": time.strftime("%Y-%m-%d"), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\n{'model':20} {'GGUF s':>7} {'conv s':>7} {'x':>5} {'512 fp32':>9} {'512 bf16':>9} "
          f"{'2048 fp32':>10} {'2048 bf16':>10} {'B/tok fp16':>11}")
    for r in rows:
        print(f"{r['model']:20} {r['load_gguf_s']:>7} {r['load_converted_s']:>7} {r['load_speedup']:>5} "
              f"{r['prefill_tok_s_512_fp32']:>9} {r['prefill_tok_s_512_bf16']:>9} "
              f"{r['prefill_tok_s_2048_fp32']:>10} {r['prefill_tok_s_2048_bf16']:>10} "
              f"{r['kv_bytes_per_token']['fp16']:>11}")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
