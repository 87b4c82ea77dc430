"""Multi-agent memory reuse on HotpotQA, through cag serve's sessions (the server's own code, in
process, without HTTP):

- agent A (`--agent-a`, default smollm2-135m, the session's memory model) reads the question's
  paragraphs (in order, up to `--budget` of its tokens) and writes short notes (greedy, at most
  `--note-tokens`) into a session; the session ingests them (A's chunk caches);
- agent B (`--agent-b`, default qwen2.5-coder-0.5b) answers the question from that history:
  (a) `translated`: A's caches translated by the MoT translator A -> B, (b) `direct`: B reads the
  notes as text, (c) `none`: B alone, and (d) `paragraphs`: B reads the paragraphs themselves (the
  reference; not a history; with `--history reading` the history holds them, so (b) is that reference
  and (d) is not run).

`--history notes` (the default): the session holds A's notes alone (a short history, about 50
tokens). `--history reading`: the session holds what A read (the paragraphs, as a user record) and
then its notes, about 1,400 tokens: a long shared history, where reading it as text costs B a full
prefill. Each of B's turns is asked with `remember: false`, so every mode reads the same history.
With a long history B also answers in translated-blend, once per `--blend-shares` share (the share
of the history's tokens B recomputes; default the server's 15%), reading the stored translations.

Scores: SQuAD F1/EM of B's first answer line, per-mode means with bootstrap 95% intervals,
paired differences with bootstrap 95% intervals; B's TTFT (from the start of the turn's work to its
first token: reading the history, translating it in (a), prefilling the question). With a long
history, B's translated turn is asked twice: the second reads the translations the first stored in
the session (B's next turn on the same history), and its TTFT is reported apart.

Predictions go to OUT/multi_agent-DATASET[-reading].predictions.jsonl (appended per question; a
killed run resumes), the summary to OUT/multi_agent-DATASET[-reading].json; OUT is --out (default
runs/benchmarks/), or give each with --record and --predictions. A record kept in records/ holds its
predictions gzip-compressed (`gzip -n`); to extend one, resume from a plain copy (`zcat`).
Usage: python benchmarks/bench_multi_agent.py [--dataset hotpotqa|hotpotqa-amor] [--limit 60] [--seed 0] [--history notes|reading]
       [--out DIR] [--blend-shares 0.05,0.1,0.15 --record R.json --predictions R.predictions.jsonl]
"""

import argparse
import contextlib
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from cag.defaults import DEFAULT_BLEND
from cag.ingest.pipeline import IngestOptions, ingest
from cag.kv.generate import greedy_generate
from cag.modes import ContextRequest, get_mode
from cag.prompt import prompt_layout
from cag.server.config import ServeConfig
from cag.server.service import CagServer
from cag.server.turns import TurnRequest
from eval.datasets import load_examples, resolve_dataset, sample
from eval.metrics import bootstrap_difference_ci, bootstrap_ratio_ci, squad_scores
from serve_process import add_threads_option, apply_threads  # benchmarks/ is the script's folder

ROOT = Path(__file__).resolve().parents[1]
DATASETS = {"hotpotqa": "hotpotqa distractor dev sample",  # preset -> the record's "dataset"
            "hotpotqa-amor": "hotpotqa distractor amor sample (dev/test questions not in the dev sample)"}
HISTORIES = ("notes", "reading")  # what the session holds: A's notes, or the paragraphs A read and its notes
HISTORY_MODES = {"notes": ("translated", "direct", "none"),
                 # a long history: also translated-blend, at each --blend-shares share (the server's
                 # default share, 15%, by default)
                 "reading": ("translated", "translated-blend", "direct", "none")}
NOTE_REQUEST = ("Write down the facts from these paragraphs that are needed to answer the question "
                "\"{question}\". Write only the facts, briefly.")


def paragraphs_within(example: dict, tokenizer, budget: int) -> list[str]:
    """The example's paragraphs ("title\\ntext"), in order, as long as they fit in `budget` tokens."""
    kept, used = [], 0
    for doc in example["documents"]:
        text = f"{doc.get('title', '')}\n{doc['text']}".strip()
        n = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        if used + n > budget:
            break
        kept.append(text)
        used += n
    return kept


def notes_of_a(server: CagServer, agent: str, example: dict, budget: int, max_tokens: int) -> dict:
    """Agent A reads the paragraphs (its chat template, the paragraphs then the request) and writes notes."""
    def job(context):
        tokenizer = context.lm.tokenizer
        paragraphs = paragraphs_within(example, tokenizer, budget)
        content = "Paragraphs:\n" + "\n\n".join(paragraphs) + "\n\n" + NOTE_REQUEST.format(question=example["question"])
        ids = tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                            tokenize=True, return_dict=False)
        generation = greedy_generate(context.lm, ids, None, max_tokens)
        return {"notes": generation.text, "paragraphs": paragraphs, "prompt_tokens": len(ids),
                "note_tokens": len(generation.token_ids), "ttft_ms": round(generation.ttft_seconds * 1e3, 1),
                "total_ms": round(generation.total_seconds * 1e3, 1)}

    return server.pool.run(agent, job).value


def b_reads_paragraphs(server: CagServer, agent: str, question: str, paragraphs: list[str], max_tokens: int) -> dict:
    """The reference: B reads the paragraphs as text (cag's direct mode) and answers."""
    def job(context):
        lm = context.lm
        layout = prompt_layout(lm.tokenizer)
        start = time.perf_counter()
        q_ids = layout.question_ids(lm.tokenizer, question)
        request = ContextRequest(None, lm, layout, [SimpleNamespace(text=p) for p in paragraphs], q_ids)
        built = get_mode("direct").build(request)
        begin = time.perf_counter()
        generation = greedy_generate(lm, built.lead_ids + q_ids, built.context, max_tokens)
        return {"reply": generation.text, "ttft_ms": round((begin - start + generation.ttft_seconds) * 1e3, 1),
                "context_tokens": built.context_tokens}

    return server.pool.run(agent, job).value


def answer_line(text: str) -> str:
    return text.split("\n")[0].strip()


def blend_key(share: float) -> str:
    """A blend share's mode key in the record: the server's default share is plain translated-blend."""
    return "translated-blend" if share == DEFAULT_BLEND else f"translated-blend {share:g}"


def history_modes(args) -> tuple:
    """(key, mode, blend share) per mode B reads the history in, in the order they are asked."""
    modes = []
    for mode in HISTORY_MODES[args.history]:
        shares = args.blend_shares if mode == "translated-blend" else (DEFAULT_BLEND,)
        modes += [(blend_key(share) if mode == "translated-blend" else mode, mode, share) for share in shares]
    return tuple(modes)


def run_example(server: CagServer, args, example: dict) -> dict:
    a = notes_of_a(server, args.agent_a, example, args.budget, args.note_tokens)
    sid = server.create_session(args.agent_a)["id"]
    if args.history == "reading":  # what A was given to read joins the shared history before its notes
        server.add_record(sid, "user", "user", "Paragraphs:\n" + "\n\n".join(a["paragraphs"]))
    server.add_record(sid, "note", args.agent_a, a["notes"] or "(no notes)")
    modes = {}
    for key, mode, share in history_modes(args):
        turn = server.turn(sid, TurnRequest(example["question"], args.agent_b, mode, args.answer_tokens, remember=False,
                                            blend=share))
        history = turn["history"]
        modes[key] = {"reply": turn["reply"], "ttft_ms": turn["timings_ms"]["ttft"], "mode_used": history["mode"],
                       "history_tokens": history["tokens"], "history_chunks": history["chunks"],
                       "translate_ms": turn["timings_ms"].get("translate", 0.0)}
        if mode == "translated" and args.history == "reading":
            # B's next turn on the same history: the session stored the translations the first one made
            # its TTFT alone is kept: one token is enough
            again = server.turn(sid, TurnRequest(example["question"], args.agent_b, mode, 1, remember=False))
            modes[key]["ttft_again_ms"] = again["timings_ms"]["ttft"]
    if args.history == "notes":  # a long history holds the paragraphs: its direct mode is this reference
        modes["paragraphs"] = b_reads_paragraphs(server, args.agent_b, example["question"], a["paragraphs"],
                                                 args.answer_tokens)
    for record in modes.values():
        record["prediction"] = answer_line(record["reply"])
        record.update(squad_scores(record["prediction"], example["answers"]))
    return {"id": example["id"], "question": example["question"], "answers": example["answers"],
            "notes": a["notes"], "a": {k: v for k, v in a.items() if k not in ("notes", "paragraphs")},
            "paragraphs": len(a["paragraphs"]), "session": sid, "modes": modes}


def interval(values: list[float]) -> list[float]:
    mean, low, high = bootstrap_difference_ci(values, [0.0] * len(values))
    return [round(mean, 2), round(low, 2), round(high, 2)]


def summarize(rows: list[dict], keys: tuple) -> dict:
    """`keys`: the history modes' keys (history_modes), in order."""
    modes_all = keys + (("paragraphs",) if "paragraphs" in rows[0]["modes"] else ())
    f1 = {m: [r["modes"][m]["f1"] for r in rows] for m in modes_all}
    modes = {m: {"f1": interval(f1[m]), "em": round(statistics.mean(r["modes"][m]["em"] for r in rows), 2),
                 "ttft_median_ms": round(statistics.median(r["modes"][m]["ttft_ms"] for r in rows), 1),
                 "ttft_mean_ms": round(statistics.mean(r["modes"][m]["ttft_ms"] for r in rows), 1)}
             for m in modes_all}
    if all("ttft_again_ms" in r["modes"]["translated"] for r in rows):
        modes["translated"]["ttft_again_median_ms"] = round(statistics.median(r["modes"]["translated"]["ttft_again_ms"]
                                                                              for r in rows), 1)
    for m in keys:
        modes[m]["history_tokens_mean"] = round(statistics.mean(r["modes"][m]["history_tokens"] for r in rows), 1)
    if "paragraphs" in modes:
        modes["paragraphs"]["context_tokens_mean"] = round(statistics.mean(r["modes"]["paragraphs"]["context_tokens"]
                                                                           for r in rows), 1)
    blends = [m for m in keys if m.startswith("translated-blend")]
    pairs = [(a, b) for a, b in (("translated", "direct"), *((m, "direct") for m in blends), ("translated", "none"),
                                 ("direct", "none"), ("paragraphs", "translated"), ("paragraphs", "direct"))
             if a in f1 and b in f1]
    differences = {f"{a} - {b}": [round(x, 2) for x in bootstrap_difference_ci(f1[a], f1[b])] for a, b in pairs}
    ratios = [(a, b) for a, b in (("translated", "direct"), *((m, "direct") for m in blends), ("none", "direct"),
                                  ("translated", "paragraphs"), ("direct", "paragraphs")) if a in f1 and b in f1]
    retention = {f"{a} / {b}": [round(x, 3) for x in bootstrap_ratio_ci(f1[a], f1[b])] for a, b in ratios}
    ttft = {m: statistics.median(r["modes"][m]["ttft_ms"] for r in rows) for m in modes_all}
    if "ttft_again_median_ms" in modes["translated"]:
        ttft["translated, translations stored"] = modes["translated"]["ttft_again_median_ms"]
    a = {"note_tokens_mean": round(statistics.mean(r["a"]["note_tokens"] for r in rows), 1),
         "prompt_tokens_mean": round(statistics.mean(r["a"]["prompt_tokens"] for r in rows), 1),
         "ttft_median_ms": round(statistics.median(r["a"]["ttft_ms"] for r in rows), 1)}
    return {"n": len(rows), "modes": modes, "f1_differences_ci95": differences, "f1_retention_ci95": retention,
            "ttft_direct_over": {m: round(ttft["direct"] / t, 2) for m, t in ttft.items() if m != "direct"},
            "ttft_direct_over_paired_median": paired_ttft_ratios(rows, modes_all),
            "agent_a": a}


def paired_ttft_ratios(rows: list[dict], modes: tuple) -> dict:
    """Per mode, the median over questions of direct's TTFT over the mode's. Per question, direct and
    each mode ran back to back under the same load, so this median does not move when the machine's
    load changes between questions (the medians of each mode's TTFTs do)."""
    direct = [r["modes"]["direct"]["ttft_ms"] for r in rows]
    times = {m: [r["modes"][m]["ttft_ms"] for r in rows] for m in modes if m != "direct"}
    if all("ttft_again_ms" in r["modes"].get("translated", {}) for r in rows):
        times["translated, translations stored"] = [r["modes"]["translated"]["ttft_again_ms"] for r in rows]
    return {m: round(statistics.median(d / t for d, t in zip(direct, ts)), 2) for m, ts in times.items()}


def runs_so_far(record_path: Path, rows_before: int) -> list[dict]:
    """The runs an earlier record of this benchmark lists (a record written before runs were listed: its
    last run, with what it says of it), and one for questions answered by a run killed before it wrote
    the record (their rows are in the predictions; the run's time and load are lost)."""
    runs = []
    if record_path.is_file():
        earlier = json.loads(record_path.read_text())
        runs = earlier.get("runs") or [{"date": earlier["date"], "questions_up_to": rows_before,
                                        "seconds": earlier.get("seconds_this_run"),
                                        "load_average_1min": earlier.get("load_average_1min"),
                                        "note": "listed from a record without runs"}]
    if rows_before > (runs[-1]["questions_up_to"] if runs else 0):
        runs.append({"date": None, "questions_up_to": rows_before, "seconds": None, "load_average_1min": None,
                     "note": "killed before it wrote the record: its time and load were not recorded"})
    return runs


@contextlib.contextmanager
def case_study_server(args):
    """A warm server over an empty main store (the sessions live under it) with A's encoder and B,
    closed and removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        (Path(tmp) / "empty").mkdir()
        ingest([Path(tmp) / "empty"], store, IngestOptions(encoder=args.agent_a, dtype=args.dtype))
        server = CagServer(ServeConfig(store=store, models=(args.agent_b,), max_loaded=2, dtype=args.dtype,
                                       max_new_tokens=max(args.note_tokens, args.answer_tokens)))
        server.warm_up()
        try:
            yield server
        finally:
            server.close()


def answer_questions(args, examples: list[dict], done: dict, load: list[float], start: float) -> None:
    """Answer the examples not in `done` (appending each row to the predictions as it is made), until
    `--max-minutes`."""
    with case_study_server(args) as server, open(args.predictions, "a", encoding="utf-8") as out:
        for i, example in enumerate(examples, 1):
            if example["id"] in done:
                continue
            if args.max_minutes and time.perf_counter() - start > args.max_minutes * 60:
                print(f"--max-minutes {args.max_minutes} reached after {len(done)} questions", flush=True)
                break
            row = run_example(server, args, example)
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            done[row["id"]] = row
            print(f"{i}/{len(examples)} " + " ".join(f"{m} {v['f1']:.0f}" for m, v in row["modes"].items()),
                  flush=True)
            load.append(os.getloadavg()[0])


def shares(text: str) -> tuple:
    values = tuple(float(x) for x in text.split(","))
    if any(not 0.0 < v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"shares between 0 and 1, comma-separated, not {text!r}")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=DATASETS, default="hotpotqa",
                        help="hotpotqa: the dev sample (293 questions); hotpotqa-amor: 241 more dev/test "
                             "questions (data/hotpotqa_distractor/SOURCE.md); the default record's name "
                             "takes the preset's name")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=2048, help="paragraph tokens agent A reads")
    parser.add_argument("--note-tokens", type=int, default=64)
    parser.add_argument("--answer-tokens", type=int, default=32)
    parser.add_argument("--agent-a", default="smollm2-135m")
    parser.add_argument("--agent-b", default="qwen2.5-coder-0.5b")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="take no new question after this long; the record covers the questions done "
                             "(the first ones of the seed's order)")
    parser.add_argument("--history", choices=HISTORIES, default="notes",
                        help="the shared history B reads: A's notes, or the paragraphs A read and its notes")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "benchmarks",
                        help="folder of the record and its predictions (default runs/benchmarks)")
    parser.add_argument("--record", type=Path, default=None,
                        help="default: OUT/multi_agent-hotpotqa.json (-reading with --history reading)")
    parser.add_argument("--predictions", type=Path, default=None,
                        help="default: OUT/ the record's name .predictions.jsonl")
    parser.add_argument("--blend-shares", type=shares, default=(DEFAULT_BLEND,),
                        help="with --history reading: the shares of the history B's translated-blend turns "
                             "recompute, comma-separated (each one turn; default: the server's, "
                             f"{DEFAULT_BLEND:g})")
    add_threads_option(parser)
    args = parser.parse_args()
    stem = f"multi_agent-{args.dataset}" + ("" if args.history == "notes" else f"-{args.history}")
    args.record = args.record or args.out / f"{stem}.json"
    args.predictions = args.predictions or args.out / f"{stem}.predictions.jsonl"
    if args.predictions.name.endswith(".gz"):  # appended per question: plain text only
        raise SystemExit(f"{args.predictions} is compressed: resume from a plain copy "
                         f"(zcat it > {args.predictions.name[:-3]}) and give that as --predictions")
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.predictions.parent.mkdir(parents=True, exist_ok=True)
    apply_threads(args)
    path, task = resolve_dataset(args.dataset, None)
    examples = sample(load_examples(path, task), task, args.limit, args.seed)
    done = {}
    if args.predictions.is_file():
        done = {r["id"]: r for r in map(json.loads, args.predictions.read_text().splitlines())}
    keys = tuple(key for key, _, _ in history_modes(args))
    asked = set(next(iter(done.values()))["modes"]) if done else set(keys)
    if not set(keys) <= asked:  # a resumed run must ask what the earlier questions were asked
        raise SystemExit(f"{args.predictions} holds answers in {sorted(asked)}, not {sorted(set(keys) - asked)}: "
                         "give another --predictions (and --record) for other --blend-shares")
    load = [os.getloadavg()[0]]
    start = time.perf_counter()
    todo = [ex for ex in examples if ex["id"] not in done]
    runs = runs_so_far(args.record, len(done))
    if todo:
        answer_questions(args, examples, done, load, start)
    else:  # every question is answered: the record is summarized again, no model is loaded
        print(f"all {len(examples)} questions are answered in {args.predictions}", flush=True)
    rows = [done[ex["id"]] for ex in itertools.takewhile(lambda ex: ex["id"] in done, examples)]
    if todo:
        runs.append({"date": time.strftime("%Y-%m-%d"), "questions_up_to": len(rows),
                     "seconds": round(time.perf_counter() - start, 1),
                     "load_average_1min": {"min": min(load), "max": max(load)}})
    first = 0
    for run in runs:  # each run's own questions: their TTFTs were measured under that run's load
        part = rows[first:run["questions_up_to"]]
        if part:
            run["ttft_direct_median_ms"] = round(statistics.median(r["modes"]["direct"]["ttft_ms"] for r in part), 1)
            run["ttft_direct_over_paired_median"] = paired_ttft_ratios(part, keys)
        first = run["questions_up_to"]
    made = {"date": time.strftime("%Y-%m-%d"), "threads": torch.get_num_threads(),
            "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    if not todo and args.record.is_file():  # summarized again: the answers were made as the record says
        earlier = json.loads(args.record.read_text())
        made = {k: earlier.get(k, v) for k, v in made.items()}
    record = {"date": made["date"], "dataset": DATASETS[args.dataset], "seed": args.seed,
              "config": made["config"], "threads": made["threads"], "device": "cpu",
              "runs": runs, "predictions": args.predictions.name, **summarize(rows, keys)}
    args.record.write_text(json.dumps(record, indent=2))
    print(json.dumps(record["modes"], indent=1), json.dumps(record["f1_differences_ci95"]),
          json.dumps(record["f1_retention_ci95"]), f"TTFT direct / each: {json.dumps(record['ttft_direct_over'])}",
          sep="\n")


if __name__ == "__main__":
    main()
