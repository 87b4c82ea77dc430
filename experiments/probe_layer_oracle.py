"""Where does full translation lose the facts? An oracle probe on SQuAD: answer each question from
the translated cache with some of its layers (or only its keys, or only its values) swapped for the
generator's own native K/V of the same tokens, and score every variant's answer (F1) on the same
questions. A layer group whose native K/V win back most of native - translated is where
translator capacity pays; one that wins little is already translated well enough. Measured on the
shipped qwen MoT (80 questions): the lower third's translation costs nothing, the upper third's
alone costs the whole gap (native K/V there alone win back three fifths), and the keys carry the
larger error (native values under translated keys win nothing; the upper third's native keys win
about two fifths of the gap).

    python experiments/probe_layer_oracle.py [--count 80] [--groups 3]

Questions: the first COUNT of the evaluated SQuAD 200 (eval's seeded draw), so `translated` here
reproduces the recorded eval run's translated answers (checked and printed). Uses the installed
MoT translator ($CAG_HOME/translators). Writes runs/probes/layer_oracle-MODEL.json (or --out).
"""

import argparse
import copy
import json
import re
import sys
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from cag.modes import ContextRequest, get_mode  # noqa: E402
from cag.defaults import DEFAULT_GENERATOR  # noqa: E402
from cag.kv.generate import greedy_generate  # noqa: E402
from cag.models import load_model  # noqa: E402
from cag.progress import Progress  # noqa: E402
from cag.prompt import prompt_layout  # noqa: E402
from eval.datasets import load_examples, resolve_dataset, sample  # noqa: E402
from eval.jsonl import read_text  # noqa: E402
from eval.metrics import bootstrap_difference_ci, squad_scores  # noqa: E402
from eval.runner import EvalConfig, build_store, context_rows  # noqa: E402


def variants(num_layers: int, groups: int) -> dict:
    """name -> (layers taking native K/V, which of "kv" they take); the rest stay translated."""
    every = range(num_layers)
    found = {"translated": ((), "kv"), "native": (every, "kv"),
             "native keys": (every, "k"), "native values": (every, "v")}
    bounds = [round(i * num_layers / groups) for i in range(groups + 1)]
    for a, b in zip(bounds, bounds[1:]):  # translated only in layers [a, b): that group's loss
        found[f"translated only {a}-{b - 1}"] = ([l for l in every if not a <= l < b], "kv")
    for a, b in zip(bounds, bounds[1:]):  # native in layers [a, b) only: what that group wins back
        found[f"native {a}-{b - 1}"] = (range(a, b), "kv")
        found[f"native keys {a}-{b - 1}"] = (range(a, b), "k")
    return found


def ranged_variant(name: str, num_layers: int):
    """Any layer range by name: "native A-B" / "native keys A-B" (native K/V, or keys, in layers
    A..B) or "translated only A-B"; (layers, which) as in `variants`, None for other names."""
    match = re.fullmatch(r"(native keys|native|translated only) (\d+)-(\d+)", name)
    if not match or not 0 <= int(match[2]) <= int(match[3]) < num_layers:
        return None
    kind, inside = match[1], range(int(match[2]), int(match[3]) + 1)
    if kind == "translated only":
        return [l for l in range(num_layers) if l not in inside], "kv"
    return inside, "k" if kind == "native keys" else "kv"


class _LineDone(Exception):
    pass


def first_line(lm, q_ids, context, max_new_tokens: int = 32) -> str:
    """eval's prediction (the answer's first line, greedy, up to 32 tokens), stopping at its
    newline: what follows is never scored."""
    pieces = []

    def on_token(piece: str) -> None:
        pieces.append(piece)
        if "\n" in piece:
            raise _LineDone

    try:
        text = greedy_generate(lm, q_ids, context, max_new_tokens, on_token=on_token).text
    except _LineDone:
        text = "".join(pieces)
    return text.split("\n")[0].strip()


def native_and_translated(store, examples, locators, config, lm, layout):
    """Per example, in order: (example, its chunk rows, the question's ids, its native context,
    its translated context), both assembled as ask assembles them, over the same tokens."""
    for example, locs in zip(examples, locators):
        rows = context_rows(store, locs, example, config, None)
        q_ids = layout.question_ids(lm.tokenizer, example["question"])
        native = get_mode("native").build(ContextRequest(store, lm, layout, rows, [])).context
        translated = get_mode("translated").build(ContextRequest(store, lm, layout, rows, [])).context
        assert torch.equal(native.input_ids, translated.input_ids), example["id"]
        yield example, rows, q_ids, native, translated


def hybrid(translated, native, layers, which: str):
    """A copy of the translated context whose `layers` hold the native K and/or V (same tokens,
    same positions: both are assembled the same way)."""
    ctx = copy.deepcopy(translated)
    for l in layers:
        src, dst = native.cache.layers[l], ctx.cache.layers[l]
        if "k" in which:
            dst.keys = src.keys.clone()
        if "v" in which:
            dst.values = src.values.clone()
    return ctx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_GENERATOR)
    parser.add_argument("--count", type=int, default=80)
    parser.add_argument("--groups", type=int, default=3, help="layer groups (translated only in one)")
    parser.add_argument("--only", help="comma-separated variant names to run (translated always runs); "
                                       "default: the first seven (every layer, K or V, and each group "
                                       "translated alone); any \"native A-B\", \"native keys A-B\" or "
                                       "\"translated only A-B\" layer range is also accepted")
    parser.add_argument("--recorded", default="records/eval/squad-200-qwen-mot-r512",
                        help="eval run whose translated answers `translated` must reproduce")
    parser.add_argument("--run", default="runs/probe-layer-oracle", help="run folder (the store)")
    parser.add_argument("--tag", default="", help="suffix of the default output name")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    path, task = resolve_dataset("squad", None)
    examples = sample(load_examples(path, task), task, args.count, 0)
    modes = ("native", "translated")
    config = EvalConfig(dataset="squad", model=args.model, modes=modes, out=args.run)
    store, locators = build_store(Path(args.run), config, task, examples, modes, Progress())
    lm = load_model(args.model, "fp32", "cpu")
    layout = prompt_layout(lm.tokenizer)
    named = variants(lm.geometry.num_layers, args.groups)
    wanted = args.only.split(",") if args.only else list(named)[:4 + args.groups]
    named.update({name: ranged for name in wanted if (ranged := ranged_variant(name, lm.geometry.num_layers))})
    unknown = sorted(set(wanted) - set(named))
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; choose from {list(named)}")
    named = {k: v for k, v in named.items() if k == "translated" or k in wanted}
    recorded = {}
    for line in read_text(Path(args.recorded, "predictions.jsonl")).splitlines():  # a record's .gz
        r = json.loads(line)
        if r["mode"] == "translated":
            recorded[r["id"]] = r["prediction"]

    scores = {name: [] for name in named}
    same_as_recorded, start = 0, time.perf_counter()
    contexts = native_and_translated(store, examples, locators, config, lm, layout)
    for n, (example, _, q_ids, native, translated) in enumerate(contexts, 1):
        for name, (layers, which) in named.items():
            prediction = first_line(lm, q_ids, hybrid(translated, native, layers, which))
            scores[name].append(squad_scores(prediction, example["answers"])["f1"])
            if name == "translated":
                same_as_recorded += recorded.get(example["id"]) == prediction
        print(f"\r{n}/{len(examples)} questions ({time.perf_counter() - start:.0f} s)", end="", file=sys.stderr)
    print(file=sys.stderr)

    gap = (sum(scores["native"]) - sum(scores["translated"])) / len(examples) if "native" in scores else float("nan")
    result = {"model": args.model, "count": len(examples), "translated_same_as_recorded": same_as_recorded,
              "native_minus_translated": round(gap, 2), "variants": {}}
    print(f"{len(examples)} SQuAD questions; translated answers equal to {args.recorded}'s: "
          f"{same_as_recorded}/{len(examples)}")
    print(f"{'variant':<28}{'F1':>7}  {'- translated [95% CI]':<24}{'share of the gap':>16}")
    for name, values in scores.items():
        mean, lo, hi = bootstrap_difference_ci(values, scores["translated"])
        f1 = sum(values) / len(values)
        share = mean / gap if gap else float("nan")  # (nan without the native variant)
        result["variants"][name] = {"f1": round(f1, 2), "minus_translated": [round(mean, 2), round(lo, 2), round(hi, 2)],
                                    "share_of_gap": round(share, 3)}
        print(f"{name:<28}{f1:7.2f}  {mean:+6.2f} [{lo:+.2f}, {hi:+.2f}]{share:>16.2f}")
    out = Path(args.out or f"runs/probes/layer_oracle-{args.model}{'-' + args.tag if args.tag else ''}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
