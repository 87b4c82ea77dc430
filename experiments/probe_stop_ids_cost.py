"""What looking the stop tokens up per answer cost every TTFT: one process, side by side.

Until 2026-12-07, `cag.kv.generate.stop_token_ids` built the tokenizer's whole vocabulary
(`get_vocab()`, 151k entries for qwen2.5) inside every answer's measured time; now the ids are found
once per loaded model. This probe asks the same questions through `cag.ask.ask` with the ids found
once (as cag does now) and with the old per-answer lookup put back, alternating, in `native` and
`none` mode at the sample corpus's three context sizes, and prints the median TTFTs and their ratio.

Usage: python experiments/probe_stop_ids_cost.py [--store runs/stop-ids-store] [--repeats 5]
  (the store: the sample corpus ingested with smollm2-135m --also-for qwen2.5-coder-0.5b; made
  when missing). Writes runs/probes/stop_ids_cost-GENERATOR.json (or --out).
"""

import argparse
import json
import statistics
from pathlib import Path

import torch

import cag.kv.generate as generate
from cag.ask import ask
from cag.ingest.pipeline import IngestOptions, ingest
from cag.models import load_model
from cag.retrieval import Retriever
from cag.store import Store

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = {3: "How long can the European lobster grow?", 5: "What is the elevation of Mount Elbert?",
             11: "When did Hurricane Beatriz form and what damage did it cause?"}  # top-k: 659, 1,141, 2,160 tokens
FOUND_ONCE = generate.stop_token_ids


def looked_up_per_answer(lm) -> set[int]:
    """The lookup as it was: the whole vocabulary built on every call."""
    ids: set[int] = set()
    for source in (getattr(lm.model, "generation_config", None), lm.tokenizer):
        eos = getattr(source, "eos_token_id", None)
        ids.update([eos] if isinstance(eos, int) else list(eos or []))
    vocab = lm.tokenizer.get_vocab()
    ids.update(vocab[t] for t in generate._END_TOKENS if t in vocab and t in lm.tokenizer.all_special_tokens)
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "runs" / "stop-ids-store")
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="result file (default runs/probes/)")
    args = parser.parse_args()
    if not (args.store / "catalog.sqlite").exists():
        ingest([ROOT / "samples" / "corpus"], args.store, IngestOptions(encoder=args.encoder, also_for=(args.generator,)))
    lm = load_model(args.generator)
    retriever = Retriever(Store.open(args.store))
    ask("warm-up", model=args.generator, top_k=1, mode="native", max_new_tokens=1, lm=lm, retriever=retriever)
    ways = {"found_once": FOUND_ONCE, "per_answer": looked_up_per_answer}
    rows = []
    for top_k, question in QUESTIONS.items():
        for mode in ("native", "none"):
            times = {way: [] for way in ways}
            answers = {way: set() for way in ways}
            context = 0
            for _ in range(args.repeats):
                for way, lookup in ways.items():  # alternate, so that machine noise hits both
                    generate.stop_token_ids = lookup
                    result = ask(question, model=args.generator, top_k=top_k, mode=mode, max_new_tokens=8,
                                 lm=lm, retriever=retriever)
                    times[way].append(result.timings_ms["ttft"])
                    answers[way].add(result.answer)
                    context = result.context_tokens
            generate.stop_token_ids = FOUND_ONCE
            medians = {way: round(statistics.median(t), 1) for way, t in times.items()}
            row = {"mode": mode, "top_k": top_k, "context_tokens": context, "ttft_ms": times, "median_ms": medians,
                   "per_answer_over_found_once": round(medians["per_answer"] / medians["found_once"], 3),
                   "same_answers": answers["found_once"] == answers["per_answer"]}
            rows.append(row)
            print(f"{mode:7} {context:5} tokens: found once {medians['found_once']:8.1f} ms, per answer "
                  f"{medians['per_answer']:8.1f} ms, ratio {row['per_answer_over_found_once']}, "
                  f"same answers {row['same_answers']}", flush=True)
    record = {"generator": args.generator, "repeats": args.repeats, "threads": torch.get_num_threads(),
              "dtype": str(next(lm.model.parameters()).dtype), "rows": rows}
    path = args.out or ROOT / "runs" / "probes" / f"stop_ids_cost-{args.generator}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
