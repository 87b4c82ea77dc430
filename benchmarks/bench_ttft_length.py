"""TTFT against context length, every mode side by side, in one run.

One long context is built from the packaged WikiText-2 validation text (paragraphs in order, as one
document), ingested once (the encoder's caches and the generator's own). For each length (default
1k, 2k, 4k, 8k, 16k and 32k generator tokens) the first chunks of that document up to the length
are the context, and each mode answers one question after it (one new token: the time to the first
token). Each (length, mode) runs in a fresh process; the models are loaded and warmed before the
clock starts, as `cag ask` reports warm-up apart (a cached mode warms up on the whole context, as a
process that has answered before; direct on one chunk), and the peak RSS is the answer's own (Linux's
peak is reset after the warm-up: weights held included, their conversion at load not). Every cache
file is read once before the clock starts, so that each mode reads from the page cache (a cold
read adds the disk's time: about 12 KB per token for qwen2.5-coder-0.5b in fp16).

    direct                 the generator prefills the text (read 1,024 tokens per forward)
    native                 its own stored chunk caches, assembled
    translated (translating)  the encoder's caches translated during the ask (nothing stored)
    translated (stored)    the same translations, stored by a first ask, read back
    none                   the question alone: the physical floor of any cached mode

Writes OUT (default runs/benchmarks/ttft_length-GENERATOR.json) and a plot beside it (.png).
Usage: python benchmarks/bench_ttft_length.py [--generator qwen2.5-coder-0.5b] [--dtype bf16]
       [--lengths 1024,2048,4096,8192,16384,32768] [--modes direct,native,translated,none] [--out PATH]
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTION = "What is this text about?"
SOURCE = ROOT / "data" / "corpus" / "wikitext2" / "valid.jsonl"


def build_store(folder: Path, encoder: str, generator: str, dtype: str, tokens: int) -> dict:
    """One document of WikiText-2 validation paragraphs, about `tokens` encoder tokens and a bit
    more, ingested with the encoder's caches and the generator's own; ingest figures."""
    from cag.ingest.pipeline import IngestOptions, ingest

    paragraphs = [json.loads(line)["text"] for line in SOURCE.read_text(encoding="utf-8").splitlines() if line.strip()]
    text, words = [], 0
    for paragraph in paragraphs:  # about 1.3 tokens per word: stop a little past the longest length
        text.append(paragraph)
        words += len(paragraph.split())
        if words * 1.3 > tokens * 1.15:
            break
    document = folder / "document.txt"
    document.write_text("\n\n".join(text), encoding="utf-8")
    started = time.perf_counter()
    report = ingest([document], folder / "store", IngestOptions(encoder=encoder, also_for=(generator,),
                                                                 also_for_dtype=dtype))
    return {"encoder_tokens": report.tokens_total, "chunks": report.chunks_total,
            "ingest_seconds": round(time.perf_counter() - started, 1)}


def measure_one(store: Path, generator: str, dtype: str, mode: str, length: int) -> dict:
    """In this (fresh) process: TTFT of `mode` over the document's first chunks up to `length`
    generator tokens, after a warm-up; and the process's peak RSS."""
    import torch

    from cag.kv.generate import greedy_generate
    from cag.models import load_model
    from cag.modes import ContextRequest, ModeOptions, get_mode
    from cag.prompt import prompt_layout
    from cag.store import Store
    from cag.store.spaces import Role

    opened = Store.open(store)
    lm = load_model(generator, dtype)
    layout = prompt_layout(lm.tokenizer)
    rows, used = [], 0
    for row in sorted(opened.catalog.all_chunks(), key=lambda r: r.idx):
        size = len(lm.tokenizer(row.text, add_special_tokens=False)["input_ids"])
        if used + size > length:
            break
        rows.append(row)
        used += size
    name, stored = (mode.split(":") + [""])[:2]
    if name == "translated" and stored != "stored":  # translating: nothing a stored row kept is read back
        with opened.lock():
            for space in opened.spaces():
                if space.role is Role.TRANSLATED:
                    opened.remove_space(space)
    built_mode = get_mode(name)
    options = ModeOptions(keep_translated=stored == "stored")
    for path in opened.caches_folder.rglob("*.safetensors"):  # every mode reads a warm page cache
        path.read_bytes()
    q_ids = layout.question_ids(lm.tokenizer, QUESTION)
    built_mode.prepare(opened, lm)
    # warm-up: the first forward pages the weights in; a stored translation is made here. A cached
    # mode warms up on the whole context, as a serving process that answered before: the first
    # build of a 16k-token context in a process also pays for touching its fresh memory (1.5-3 s
    # more); direct warms up on one chunk (its prefill dwarfs that)
    warm_rows = rows[:1] if name == "direct" else rows
    warm = built_mode.build(ContextRequest(opened, lm, layout, warm_rows, q_ids, options))
    greedy_generate(lm, warm.lead_ids + q_ids, warm.context, 1)
    del warm
    reset_peak_rss()  # the answer's own peak below, not the model load's (converting weights peaks higher)
    with torch.no_grad():
        start = time.perf_counter()
        built = built_mode.build(ContextRequest(opened, lm, layout, rows, q_ids, options))
        generation = greedy_generate(lm, built.lead_ids + q_ids, built.context, 1)
        ttft = time.perf_counter() - start - (generation.total_seconds - generation.ttft_seconds)
    opened.close()
    return {"mode": mode, "length": length, "context_tokens": used, "ttft_ms": round(ttft * 1e3, 1),
            "steps_ms": {k: round(v, 1) for k, v in built.timings.items()},
            "answer_peak_rss_mb": round(peak_rss_kb() / 1024, 1),
            "process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def reset_peak_rss() -> None:
    """Linux: the process's peak resident set (VmHWM) starts again from what it holds now."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_rss_kb() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def measure_in_child(args, store: Path, mode: str, length: int) -> dict:
    """measure_one in a fresh process; its error (or the time limit) recorded as the row."""
    command = [sys.executable, __file__, "--generator", args.generator, "--dtype", args.dtype,
               "--one", str(store), mode, str(length)]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "length": length, "error": f"over the {args.timeout} s limit"}
    if run.returncode != 0:
        return {"mode": mode, "length": length, "error": run.stderr.strip().splitlines()[-1:]}
    return json.loads(run.stdout.strip().splitlines()[-1])


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode in result["modes"]:
        points = sorted((r["context_tokens"], r["ttft_ms"]) for r in result["rows"] if r["mode"] == mode and "ttft_ms" in r)
        if points:
            ax.plot(*zip(*points), marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context tokens (generator)")
    ax.set_ylabel("TTFT (ms)")
    ax.set_title(f"{result['generator']} ({result['dtype']}), TTFT against context length")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--dtype", default="bf16", help="the generator's compute dtype (and its native caches')")
    parser.add_argument("--lengths", default="1024,2048,4096,8192,16384,32768")
    parser.add_argument("--modes", default="direct,native,translated:translating,translated:stored,none")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds one (length, mode) may take")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the document and its store, kept (an interrupted run's ingest is reused); "
                        "default: a temporary folder")
    parser.add_argument("--one", nargs=3, metavar=("STORE", "MODE", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        store, mode, length = args.one
        print(json.dumps(measure_one(Path(store), args.generator, args.dtype, mode, int(length))))
        return
    lengths = [int(x) for x in args.lengths.split(",")]
    modes = args.modes.split(",")
    out = args.out or ROOT / "runs" / "benchmarks" / f"ttft_length-{args.generator}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"generator": args.generator, "encoder": args.encoder, "dtype": args.dtype, "question": QUESTION,
              "modes": modes, "rows": []}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.work or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        result["store"] = build_store(Path(tmp), args.encoder, args.generator, args.dtype, max(lengths))
        print(json.dumps(result["store"]), flush=True)
        for length in lengths:
            for mode in modes:  # every mode at one length before the next length: noise hits all alike
                row = measure_in_child(args, Path(tmp) / "store", mode, length)
                result["rows"].append(row)
                print(json.dumps(row), flush=True)
                out.write_text(json.dumps(result, indent=2))  # what is measured so far survives a kill
    direct = {r["length"]: r["ttft_ms"] for r in result["rows"] if r["mode"] == "direct" and "ttft_ms" in r}
    for row in result["rows"]:
        if "ttft_ms" in row and row["length"] in direct:
            row["speedup_vs_direct"] = round(direct[row["length"]] / row["ttft_ms"], 1)
    out.write_text(json.dumps(result, indent=2))
    plot(result, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
