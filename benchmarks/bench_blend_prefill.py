"""A blend's recompute before the question's prefill, or in the same forward: TTFT side by side in
one run, on the multi-agent case study's long histories (benchmarks/bench_multi_agent.py).

Agent A (`--agent-a`) reads a HotpotQA question's paragraphs and writes notes; a session holds both
as its history, and B (`--agent-b`) reads it translated once, so the translations are stored (as
in the case study's later turns). Then, alternating, per question and repeat:
- `direct`: B reads the history as text;
- `translated, stored`: B reads the stored translations;
- per `--shares` share, `translated-blend` with the chosen tokens recomputed `before` the question
  is read (one forward for them, one for the question: cag before deferring) and `merged` (the
  blend modes now: the recompute runs in the question's forward, cag.kv.blend.read_after).
Each TTFT is from the turn's start (reading the caches) to the first token, as the server's turns
time it. The first repeat generates `--answer-tokens` and compares the answers of before and merged.

Prints and writes (`--out`, default runs/benchmarks/blend_prefill-hotpotqa.json): per variant the median
TTFT and the median over questions of direct's TTFT over it, and per share the median of before's
TTFT over merged's.

Usage: python benchmarks/bench_blend_prefill.py [--limit 30] [--shares 0.05,0.1,0.15] [--repeats 2]
           [--dtype bf16] [--threads 2]
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from cag.kv.blend import blend
from cag.kv.generate import greedy_generate
from cag.modes import ContextRequest, ModeOptions, get_mode
from cag.prompt import prompt_layout
from cag.server.service import CagServer
from cag.server.sessions import history_rows
from cag.server.turns import TurnRequest
from eval.datasets import load_examples, resolve_dataset, sample

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_multi_agent import case_study_server, notes_of_a, shares  # noqa: E402  (benchmarks/ is the script's folder)
from serve_process import add_threads_option, apply_threads  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def timed_answer(lm, store, question: str, variant: tuple, max_new_tokens: int) -> tuple[float, list]:
    """(TTFT in ms, answer token ids) of B answering `question` from the session `store`'s history."""
    kind, share = variant
    start = time.perf_counter()
    rows = history_rows(store)
    layout = prompt_layout(lm.tokenizer)
    q_ids = layout.question_ids(lm.tokenizer, question)
    mode = {"direct": "direct", "stored": "translated", "before": "translated", "merged": "translated-blend"}[kind]
    request = ContextRequest(store, lm, layout, rows, q_ids, ModeOptions(blend=share or 0.0))
    built = get_mode(mode).build(request)
    if kind == "before":
        blend(lm, built.context, share, question_ids=q_ids)  # recomputed now, before the question's forward
    begin = time.perf_counter()
    generation = greedy_generate(lm, built.lead_ids + q_ids, built.context, max_new_tokens)
    return (begin - start + generation.ttft_seconds) * 1e3, generation.token_ids


def variant_name(variant: tuple) -> str:
    kind, share = variant
    return {"direct": "direct", "stored": "translated, stored"}.get(kind) or f"blend {share:g} {kind}"


def run_question(server: CagServer, args, example: dict) -> dict:
    a = notes_of_a(server, args.agent_a, example, args.budget, args.note_tokens)
    sid = server.create_session(args.agent_a)["id"]
    server.add_record(sid, "user", "user", "Paragraphs:\n" + "\n\n".join(a["paragraphs"]))
    server.add_record(sid, "note", args.agent_a, a["notes"] or "(no notes)")
    server.turn(sid, TurnRequest(example["question"], args.agent_b, "translated", 1, remember=False))  # stores them
    variants = [("direct", None), ("stored", None)] + [(kind, s) for s in args.shares for kind in ("before", "merged")]

    @torch.no_grad()
    def job(context):
        store = server.sessions.open_store(sid)
        try:
            times, answers = {variant_name(v): [] for v in variants}, {}
            for repeat in range(args.repeats):
                order = variants if repeat % 2 == 0 else variants[::-1]  # alternating: drift cancels
                for variant in order:
                    tokens = args.answer_tokens if repeat == 0 else 1
                    ttft, ids = timed_answer(context.lm, store, example["question"], variant, tokens)
                    times[variant_name(variant)].append(ttft)
                    if repeat == 0:
                        answers[variant_name(variant)] = ids
            return times, answers, store.catalog.all_chunks()
        finally:
            store.close()

    times, answers, chunks = server.pool.run(args.agent_b, job).value
    same = {f"{s:g}": answers[f"blend {s:g} before"] == answers[f"blend {s:g} merged"] for s in args.shares}
    return {"id": example["id"], "ttft_ms": {k: statistics.median(v) for k, v in times.items()},
            "same_answer": same, "history_chunks": len(chunks)}


def summarize(rows: list[dict], args) -> dict:
    names = list(rows[0]["ttft_ms"])
    direct = [r["ttft_ms"]["direct"] for r in rows]
    return {
        "ttft_median_ms": {n: round(statistics.median(r["ttft_ms"][n] for r in rows), 1) for n in names},
        "direct_over_paired_median": {n: round(statistics.median(d / r["ttft_ms"][n] for d, r in zip(direct, rows)), 2)
                                      for n in names if n != "direct"},
        "before_over_merged_paired_median": {
            f"{s:g}": round(statistics.median(r["ttft_ms"][f"blend {s:g} before"] / r["ttft_ms"][f"blend {s:g} merged"]
                                              for r in rows), 3) for s in args.shares},
        "merged_saves_ms_median": {
            f"{s:g}": round(statistics.median(r["ttft_ms"][f"blend {s:g} before"] - r["ttft_ms"][f"blend {s:g} merged"]
                                              for r in rows), 1) for s in args.shares},
        "same_answer": {f"{s:g}": sum(r["same_answer"][f"{s:g}"] for r in rows) for s in args.shares},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=2048, help="paragraph tokens agent A reads")
    parser.add_argument("--note-tokens", type=int, default=64)
    parser.add_argument("--answer-tokens", type=int, default=16, help="tokens generated in the first repeat")
    parser.add_argument("--agent-a", default="smollm2-135m")
    parser.add_argument("--agent-b", default="qwen2.5-coder-0.5b")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--shares", type=shares, default=(0.05, 0.1, 0.15))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "benchmarks" / "blend_prefill-hotpotqa.json")
    add_threads_option(parser)
    args = parser.parse_args()
    apply_threads(args)
    path, task = resolve_dataset("hotpotqa", None)
    examples = sample(load_examples(path, task), task, args.limit, args.seed)
    load, rows, start = [os.getloadavg()[0]], [], time.perf_counter()
    with case_study_server(args) as server:
        for i, example in enumerate(examples, 1):
            rows.append(run_question(server, args, example))
            load.append(os.getloadavg()[0])
            print(f"{i}/{len(examples)} " + " ".join(f"{k} {v:.0f}" for k, v in rows[-1]["ttft_ms"].items()),
                  flush=True)
    record = {"date": time.strftime("%Y-%m-%d"), "dataset": "hotpotqa distractor dev sample", "seed": args.seed,
              "n": len(rows), "threads": torch.get_num_threads(), "device": "cpu",
              "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "seconds": round(time.perf_counter() - start, 1),
              "load_average_1min": {"min": min(load), "max": max(load)},
              **summarize(rows, args), "questions": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(json.dumps({k: v for k, v in record.items() if k != "questions"}, indent=1))


if __name__ == "__main__":
    main()
