"""FAISS indexes at scale, side by side in one run: exact Flat against IVF (Flat, SQ8, PQ codes)
and HNSW over synthetic chunk embeddings shaped like sentence embeddings (unit norm, inner
product; `synthetic_embeddings.py`), searched with held-out queries drawn the same way.

Per factory, built the way the store builds it (`indexes.VectorIndex`: IndexIDMap2 over int64
ids, training on its fixed sample): build seconds (training included, and apart), index bytes (its
serialized size, what `index.faiss` takes), recall@k against exact search, and query latency at
the search effort that first reaches --target-recall (IVF nprobe, HNSW efSearch, swept upwards):
one query at a time (p50/p95 wall-clock ms, and the thread's CPU ms, which other processes on the
machine do not inflate) and all queries in one batch (queries/s). The recall of the store's own
default effort (`indexes.search_effort`) is measured too. The record names the factory
`--faiss-factory auto` picks for this size (`indexes.factory.factory_for`). GPU rows are measured
where faiss-gpu finds GPUs, and recorded as skipped otherwise.

The record (--out, default runs/benchmarks/faiss_scale.json; `--out records/faiss_scale.json` adds
to the repository's) keeps one run per (n, dim): a run at another size is added beside the others.
Usage:
    python benchmarks/bench_faiss_scale.py --n 1000000 [--queries 1000] [--factories Flat HNSW32 ...]
"""

import argparse
import gc
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's packages, whatever is installed

import faiss  # noqa: E402

from indexes.factory import factory_for  # noqa: E402
from indexes.faiss_index import VectorIndex  # noqa: E402
from indexes.gpu import gpu_count, search_device  # noqa: E402
from synthetic_embeddings import EmbeddingShape, split_queries, synthetic_embeddings  # noqa: E402

NPROBES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
EF_SEARCHES = (16, 32, 64, 128, 256, 512)


def default_factories(n: int) -> list[str]:
    """Flat; IVF with about 4 sqrt(n) and sqrt(n) lists (Flat codes), sqrt(n) lists with PQ48 and
    SQ8 codes; HNSW32 (in the order a run cut short loses least)."""
    lists = 1 << max(2, round(np.log2(np.sqrt(n))))
    return ["Flat", f"IVF{4 * lists},Flat", "HNSW32", f"IVF{lists},PQ48", f"IVF{lists},Flat", f"IVF{lists},SQ8"]


def recall_at(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean share of each query's true top-k among its found top-k."""
    return float(np.mean([len(np.intersect1d(f, t)) / truth.shape[1] for f, t in zip(found, truth)]))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def index_bytes(index: VectorIndex) -> int:
    """The serialized size, written to a temporary file (no second copy in memory)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "index.faiss")
        faiss.write_index(index.index, path)
        return os.path.getsize(path)


def batched(index: VectorIndex, queries: np.ndarray, k: int) -> tuple[np.ndarray, float, float]:
    """(ids (q, k), queries/s wall-clock, CPU ms per query) for all queries in one call."""
    cpu, start = cpu_seconds(), time.perf_counter()
    _, ids = index.search(queries, k)
    wall = time.perf_counter() - start
    return ids, len(queries) / wall, 1000 * (cpu_seconds() - cpu) / len(queries)


def single(index: VectorIndex, queries: np.ndarray, k: int) -> dict:
    """Latency of one query at a time: wall-clock and this thread's CPU, p50 and p95 in ms."""
    wall, cpu = [], []
    for row in queries:
        c, start = time.thread_time(), time.perf_counter()
        index.search(row[None], k)
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - c)
    ms = lambda values, q: round(1000 * float(np.percentile(values, q)), 3)  # noqa: E731
    return {"p50_ms": ms(wall, 50), "p95_ms": ms(wall, 95), "cpu_p50_ms": ms(cpu, 50), "cpu_p95_ms": ms(cpu, 95)}


def sweep(index: VectorIndex, queries: np.ndarray, truth: np.ndarray, k: int, target: float) -> tuple[dict, list]:
    """(the search params reaching `target` recall, or the best tried; every point tried)."""
    if "nprobe" in index.search_params:
        nlist = faiss.extract_index_ivf(index.index).nlist
        name, values = "nprobe", [v for v in NPROBES if v <= nlist]
    elif "efSearch" in index.search_params:
        name, values = "efSearch", list(EF_SEARCHES)
    else:
        return {}, []
    curve = []
    for value in values:
        index.set_search(**{name: value})
        ids, qps, _ = batched(index, queries, k)
        curve.append({name: value, "recall": round(recall_at(ids, truth), 4), "batched_qps": round(qps, 1)})
        if curve[-1]["recall"] >= target:
            break
    best = next((p for p in curve if p["recall"] >= target), max(curve, key=lambda p: p["recall"]))
    return {name: best[name]}, curve


def measure(factory: str, device: str, data: np.ndarray, queries: np.ndarray, truth: np.ndarray,
            args) -> dict:
    ids = np.arange(len(data), dtype=np.int64)
    cpu, start = cpu_seconds(), time.perf_counter()
    index = VectorIndex.build(factory, data.shape[1], "synthetic", ids, data, generation=0, gpu=device == "gpu")
    build_s, build_cpu_s = time.perf_counter() - start, cpu_seconds() - cpu
    on = search_device(index.index, gpu_count()) if device == "gpu" else "cpu"
    row = {"factory": factory, "device": on, "build_s": round(build_s, 2), "build_cpu_s": round(build_cpu_s, 2),
           "train_s": round(index.build_stats.train_s, 2), "add_s": round(index.build_stats.add_s, 2),
           "train_vectors": index.build_stats.train_vectors, "bytes": index_bytes(index),
           "store_default_params": dict(index.search_params)}
    if device != on:
        return {**row, "skipped": "no GPU version of this index type"}
    default_ids, _, _ = batched(index, queries, args.k)
    row["store_default_recall"] = round(recall_at(default_ids, truth), 4)
    params, row["sweep"] = sweep(index, queries, truth, args.k, args.target_recall)
    index.set_search(**params)
    row["params"] = params
    batched(index, queries[:50], args.k)  # warm-up
    found, qps, cpu_ms = batched(index, queries, args.k)
    row.update(recall=round(recall_at(found, truth), 4), target_met=recall_at(found, truth) >= args.target_recall,
               batched_qps=round(qps, 1), batched_cpu_ms_per_query=round(cpu_ms, 3),
               single=single(index, queries[:args.single_queries], args.k),
               load_average_after=[round(x, 2) for x in os.getloadavg()])
    del index
    gc.collect()
    return row


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    return {"cpu": model, "cores": os.cpu_count(), "faiss_threads": faiss.omp_get_max_threads(),
            "gpus": gpu_count(), "faiss": faiss.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def print_table(run: dict) -> None:
    print(f"\nn={run['config']['n']:,} dim={run['config']['dim']} queries={run['config']['queries']} "
          f"k={run['config']['k']} target recall={run['config']['target_recall']}")
    print(f"{'factory':22} {'dev':4} {'build s':>8} {'train s':>8} {'MB':>8} {'params':>14} {'recall':>7} "
          f"{'p50 ms':>8} {'p95 ms':>8} {'cpu p50':>8} {'batch q/s':>10} {'default':>14}")
    for r in run["rows"]:
        if "skipped" in r:
            print(f"{r['factory']:22} {r['device']:4} skipped: {r['skipped']}")
            continue
        params = ",".join(f"{k}={v}" for k, v in r["params"].items()) or "exact"
        default = ",".join(f"{k}={v}" for k, v in r["store_default_params"].items()) or "exact"
        print(f"{r['factory']:22} {r['device']:4} {r['build_s']:>8} {r['train_s']:>8} {r['bytes'] / 1e6:>8.1f} "
              f"{params:>14} {r['recall']:>7} {r['single']['p50_ms']:>8} {r['single']['p95_ms']:>8} "
              f"{r['single']['cpu_p50_ms']:>8} {r['batched_qps']:>10} "
              f"{default + ':' + str(r['store_default_recall']):>14}")
    for note in run.get("skipped", []):
        print(f"skipped: {note}")


def save(run: dict, out: Path) -> None:
    """Put `run` into the record at `out`, replacing an earlier run at the same (n, dim)."""
    record = json.loads(out.read_text()) if out.is_file() else {"runs": []}
    key = (run["config"]["n"], run["config"]["dim"])
    record["runs"] = [r for r in record["runs"] if (r["config"]["n"], r["config"]["dim"]) != key]
    record["runs"] = sorted(record["runs"] + [run], key=lambda r: (r["config"]["n"], r["config"]["dim"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000, help="database vectors")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000, help="held-out queries (recall, batched search)")
    parser.add_argument("--single-queries", type=int, default=1000, help="of which searched one at a time")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--target-recall", type=float, default=0.95)
    parser.add_argument("--factories", nargs="+", help="FAISS factory strings (default: sized to --n)")
    parser.add_argument("--devices", nargs="+", default=["cpu", "gpu"], choices=["cpu", "gpu"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "benchmarks" / "faiss_scale.json")
    args = parser.parse_args()
    factories = args.factories or default_factories(args.n)
    cpu0, load0 = cpu_seconds(), os.getloadavg()
    start = time.perf_counter()
    data, queries = split_queries(synthetic_embeddings(args.n + args.queries, args.dim, seed=args.seed), args.queries)
    data_s = time.perf_counter() - start
    start = time.perf_counter()
    _, truth = faiss.knn(queries, data, args.k, metric=faiss.METRIC_INNER_PRODUCT)
    truth_s = time.perf_counter() - start
    print(f"data {data_s:.1f} s, exact neighbours {truth_s:.1f} s", flush=True)
    run = {"config": {"n": args.n, "dim": args.dim, "queries": args.queries, "single_queries": args.single_queries,
                      "k": args.k, "target_recall": args.target_recall, "seed": args.seed,
                      "data": "synthetic_embeddings.EmbeddingShape defaults", "shape": EmbeddingShape().__dict__},
           "auto": factory_for(args.n), "machine": machine(), "date": time.strftime("%Y-%m-%d"), "rows": [], "skipped": [],
           "complete": False}
    devices = list(args.devices)
    if "gpu" in devices and gpu_count() == 0:
        devices.remove("gpu")
        run["skipped"].append("GPU rows: faiss.get_num_gpus() == 0 (faiss-cpu, or no CUDA device)")
    for device in devices:
        for factory in factories:
            row = measure(factory, device, data, queries, truth, args)
            run["rows"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "sweep"}), flush=True)
            run["load_average"] = {"start": [round(x, 2) for x in load0],
                                   "end": [round(x, 2) for x in os.getloadavg()]}
            run["process"] = {"cpu_s": round(cpu_seconds() - cpu0, 1), "peak_rss_gb":
                              round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, 2),
                              "data_s": round(data_s, 1), "exact_neighbours_s": round(truth_s, 1)}
            save(run, args.out)  # after every row: a run cut short keeps what it measured
    run["complete"] = True
    save(run, args.out)
    print_table(run)
    print(f"process CPU {run['process']['cpu_s']} s, peak RSS {run['process']['peak_rss_gb']} GB; saved {args.out}")


if __name__ == "__main__":
    main()
