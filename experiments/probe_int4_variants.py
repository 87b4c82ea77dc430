"""Which part of int4 storage changes answers: key groups, value groups, rotation, fewer value bits?

For distinct SQuAD dev contexts, the generator's own chunk cache (one chunk per context, as
ingest prefills it) is stored as fp16 and through variants of the store's integer quantization
(cag/kv/quantize.py; keys per channel over groups of G tokens, values per token over groups of G
channels, optionally after a Hadamard rotation of the head dimension that is undone on reading).
The generator then reads the question and the reference answer (teacher-forced) from each; the
probe reports the mean KL(fp16 || variant) over the answer tokens and the first answer token
chosen as from fp16, and each variant's bytes as a fraction of fp16 (codes plus an fp16 minimum
and step per group).

    python experiments/probe_int4_variants.py [--model qwen2.5-coder-0.5b] [--contexts 60]

Writes runs/probes/int4_variants-MODEL.json (or --out).
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
from cag.kv.quantize import IntegerScheme, dequantize, hadamard, quantize  # noqa: E402
from cag.models import load_model  # noqa: E402
from cag.prompt import prompt_layout  # noqa: E402
from probe_int4_entropy import first_questions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# name: (key bits, key group in tokens, value bits, value group in channels, rotate values)
VARIANTS = {
    "int8 (store)": (8, 128, 8, 128, False),
    "int4 (store)": (4, 128, 4, 128, False),
    "int4, keys g64": (4, 64, 4, 128, False),
    "int4, keys g32": (4, 32, 4, 128, False),
    "int4, keys g16": (4, 16, 4, 128, False),
    "int4, values g32": (4, 128, 4, 32, False),
    "int4, values rotated": (4, 128, 4, 128, True),
    "keys int4 g64, values int3 rotated": (4, 64, 3, 128, True),
    "keys int4 g32, values int3": (4, 32, 3, 128, False),
    "keys int4 g32, values int2 rotated g32": (4, 32, 2, 32, True),
}


def round_trip(x: torch.Tensor, bits: int, per: str, group: int, rotation) -> torch.Tensor:
    """(H, T, D) through quantize/dequantize with `bits` over groups of `group`."""
    y = x.float() @ rotation if rotation is not None else x.float()
    back = dequantize(quantize(y, bits, per, group), y.shape, bits, per, group)
    return (back @ rotation.T if rotation is not None else back).to(x.dtype)


def fraction_of_fp16(key_bits, key_group, value_bits, value_group, rotate) -> float:
    return IntegerScheme("", key_bits, key_group, value_bits, value_group, rotate).fraction_of_fp16()


def answer_text(row: dict) -> str:
    answers = row["answers"]
    first = answers["text"][0] if isinstance(answers, dict) else answers[0]
    return first["text"] if isinstance(first, dict) else first


def teacher_forced(lm, layout, row: dict) -> tuple:
    """The question's and the reference answer's ids after the prompt, and how many of the last
    logits predict the answer (its tokens and its end)."""
    answer_ids = lm.tokenizer(answer_text(row), add_special_tokens=False)["input_ids"]
    return torch.tensor(layout.question_ids(lm.tokenizer, row["question"]) + answer_ids), len(answer_ids) + 1


def answer_log_probs(lm, layout, chunk, ids: torch.Tensor, kept: int) -> torch.Tensor:
    """(kept, vocab) log-probs of the generator reading `ids` after `chunk` (assembled after its prefix)."""
    context = assemble(lm, [chunk], layout.prefix_ids)
    return forward_new_tokens(lm, context.cache, ids, context.length, kept).float().log_softmax(-1)


def mean_kl(reference: torch.Tensor, got: torch.Tensor) -> float:
    """KL(reference || got) per position, averaged; both (positions, vocab) log-probs."""
    return float((reference.exp() * (reference - got)).sum(-1).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--contexts", type=int, default=60)
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--out", type=Path, default=None, help="result file (default runs/probes/)")
    args = parser.parse_args()
    lm = load_model(args.model, dtype=args.dtype)
    layout = prompt_layout(lm.tokenizer)
    totals = {name: {"kl": 0.0, "same_first": 0} for name in VARIANTS}
    rows = first_questions(args.contexts)
    with torch.inference_mode():
        for row in rows:
            chunk = prefill_chunk(lm, row["context"], prefix_ids=layout.prefix_ids)
            rotation = hadamard(chunk.values[0].shape[-1])
            ids, kept = teacher_forced(lm, layout, row)
            reference = answer_log_probs(lm, layout, chunk, ids, kept)
            for name, (kb, kg, vb, vg, rotate) in VARIANTS.items():
                keys = [round_trip(k, kb, "channel", kg, None) for k in chunk.keys]
                values = [round_trip(v, vb, "token", vg, rotation if rotate else None) for v in chunk.values]
                variant = answer_log_probs(lm, layout, ChunkCache(keys, values, chunk.token_ids, chunk.offsets,
                                                                  chunk.meta, chunk.text), ids, kept)
                totals[name]["kl"] += mean_kl(reference, variant)
                totals[name]["same_first"] += int(variant[0].argmax() == reference[0].argmax())
    record = {"date": "2026-12-04", "model": args.model, "compute_dtype": args.dtype,
              "contexts": len(rows), "variants": {
                  name: {"fraction_of_fp16": round(fraction_of_fp16(*VARIANTS[name]), 4),
                         "kl_answer_tokens_mean": round(t["kl"] / len(rows), 5),
                         "same_first_token": f"{t['same_first']}/{len(rows)}"}
                  for name, t in totals.items()}}
    out = args.out or ROOT / "runs" / "probes" / f"int4_variants-{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    for name, v in record["variants"].items():
        print(f"{name:40s} {v['fraction_of_fp16']:.3f}  KL {v['kl_answer_tokens_mean']:.4f}  first {v['same_first_token']}")


if __name__ == "__main__":
    main()
