"""Bits per layer for stored chunk caches: which layers need precision, and whether spending the
same bytes unevenly (more bits where the answer is sensitive) beats one setting for every layer.

For distinct SQuAD dev contexts, the generator's own chunk cache is stored as fp16 and through the
integer round trips of probe_int4_variants (keys per channel over groups of tokens, values per token,
optionally rotated). The generator reads the question and the reference answer (teacher-forced);
the probe reports the mean KL(fp16 || variant) over the answer tokens.

1. Sensitivity: one layer at a time through a low setting (keys int2, values int2 rotated), every
   other layer fp16: KL per layer.
2. Allocations at a byte budget: the most sensitive layers get a higher setting, the rest a lower
   one, as many upgraded as the budget allows; against each setting alone at its bytes.

    python experiments/probe_layer_bits.py [--model qwen2.5-coder-0.5b] [--contexts 30] [--budget 0.25]

Writes runs/probes/layer_bits-MODEL.json (or --out).
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from cag.kv.assemble import assemble  # noqa: E402
from cag.kv.chunk_cache import ChunkCache, prefill_chunk  # noqa: E402
from cag.kv.generate import forward_new_tokens  # noqa: E402
from cag.kv.quantize import SCHEMES, IntegerScheme, hadamard  # noqa: E402
from cag.models import load_model  # noqa: E402
from cag.prompt import prompt_layout  # noqa: E402
from probe_int4_entropy import first_questions  # noqa: E402
from probe_int4_variants import answer_text, round_trip  # noqa: E402

# the store's schemes and probe-only ones (kXgN: keys X bits over N tokens; vYrot: values Y bits, rotated)
SETTINGS = {"int8": SCHEMES["int8"], "int4": SCHEMES["int4"], "k4g64 v3rot": SCHEMES["int4k-int3v"],
            **{s.name: s for s in (IntegerScheme("k8g64 v3rot", 8, 64, 3, 128, True),
                                   IntegerScheme("k3g64 v3rot", 3, 64, 3, 128, True),
                                   IntegerScheme("k4g64 v2rot", 4, 64, 2, 128, True),
                                   IntegerScheme("k3g32 v2rot", 3, 32, 2, 128, True),
                                   IntegerScheme("k2g32 v2rot", 2, 32, 2, 32, True))}}
PROBE = "k2g32 v2rot"  # the low setting of the sensitivity pass
PAIRS = [("int8", "k3g64 v3rot"), ("int8", "k3g32 v2rot"), ("int8", "k4g64 v2rot"), ("int4", "k3g64 v3rot"),
         ("int4", "k3g32 v2rot"), ("int4", "k4g64 v2rot"), ("int4", "k4g64 v3rot"),
         # int8 keys alone on the sensitive layers: is the keys' error the one that changes answers?
         ("k8g64 v3rot", "k4g64 v3rot"), ("k8g64 v3rot", "k3g64 v3rot"), ("k8g64 v3rot", "k4g64 v2rot")]


def planned_round_trip(chunk, plan: list[str | None], rotation):
    """The chunk with each layer through its setting in `plan` (None: kept as it is)."""
    keys, values = list(chunk.keys), list(chunk.values)
    for layer, setting in enumerate(plan):
        if setting is not None:
            s = SETTINGS[setting]
            keys[layer] = round_trip(keys[layer], s.key_bits, "channel", s.key_group, None)
            values[layer] = round_trip(values[layer], s.value_bits, "token", s.value_group,
                                       rotation if s.rotate_values else None)
    return keys, values


def plan_for(order: list[int], high: str, low: str, budget: float) -> list[str]:
    """`high` for as many of the most sensitive layers (`order`) as keep the mean fraction within
    `budget`, `low` for the rest."""
    layers, f_high, f_low = len(order), SETTINGS[high].fraction_of_fp16(), SETTINGS[low].fraction_of_fp16()
    upgraded = max(0, min(layers, int((budget - f_low) * layers / (f_high - f_low) + 1e-9)))
    plan = [low] * layers
    for layer in order[:upgraded]:
        plan[layer] = high
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--contexts", type=int, default=30)
    parser.add_argument("--budget", type=float, default=0.25, help="bytes as a fraction of fp16")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--out", type=Path, default=None, help="result file (default runs/probes/)")
    args = parser.parse_args()
    lm = load_model(args.model, dtype=args.dtype)
    layout = prompt_layout(lm.tokenizer)
    rows = first_questions(args.contexts)
    prepared = []
    with torch.inference_mode():
        for row in rows:
            chunk = prefill_chunk(lm, row["context"], prefix_ids=layout.prefix_ids)
            answer_ids = lm.tokenizer(answer_text(row), add_special_tokens=False)["input_ids"]
            ids = torch.tensor(layout.question_ids(lm.tokenizer, row["question"]) + answer_ids)
            prepared.append((chunk, ids, len(answer_ids) + 1))

        def log_probs(chunk, ids, kept, keys=None, values=None):
            if keys is not None:
                chunk = ChunkCache(keys, values, chunk.token_ids, chunk.offsets, chunk.meta, chunk.text)
            context = assemble(lm, [chunk], layout.prefix_ids)
            return forward_new_tokens(lm, context.cache, ids, context.length, kept).float().log_softmax(-1)

        references = [log_probs(*p) for p in prepared]
        rotation = hadamard(prepared[0][0].values[0].shape[-1])

        def mean_kl(transform) -> float:
            total = 0.0
            for (chunk, ids, kept), reference in zip(prepared, references):
                keys, values = transform(chunk)
                variant = log_probs(chunk, ids, kept, keys, values)
                total += float((reference.exp() * (reference - variant)).sum(-1).mean())
            return total / len(prepared)

        layers = len(prepared[0][0].keys)
        alone = lambda l: [PROBE if i == l else None for i in range(layers)]  # noqa: E731
        sensitivity = [mean_kl(lambda c, l=l: planned_round_trip(c, alone(l), rotation)) for l in range(layers)]
        for l, kl in enumerate(sensitivity):
            print(f"layer {l:2d} alone {PROBE}: KL {kl:.5f}", flush=True)
        order = sorted(range(layers), key=lambda l: -sensitivity[l])
        uniform = {name: {"fraction_of_fp16": round(s.fraction_of_fp16(), 4),
                          "kl": round(mean_kl(lambda c, n=name: planned_round_trip(c, [n] * layers, rotation)), 5)}
                   for name, s in SETTINGS.items()}
        for name, u in uniform.items():
            print(f"uniform {name:14s} {u['fraction_of_fp16']:.3f}  KL {u['kl']:.5f}", flush=True)
        mixed = {}
        for high, low in PAIRS:
            plan = plan_for(order, high, low, args.budget)
            fraction = sum(SETTINGS[s].fraction_of_fp16() for s in plan) / layers
            kl = mean_kl(lambda c, p=plan: planned_round_trip(c, p, rotation))
            name = f"{high} on the {plan.count(high)} most sensitive layers, {low} elsewhere"
            mixed[name] = {"fraction_of_fp16": round(fraction, 4), "kl": round(kl, 5),
                           "high_layers": sorted(l for l, s in enumerate(plan) if s == high)}
            print(f"{name:60s} {fraction:.3f}  KL {kl:.5f}", flush=True)
            # the same count of upgraded layers chosen as the least sensitive: does the order matter?
            reverse = plan_for(order[::-1], high, low, args.budget)
            mixed[name]["kl_least_sensitive_upgraded"] = round(
                mean_kl(lambda c, p=reverse: planned_round_trip(c, p, rotation)), 5)
    record = {"date": "2026-12-04", "model": args.model, "compute_dtype": args.dtype, "contexts": len(rows),
              "budget_fraction_of_fp16": args.budget, "probe_setting": PROBE,
              "sensitivity_kl_per_layer": [round(s, 5) for s in sensitivity],
              "uniform": uniform, "mixed": mixed}
    out = args.out or Path(__file__).resolve().parents[1] / "runs" / "probes" / f"layer_bits-{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
