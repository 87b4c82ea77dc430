"""Ingest throughput on one machine: the local ingest, then a local Ray cluster with 1 and 2 workers.

The corpus: samples/corpus plus the first WikiText-2 validation articles (one .txt per article) up
to --chars characters; the encoder smollm2-135m. Each configuration ingests into a fresh store;
the Ray runs share one local cluster (its start is timed apart). Reported per run: seconds (the
ingest call, workers' start and model loads included), tokens prefilled, tokens/s over the whole
call, and tokens/s while prefilling (from the first finished batch to the last). Then the stores are
compared: catalog rows, cache files by key, the largest difference in any cached K/V value, and the
answers of `ask --mode native` (the encoder answering from its own caches) to questions on the
sample articles.
Writes runs/benchmarks/ray_ingest-ENCODER.json (or --out). Usage (a timing: serialized with other heavy jobs):
    flock /work/heavy.lock nice -n 5 python benchmarks/bench_ray_ingest.py [--chars 30000] [--encoder smollm2-135m]
"""

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import torch

from cag.ask import ask
from cag.distributed.ingest import ray_ingest
from cag.distributed.options import RayOptions
from cag.ingest.pipeline import PREFILL_TASK, IngestOptions, ingest
from cag.kv.serde import load_chunk_cache
from cag.progress import Progress
from cag.store import Store

ROOT = Path(__file__).resolve().parents[1]
WIKI = ROOT / "data" / "corpus" / "wikitext2" / "valid.jsonl"
QUESTIONS = ["How long can the European lobster grow?", "How tall is Mount Elbert?",
             "When was Upsilon Andromedae b discovered?", "How many people did Hurricane Beatriz kill?"]
CONFIGS = ((1, 1), (2, 1), (1, 2))  # (workers, CPUs each)


class PrefillClock(Progress):
    """Times of the prefill task's finished batches, with their tokens."""

    def __init__(self):
        self.batches = []

    def advance(self, task: str, n: int = 1, **info) -> None:
        if task == PREFILL_TASK:
            self.batches.append((time.perf_counter(), info.get("tokens", 0)))

    def steady_rate(self) -> float | None:
        if len(self.batches) < 2:
            return None
        (t0, _), (t1, _) = self.batches[0], self.batches[-1]
        return sum(tokens for _, tokens in self.batches[1:]) / (t1 - t0)


def build_corpus(folder: Path, chars: int) -> dict:
    shutil.copytree(ROOT / "samples" / "corpus", folder)
    articles, size = {}, 0
    for line in WIKI.open(encoding="utf-8"):
        row = json.loads(line)
        if row["title"] not in articles and size >= chars:
            break
        articles.setdefault(row["title"], []).append(row["text"])
        size += len(row["text"])
    for i, (title, paragraphs) in enumerate(articles.items()):
        (folder / f"wiki-{i:03d}.txt").write_text(title + "\n\n" + "\n\n".join(paragraphs), encoding="utf-8")
    return {"files": len(list(folder.iterdir())), "wikitext2_articles": len(articles),
            "chars": sum(len(p.read_text(encoding="utf-8")) for p in folder.iterdir())}


def timed(label: str, run) -> dict:
    clock, load = PrefillClock(), os.getloadavg()[0]
    start = time.perf_counter()
    report = run(clock)
    seconds = time.perf_counter() - start
    steady = clock.steady_rate()
    row = {"run": label, "seconds": round(seconds, 1), "tokens_prefilled": report.tokens_prefilled,
           "caches_written": report.caches_written, "tokens_per_s": round(report.tokens_prefilled / seconds, 1),
           "prefill_tokens_per_s": round(steady, 1) if steady else None,
           "load_average_1min_before": round(load, 2), "load_average_1min_after": round(os.getloadavg()[0], 2)}
    print(json.dumps(row), flush=True)
    return row


def compare(local: Path, other: Path, encoder: str) -> dict:
    a, b = Store.open(local), Store.open(other)
    rows_equal = a.catalog.all_chunks() == b.catalog.all_chunks()
    files = sorted(p.relative_to(local) for p in (local / "caches").rglob("*.safetensors"))
    same_keys = files == sorted(p.relative_to(other) for p in (other / "caches").rglob("*.safetensors"))
    worst, identical = 0.0, 0
    for name in files:
        x, y = load_chunk_cache(local / name), load_chunk_cache(other / name)
        diffs = [float((s.float() - t.float()).abs().max()) for s, t in zip(x.keys + x.values, y.keys + y.values)]
        worst, identical = max(worst, *diffs), identical + (max(diffs) == 0.0)
    answers = []
    for question in QUESTIONS:
        got = [ask(question, folder, encoder, mode="native", max_new_tokens=16).answer for folder in (local, other)]
        answers.append({"question": question, "local": got[0], "ray": got[1], "equal": got[0] == got[1]})
    a.close(), b.close()
    return {"rows_equal": rows_equal, "cache_keys_equal": same_keys, "cache_files": len(files),
            "caches_with_identical_tensors": identical, "max_abs_kv_difference": worst, "native_answers": answers}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=30_000)
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default runs/benchmarks/ray_ingest-ENCODER.json)")
    args = parser.parse_args()
    out = args.out or ROOT / "runs" / "benchmarks" / f"ray_ingest-{args.encoder}.json"
    import ray

    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    corpus = build_corpus(work / "corpus", args.chars)
    options = IngestOptions(encoder=args.encoder, batch_size=args.batch_size)
    runs = [timed(f"local ({torch.get_num_threads()} torch threads)",
                  lambda p: ingest([work / "corpus"], work / "local", options, p))]
    start = time.perf_counter()
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING")
    cluster_seconds = round(time.perf_counter() - start, 1)
    for workers, cpus in CONFIGS:
        name = f"ray-{workers}x{cpus}"
        runs.append(timed(f"ray, {workers} worker(s) x {cpus} CPU(s)",
                          lambda p: ray_ingest([work / "corpus"], work / name, options,
                                               RayOptions(workers=workers, cpus_per_worker=cpus), p)))
    ray.shutdown()
    checks = {f"ray-{w}x{c}": compare(work / "local", work / f"ray-{w}x{c}", args.encoder) for w, c in CONFIGS}
    record = {"what": "cag ingest throughput: local vs a local Ray cluster with 1 and 2 workers",
              "command": f"nice -n {os.nice(0)} python benchmarks/bench_ray_ingest.py " + " ".join(
                  f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                          "ray": ray.__version__, "note": "shared with other jobs: see the load averages"},
              "encoder": args.encoder, "batch_size": args.batch_size, "corpus": corpus,
              "ray_cluster_start_seconds": cluster_seconds, "runs": runs, "same_store_as_local": checks}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(checks, indent=1))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
