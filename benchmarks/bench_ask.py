"""Ask benchmark, one run, side by side:

- ingest throughput of the sample corpus: encoder caches, then the generator's native caches
  (`--also-for`), in chunks/s and tokens/s; bytes stored per context token for each;
- TTFT of `native` vs `direct` for the generator at about 512, 1,024 and 2,048 context tokens
  (for each, the smallest top-k whose chunks reach the size), as medians over repeats, and their
  ratio.

Writes runs/benchmarks/ask.json (or --out; `--out records/ask.json` replaces the record).
Usage: python benchmarks/bench_ask.py [--repeats 3] [--out PATH]
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from cag.ask import ask
from cag.ingest.pipeline import IngestOptions, ingest
from cag.models import load_model
from cag.retrieval import Retriever
from cag.store import Store

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = {512: "How long can the European lobster grow?", 1024: "What is the elevation of Mount Elbert?",
             2048: "When did Hurricane Beatriz form and what damage did it cause?"}


def ingest_rates(store: Path, encoder: str, generator: str) -> dict:
    first = ingest([ROOT / "samples" / "corpus"], store, IngestOptions(encoder=encoder))
    second = ingest([ROOT / "samples" / "corpus"], store, IngestOptions(encoder=encoder, also_for=(generator,)))
    opened = Store.open(store)
    info = opened.info()
    opened.close()
    tokens = info["tokens"]
    per_space = {s["model"]: round(s["bytes"] / tokens, 1) for s in info["cache_spaces"]}
    return {"chunks": first.chunks_total, "encoder_tokens": tokens,
            "encoder": {"seconds": round(first.seconds, 1), "chunks_per_s": round(first.caches_written / first.seconds, 2),
                        "tokens_per_s": round(first.tokens_prefilled / first.seconds, 1)},
            "native": {"seconds": round(second.seconds, 1), "chunks_per_s": round(second.caches_written / second.seconds, 2),
                       "tokens_per_s": round(second.tokens_prefilled / second.seconds, 1)},
            "bytes_per_encoder_token": per_space, "store_bytes_per_token": round(info["bytes_on_disk"] / tokens, 1)}


def ttft_table(store: Path, generator: str, repeats: int) -> list:
    lm = load_model(generator)
    retriever = Retriever(Store.open(store))
    ask("warm-up", model=generator, top_k=1, mode="direct", max_new_tokens=1, lm=lm, retriever=retriever)
    rows = []
    for target, question in QUESTIONS.items():
        top_k = _top_k_for(retriever, question, target)
        times = {"native": [], "direct": []}
        answers, context = {}, 0
        for _ in range(repeats):
            for mode in ("native", "direct"):  # alternate, so that machine noise hits both
                result = ask(question, model=generator, top_k=top_k, mode=mode, max_new_tokens=1,
                             lm=lm, retriever=retriever)
                times[mode].append(result.timings_ms["ttft"])
                answers[mode], context = result.answer, result.context_tokens
        native, direct = statistics.median(times["native"]), statistics.median(times["direct"])
        rows.append({"target_tokens": target, "top_k": top_k, "context_tokens": context, "ttft_native_ms": round(native, 1),
                     "ttft_direct_ms": round(direct, 1), "speedup": round(direct / native, 2),
                     "first_token_same": answers["native"] == answers["direct"]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _top_k_for(retriever: Retriever, question: str, target: int) -> int:
    """The smallest k whose retrieved chunks hold at least `target` encoder tokens."""
    total = retriever.store.catalog.counts()["chunks"]
    ranked = retriever.retrieve(question, total).results
    tokens = 0
    for k, hit in enumerate(ranked, 1):
        tokens += hit.chunk.n_tokens
        if tokens >= target:
            return k
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "benchmarks" / "ask.json", help="result file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        rates = ingest_rates(store, args.encoder, args.generator)
        print(json.dumps(rates), flush=True)
        rows = ttft_table(store, args.generator, args.repeats)
    result = {"date": time.strftime("%Y-%m-%d"), "threads": torch.get_num_threads(),
              "encoder": args.encoder, "generator": args.generator, "ingest": rates, "ttft": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
