"""Translator diagnostics on held-out corpus windows, side by side in one run:

- next-token KL against the generator reading the text itself (teacher-forced continuation),
  top-1 agreement, and per-layer attention-output cosine, for every translator given (full mode),
  the MoT translator in window mode, the generator's own independently prefilled chunks (a
  reference: what a perfect translator of each chunk would give) and no context (the floor);
- the injection-depth study: the MoT translator injected into a window of W target layers, the
  generator replaying the rest, for every window start.

Usage: python experiments/bench_translators.py --data runs/train-data-smollm2-135m-qwen2.5-coder-0.5b \
    --translator mot=runs/.../translator.safetensors --translator ridge=... [--windows 16] [--width 6]
Writes runs/benchmarks/translators-SOURCE-TARGET.json (or --out).
"""

import argparse
import json
import time
from pathlib import Path

import torch

from cag.kv.chunk_cache import run_prefill
from cag.models import load_model
from cag.prompt import prompt_layout
from mot.checkpoint import load_translator
from mot.training.data import load_window
from translator_diagnostics import mean_diagnostics, native_attention, window_diagnostics

ROOT = Path(__file__).resolve().parent.parent


def own_chunks(window) -> tuple[list, list]:
    """The window's native chunk K/V concatenated per layer: (H, T_ctx, D) lists."""
    layers = len(window.chunks[0].tgt_keys)
    keys = [torch.cat([c.tgt_keys[l].float() for c in window.chunks], dim=1) for l in range(layers)]
    values = [torch.cat([c.tgt_values[l].float() for c in window.chunks], dim=1) for l in range(layers)]
    return keys, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="prepared-windows folder of a training run")
    parser.add_argument("--translator", action="append", required=True, help="NAME=PATH.safetensors")
    parser.add_argument("--windows", type=int, default=16)
    parser.add_argument("--width", type=int, default=6, help="layers per window in the depth study")
    parser.add_argument("--stride", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default runs/benchmarks/translators-SOURCE-TARGET.json)")
    args = parser.parse_args()
    translators = {}
    for item in args.translator:
        name, path = item.split("=", 1)
        translators[name] = load_translator(Path(path))
    spec = next(iter(translators.values())).spec
    target = load_model(spec.target.name)
    prefix = list(prompt_layout(target.tokenizer).prefix_ids)
    prefix_kv = run_prefill(target.model, torch.tensor(prefix), torch.arange(len(prefix))) if prefix else None
    files = sorted((Path(args.data) / "heldout").glob("w*.safetensors"))[:args.windows]
    windows = [load_window(f) for f in files]
    natives = [native_attention(target, prefix, w) for w in windows]
    started = time.perf_counter()
    any_translator = next(iter(translators.values()))

    def measure(translator, **options):
        return mean_diagnostics([window_diagnostics(translator, target, prefix_kv, prefix, w, native=n, **options)
                                 for w, n in zip(windows, natives)])

    rows = {}
    rows["none"] = measure(any_translator, with_context=False)
    # reference: the generator's own chunk caches, each prefilled independently
    own = [window_diagnostics(any_translator, target, prefix_kv, prefix, w, native=n, given=own_chunks(w))
           for w, n in zip(windows, natives)]
    rows["native-chunks"] = mean_diagnostics(own)
    for name, translator in translators.items():
        rows[f"{name}-full"] = measure(translator, mode="full")
        print(name, "full", rows[f"{name}-full"]["kl"], rows[f"{name}-full"]["top1"], flush=True)
    layers = target.geometry.num_layers
    mot = translators.get("mot") or any_translator
    middle = mot.record.training.get("window") or [layers // 3, 2 * layers // 3]
    rows["mot-window"] = measure(mot, mode="window", layers_window=tuple(middle))
    depth = []
    for start in range(0, layers - args.width + 1, args.stride):
        m = measure(mot, mode="window", layers_window=(start, start + args.width))
        depth.append({"start": start, "end": start + args.width, "kl": m["kl"], "top1": m["top1"]})
        print("depth", depth[-1], flush=True)
    result = {"date": time.strftime("%Y-%m-%d"), "source": spec.source.name, "target": spec.target.name,
              "threads": torch.get_num_threads(), "windows": len(windows), "mot_window_layers": middle,
              "rows": rows, "depth": depth, "seconds": round(time.perf_counter() - started, 1)}
    out = args.out or ROOT / "runs" / "benchmarks" / f"translators-{spec.source.name}-{spec.target.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print("| setting | KL vs native | top-1 agreement | mean attention cosine |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        cos = sum(r["attention_cosine"]) / len(r["attention_cosine"])
        print(f"| {name} | {r['kl']} | {r['top1']} | {cos:.3f} |")
    print(f"saved {out}")


if __name__ == "__main__":
    main()
