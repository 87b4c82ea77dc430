"""Where integer storage hurts translated contexts: the encoder's stored cache, the stored translation, or both?

A translated context passes through the store twice: the encoder's chunk cache is stored (and
quantized by `--cache-dtype`), and its translation into the generator's space is stored too (with
the same dtype) the first time it is read. For distinct SQuAD dev contexts (one chunk each), this
probe round-trips the caches through the store's own serialization (cag/kv/serde.py) at each
scheme and placement, lets the generator read the question and the reference answer
(teacher-forced) after the translated chunk, and reports the mean KL(fp16 || variant) over the
answer tokens and how often the first answer token stays the same. The generator's own (native)
chunk through the same schemes is measured on the same contexts, as the scale to compare with.

    python experiments/probe_translated_quantization.py [--contexts 60] [--schemes int8,int4,int4k-int3v]
    python experiments/probe_translated_quantization.py --encoder-variants   # bits and groups, encoder cache only

Writes runs/probes/translated_quantization-ENCODER-GENERATOR.json (or --out).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from cag.kv.chunk_cache import prefill_chunk  # noqa: E402
from cag.kv.serde import load_chunk_cache, save_chunk_cache  # noqa: E402
from cag.models import load_model  # noqa: E402
from cag.prompt import prompt_layout  # noqa: E402
from mot.checkpoint import load_translator  # noqa: E402
from mot.translator import translate_chunks  # noqa: E402
from probe_int4_entropy import first_questions  # noqa: E402
from probe_int4_variants import answer_log_probs, fraction_of_fp16, mean_kl, round_trip, teacher_forced  # noqa: E402
from cag.kv.chunk_cache import ChunkCache  # noqa: E402
from cag.kv.quantize import hadamard  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PLACEMENTS = ("native", "encoder cache", "translation", "both")
# --encoder-variants: (key bits, key group in tokens, value bits, value group in channels, rotate
# values); None leaves that half in fp16
ENCODER_VARIANTS = {
    "keys int4 g64 only": (4, 64, None, None, False),
    "values int3 rotated only": (None, None, 3, 128, True),
    "keys int4 g64, values int3 rotated (int4k-int3v before)": (4, 64, 3, 128, True),
    "keys int3 g64, values int4 rotated": (3, 64, 4, 128, True),
    "keys int3 g128, values int4 rotated": (3, 128, 4, 128, True),
    "keys int4 g128, values int3 rotated g64 (int4k-int3v now)": (4, 128, 3, 64, True),
    "keys int4 g32, values int3 rotated g64": (4, 32, 3, 64, True),
    "keys int4 g64, values int4 rotated": (4, 64, 4, 128, True),
}


def variant(chunk: ChunkCache, kb, kg, vb, vg, rotate) -> ChunkCache:
    rotation = hadamard(chunk.values[0].shape[-1]) if rotate else None
    keys = [k if kb is None else round_trip(k, kb, "channel", kg, None) for k in chunk.keys]
    values = [v if vb is None else round_trip(v, vb, "token", vg, rotation) for v in chunk.values]
    return ChunkCache(keys, values, chunk.token_ids, chunk.offsets, chunk.meta, chunk.text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--translator", default=None, help="checkpoint stem (default: the shipped MoT)")
    parser.add_argument("--contexts", type=int, default=60)
    parser.add_argument("--schemes", default="int8,int4,int4k-int3v")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--out", type=Path, default=None, help="default: runs/probes/translated_quantization-...json")
    parser.add_argument("--encoder-variants", action="store_true",
                        help="the bit and group variants of ENCODER_VARIANTS on the encoder cache only")
    args = parser.parse_args()
    schemes = list(ENCODER_VARIANTS) if args.encoder_variants else args.schemes.split(",")
    stem = args.translator or str(ROOT / "translators" / f"{args.encoder}__{args.model}__mot")
    lm = load_model(args.model, dtype=args.dtype)
    encoder = load_model(args.encoder, dtype=args.dtype)
    translator = load_translator(Path(stem + ".safetensors"))
    layout, enc_prefix = prompt_layout(lm.tokenizer), prompt_layout(encoder.tokenizer).prefix_ids
    totals = {(p, s): {"kl": 0.0, "same_first": 0} for p in PLACEMENTS for s in schemes}
    rows = first_questions(args.contexts)
    started = time.perf_counter()
    with torch.inference_mode(), tempfile.TemporaryDirectory() as tmp:
        def stored(chunk, dtype):  # the store's round trip: serialized at `dtype`, read back
            path = Path(tmp) / f"{dtype}.safetensors"
            save_chunk_cache(chunk, path, dtype)
            return load_chunk_cache(path)

        def translated(source):
            return translate_chunks(translator, [source], lm, layout.prefix_ids)[0]

        for n, row in enumerate(rows, 1):
            ids, kept = teacher_forced(lm, layout, row)

            def log_probs(chunk):
                return answer_log_probs(lm, layout, chunk, ids, kept)

            native = stored(prefill_chunk(lm, row["context"], prefix_ids=layout.prefix_ids), "fp16")
            source = stored(prefill_chunk(encoder, row["context"], prefix_ids=enc_prefix), "fp16")
            translation = stored(translated(source), "fp16")
            reference = {"native": log_probs(native), "translated": log_probs(translation)}
            if args.encoder_variants:
                for name, bits in ENCODER_VARIANTS.items():
                    got = log_probs(translated(variant(source, *bits)))
                    ref, t = reference["translated"], totals[("encoder cache", name)]
                    t["kl"] += mean_kl(ref, got)
                    t["same_first"] += int(got[0].argmax() == ref[0].argmax())
            for scheme in ([] if args.encoder_variants else schemes):
                source_q = translated(stored(source, scheme))
                variants = {"native": stored(native, scheme), "encoder cache": source_q,
                            "translation": stored(translation, scheme), "both": stored(source_q, scheme)}
                for placement, chunk in variants.items():
                    ref = reference["native" if placement == "native" else "translated"]
                    got = log_probs(chunk)
                    t = totals[(placement, scheme)]
                    t["kl"] += mean_kl(ref, got)
                    t["same_first"] += int(got[0].argmax() == ref[0].argmax())
            if n % 10 == 0:
                print(f"{n}/{len(rows)} contexts, {time.perf_counter() - started:.0f} s", flush=True)
    record = {"date": time.strftime("%Y-%m-%d"), "encoder": args.encoder, "model": args.model,
              "translator": Path(stem).name, "compute_dtype": args.dtype, "contexts": len(rows),
              "seconds": round(time.perf_counter() - started, 1),
              "kl_answer_tokens_mean": {p: {s: round(totals[(p, s)]["kl"] / len(rows), 5) for s in schemes}
                                        for p in PLACEMENTS},
              "same_first_token": {p: {s: f"{totals[(p, s)]['same_first']}/{len(rows)}" for s in schemes}
                                   for p in PLACEMENTS}}
    if args.encoder_variants:
        record["fraction_of_fp16"] = {name: round(fraction_of_fp16(*(b if b is not None else d for b, d in
                                                                     zip(bits, (16, 10**9, 16, 10**9, False)))), 4)
                                      for name, bits in ENCODER_VARIANTS.items()}
        for p in ("native", "translation", "both"):
            record["kl_answer_tokens_mean"].pop(p)
            record["same_first_token"].pop(p)
    suffix = "-encoder-variants" if args.encoder_variants else ""
    out = args.out or ROOT / "runs" / "probes" / f"translated_quantization-{args.encoder}-{args.model}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    if args.encoder_variants:
        for name in schemes:
            print(f"{name:45s} {record['fraction_of_fp16'][name]:.3f}  KL {record['kl_answer_tokens_mean']['encoder cache'][name]:.5f}"
                  f"  first {record['same_first_token']['encoder cache'][name]}")
        return
    print(f"{'quantized':16s}" + "".join(f"{s:>22s}" for s in schemes))
    for p in PLACEMENTS:
        print(f"{p:16s}" + "".join(f"{record['kl_answer_tokens_mean'][p][s]:>12.5f} {record['same_first_token'][p][s]:>9s}"
                                   for s in schemes))


if __name__ == "__main__":
    main()
