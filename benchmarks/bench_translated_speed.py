"""Speed of translated mode at about 2,048 context tokens, one run, side by side:

- TTFT of every ask mode: `translated` (caches translated during the ask, and again with the
  translated caches already stored), `single`, `ridge` and `translated-window` (translating),
  `native`, `none` and `direct`, and the blend modes at each `--blends` share (`translated-blend@F`,
  translating and with the translations stored; `native-blend@F`) with each `--selects` token
  selection (labelled `...@F/SELECTION`, but `...@F` for the deviation selection of the early
  records; selections other than query come from experiments/blend_selections.py), medians over
  alternating repeats, and their ratios (the x axis of the quality/speed frontier,
  benchmarks/plot_frontier.py);
- translation cost: translating the retrieved chunks against the generator prefilling the same
  tokens (target: 5% or less);
- with --one-shot, the same question asked by one `cag ask --json` process per mode on the same
  store (models loaded and warmed up outside TTFT, reported apart as warm-up): direct, native,
  translated (translating), then translated again (stored).
- with `--readers`: the reader modes (native+reader, translated+reader, translated-blend+reader at
  each share) with the installed reader adapters (`cag train-reader`), to show what reading the
  question and answer through a LoRA costs.

Usage: python benchmarks/bench_translated_speed.py [--encoder smollm2-135m] [--generator qwen2.5-coder-0.5b]
       [--modes direct,native,...] [--dtype fp32] [--repeats 3] [--one-shot]
Needs an installed MoT translator from the encoder to the generator (`cag train`), and the single
and ridge ones when --modes names them (the default does): `make translators-extra` installs the
recorded ones (records/translators/); without them, leave single and ridge out of --modes.
Writes runs/benchmarks/translated_speed-GENERATOR.json (or --out).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from cag.ask import ask
from cag.defaults import DEFAULT_BLEND, DEFAULT_BLEND_SELECT
from cag.ingest.pipeline import IngestOptions, ingest
from cag.kv.chunk_cache import run_prefill
from cag.kv.serde import load_chunk_cache
from cag.modes import get_mode
from cag.models import load_model
from cag.prompt import prompt_layout
from cag.retrieval import Retriever
from cag.store import Store
from mot.contexts import encoder_space, translator_for
from cag.translations import TranslationId
from mot.registry import translator_dirs
from mot.translator import translate_chunk

from bench_ask import _top_k_for as top_k_for  # noqa: E402  (benchmarks/ is the script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import blend_selections  # noqa: E402  (the selections measured worse than query, for comparison)
QUESTION = "When did Hurricane Beatriz form and what damage did it cause?"
MODES = ("direct", "native", "none", "translated", "single", "ridge", "translated-window", "translated-blend",
         "native-blend")


def labels_for(modes: list, blends: list, selects: list) -> list:
    """The measured settings, in the order they alternate: translated twice (translating, stored),
    translated-blend twice per share and selection, native-blend once per share and selection."""
    tag = lambda f, s: f"{f}" if s == "deviation" else f"{f}/{s}"  # noqa: E731  (as plot_frontier names them)
    labels = []
    for mode in modes:
        if mode == "translated":
            labels += ["translated (translating)", "translated (stored)"]
        elif mode in ("single", "ridge", "translated-window"):
            labels.append(f"{mode} (translating)")
        elif mode == "translated-blend":  # stored: the translations the one before kept
            labels += [f"{mode}@{tag(f, s)} ({how})" for s in selects for f in blends for how in ("translating", "stored")]
        elif mode == "native-blend":
            labels += [f"{mode}@{tag(f, s)}" for s in selects for f in blends]
        else:
            labels.append(mode)
    return labels


def check_translators(modes: list, encoder: str, generator: str) -> None:
    """Before any model work: every translator the modes read is installed under its usual name
    (the registry still checks fingerprints when a mode reads it)."""
    for kind in dict.fromkeys(get_mode(m).translator_kind for m in modes if get_mode(m).translator_kind):
        name = f"{TranslationId(encoder, generator, kind).file_stem}.json"
        if not any((folder / name).is_file() for folder in translator_dirs()):
            raise SystemExit(f"no {kind} translator {encoder} -> {generator} in {' or '.join(map(str, translator_dirs()))}: "
                             f"`make translators-extra` installs the recorded ones, `cag train --kind {kind}` trains "
                             f"one, or leave the modes reading it out of --modes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blends", default="0.15,0.3,0.5", help="shares of context tokens recomputed")
    parser.add_argument("--selects", default="query", help="blend token selections (query, or those of "
                        "experiments/blend_selections.py)")
    parser.add_argument("--modes", default=",".join(MODES), help="modes measured (default: all)")
    parser.add_argument("--dtype", default="fp32", help="the generator's compute dtype (as cag eval's --dtype)")
    parser.add_argument("--one-shot", action="store_true", help="also time one `cag ask --json` process per mode")
    parser.add_argument("--readers", action="store_true", help="also time the reader modes (installed "
                        "reader adapters needed)")
    parser.add_argument("--out", type=Path, default=None, help="result file (default runs/benchmarks/"
                        "translated_speed-GENERATOR.json)")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown or "direct" not in modes:
        parser.error(f"--modes must include direct and name only {', '.join(MODES)} (not {', '.join(unknown)})")
    blend_selections.register()
    check_translators(modes, args.encoder, args.generator)
    with tempfile.TemporaryDirectory() as tmp:
        store_dir = Path(tmp) / "store"
        ingest([ROOT / "samples" / "corpus"], store_dir, IngestOptions(encoder=args.encoder, also_for=(args.generator,),
                                                                      also_for_dtype=args.dtype))
        lm = load_model(args.generator, args.dtype)
        store = Store.open(store_dir)
        retriever = Retriever(store)
        top_k = top_k_for(retriever, QUESTION, args.tokens)
        ask("warm-up", model=args.generator, top_k=1, mode="direct", max_new_tokens=1, lm=lm, retriever=retriever)
        blends = [float(f) for f in args.blends.split(",") if f.strip()]
        selects = [s for s in args.selects.split(",") if s.strip()]
        labels = labels_for(modes, blends, selects)
        if args.readers:
            labels += ["native+reader", "translated+reader (translating)", "translated+reader (stored)"]
            labels += [f"translated-blend+reader@{f}/{s} (stored)" for s in selects for f in blends]
        times = {label: [] for label in labels}
        answers, contexts = {}, {}
        for _ in range(args.repeats):
            for label in times:
                mode, _, setting = label.split(" ")[0].partition("@")
                share, _, select = setting.partition("/")
                if label.endswith("(translating)"):  # drop stored translations: translate now
                    for space in store.spaces():
                        if space.role == "translated":
                            shutil.rmtree(store_dir / "caches" / space.key, ignore_errors=True)
                result = ask(QUESTION, model=args.generator, top_k=top_k, mode=mode, max_new_tokens=8,
                             lm=lm, retriever=retriever, blend=float(share or DEFAULT_BLEND),
                             blend_select=select or DEFAULT_BLEND_SELECT)
                times[label].append(result.timings_ms["ttft"])
                answers[label], contexts[label] = result.answer, result.context_tokens
        ttft = {k: round(statistics.median(v), 1) for k, v in times.items()}
        # translation vs the generator's prefill of the same chunks
        chunks = [r.chunk for r in retriever.retrieve(QUESTION, top_k).results]
        translator = translator_for(store, lm, "mot")
        source = encoder_space(store)
        caches = [load_chunk_cache(store.cache_path(source, c.text_sha256)) for c in chunks]
        prefix = list(prompt_layout(lm.tokenizer).prefix_ids)
        translate_s, prefill_s = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            translated = [translate_chunk(translator, c, lm, prefix) for c in caches]
            translate_s.append(time.perf_counter() - t0)
            ids = torch.cat([torch.tensor(prefix)] + [t.token_ids for t in translated])
            t0 = time.perf_counter()
            with torch.no_grad():
                run_prefill(lm.model, ids, torch.arange(ids.numel()))
            prefill_s.append(time.perf_counter() - t0)
        target_tokens = sum(t.num_tokens for t in translated)
        one_shot = _one_shot(store, store_dir, args, top_k) if args.one_shot else None
    translate_med, prefill_med = statistics.median(translate_s), statistics.median(prefill_s)
    result = {"date": time.strftime("%Y-%m-%d"), "threads": torch.get_num_threads(), "encoder": args.encoder,
              "generator": args.generator, "dtype": args.dtype, "top_k": top_k, "context_tokens": contexts, "ttft_median_ms": ttft,
              "speedup_vs_direct": {k: round(ttft["direct"] / v, 2) for k, v in ttft.items()},
              "answers": answers, "target_tokens": target_tokens,
              "translate_ms": round(translate_med * 1e3, 1), "generator_prefill_ms": round(prefill_med * 1e3, 1),
              "translation_cost_vs_prefill": round(translate_med / prefill_med, 4),
              "translator_parameters": translator.parameter_count(),
              **({"one_shot": one_shot} if one_shot else {})}
    out = args.out or ROOT / "runs" / "benchmarks" / f"translated_speed-{args.generator}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


def _one_shot(store: Store, store_dir: Path, args, top_k: int) -> dict:
    """One `cag ask --json` process per mode on the benchmark's store: its TTFT and warm-up, and the
    ratios of direct's TTFT to each. The stored translations are dropped first, so the first
    translated ask translates and the second reads what the first stored."""
    for space in store.spaces():
        if space.role == "translated":
            shutil.rmtree(store_dir / "caches" / space.key, ignore_errors=True)
    runs = {}
    for label, mode in (("direct", "direct"), ("native", "native"), ("translated (translating)", "translated"),
                        ("translated (stored)", "translated")):
        command = [sys.executable, "-m", "cli", "ask", QUESTION, "--store", str(store_dir), "--model", args.generator,
                   "--mode", mode, "--top-k", str(top_k), "--dtype", args.dtype, "--max-new-tokens", "8", "--json"]
        proc = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, env=os.environ.copy())
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
        runs[label] = {"mode": answer["mode"], "context_tokens": answer["context_tokens"], "answer": answer["answer"],
                       "ttft_ms": round(answer["timings_ms"]["ttft"], 1),
                       "warmup_ms": round(answer["timings_ms"]["warmup"], 1)}
        print(json.dumps({label: runs[label]}), flush=True)
    direct = runs["direct"]["ttft_ms"]
    return {"command": "cag ask QUESTION --store STORE --model GENERATOR --mode MODE --top-k K --dtype DTYPE --json",
            "asks": runs, "speedup_vs_direct": {k: round(direct / v["ttft_ms"], 2) for k, v in runs.items()}}


if __name__ == "__main__":
    main()
