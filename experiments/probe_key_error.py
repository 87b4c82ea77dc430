"""Per-layer translation error of keys and values, as the training loss sees it and as the
generator's attention sees it, on held-out prepared windows.

For each translator and target layer: the keys' normalized MSE (the reconstruction loss every
shipped translator was trained with), the keys' query-weighted logit error (mot/training/query_metric.py:
1.0 = the error of predicting each chunk's mean key) and the values' normalized MSE. The layer
oracle (probe_layer_oracle.py) found SQuAD's loss in the upper third's keys; this probe asks
whether the training loss saw that error there.

    python experiments/probe_key_error.py --data runs/data-qwen-text \\
        --translator mot=translators/smollm2-135m__qwen2.5-coder-0.5b__mot [--translator ...]

Query moments come from the first 64 training windows of --data (the target reading them),
errors from its held-out windows. Writes runs/probes/key_error-TARGET.json (or --out).
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from cag.defaults import DEFAULT_GENERATOR  # noqa: E402
from cag.models import load_model  # noqa: E402
from cag.prompt import prompt_layout  # noqa: E402
from mot.checkpoint import load_translator  # noqa: E402
from mot.training.data import load_window  # noqa: E402
from mot.training.losses import normalized_mse  # noqa: E402
from mot.training.query_metric import quadratic, query_moments, query_weighted_error, window_sequences  # noqa: E402
from mot.training.step import chunk_tokens, chunk_weights  # noqa: E402


def windows_in(folder: Path, count: int) -> list:
    paths = sorted(folder.glob("w*.safetensors"))[:count]
    if not paths:
        raise SystemExit(f"no prepared windows in {folder}")
    return [load_window(p) for p in paths]


@torch.no_grad()
def layer_errors(translator, target, windows: list, prefix_len: int, moments: list) -> dict:
    """Per layer means over the windows' chunks: key nmse, key query error, value nmse."""
    layers = target.geometry.num_layers
    sums = {k: [0.0] * layers for k in ("key_nmse", "key_query", "key_logit_rmse", "logit_spread", "value_nmse")}
    group = target.model.config.num_attention_heads // target.geometry.kv_heads
    scale = target.geometry.head_dim ** 0.5  # attention divides q . k by sqrt(D)
    count = 0
    for window in windows:
        pos = prefix_len
        for chunk in window.chunks:
            weights, _ = chunk_weights(chunk)
            positions = torch.arange(pos, pos + chunk.tgt_ids.numel())
            keys, values, _ = translator(chunk.src_keys, chunk.src_values, weights, positions,
                                         chunk_tokens(translator, target, chunk))
            for l in range(layers):
                sums["key_nmse"][l] += float(normalized_mse(keys[l], chunk.tgt_keys[l]))
                sums["key_query"][l] += float(query_weighted_error(keys[l], chunk.tgt_keys[l], moments[l]))
                sums["value_nmse"][l] += float(normalized_mse(values[l], chunk.tgt_values[l]))
                # in the softmax's own units: RMS over query heads and tokens of the logit change
                # (and of the logits' token-varying part, the spread the error is measured against)
                native = chunk.tgt_keys[l].float()
                err, centered = keys[l].float() - native, native - native.mean(1, keepdim=True)
                tokens = err.shape[0] * err.shape[1] * group
                for name, x in (("key_logit_rmse", err), ("logit_spread", centered)):
                    sums[name][l] += float(quadratic(x, moments[l]) / tokens) ** 0.5 / scale
            pos += chunk.tgt_ids.numel()
            count += 1
    return {k: [round(v / count, 4) for v in vs] for k, vs in sums.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="A prepared windows folder (cag train --data).")
    parser.add_argument("--translator", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--target", default=DEFAULT_GENERATOR)
    parser.add_argument("--windows", type=int, default=32, help="Held-out windows measured.")
    parser.add_argument("--groups", type=int, default=3, help="Layer groups in the printed table.")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    target = load_model(args.target)
    prefix = list(prompt_layout(target.tokenizer).prefix_ids)
    train = windows_in(args.data / "train", 64)
    moments = query_moments(target, window_sequences(train, prefix))
    heldout = windows_in(args.data / "heldout", args.windows)
    layers = target.geometry.num_layers
    bounds = [round(i * layers / args.groups) for i in range(args.groups + 1)]
    results = {}
    for item in args.translator:
        name, _, path = item.partition("=")
        translator = load_translator(Path(path)).float()
        results[name] = layer_errors(translator, target, heldout, len(prefix), moments)
        print(f"\n{name} ({path})")
        print("layers | key nMSE | key query error | key logit RMS error | logit spread | value nMSE")
        for a, b in zip(bounds, bounds[1:]):
            row = [sum(results[name][k][a:b]) / (b - a)
                   for k in ("key_nmse", "key_query", "key_logit_rmse", "logit_spread", "value_nmse")]
            print(f"{a}-{b - 1} | " + " | ".join(f"{x:.4f}" for x in row))
    out = args.out or Path(__file__).resolve().parent.parent / "runs" / "probes" / f"key_error-{args.target}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"target": args.target, "data": str(args.data), "heldout_windows": len(heldout),
                               "moment_windows": len(train), "translators": dict(
                                   item.partition("=")[::2] for item in args.translator),
                               "layers": results}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
