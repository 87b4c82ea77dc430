"""Training-free reading of independently prefilled chunks (APE-style), the tuning probe of the scaled
modes (cag.modes.scaled, whose mask it uses for S; T is probe-only): does sharpening the generator's
attention to the stored context (a temperature T < 1 on the context keys' logits) and rescaling the
context's share of the attention (a factor S on its weights) bring its reading of many native chunk
caches closer to reading the text?

For each question of a multi_doc set (the eval's own ingest and row assembly, native caches):
    direct      the generator reads prefix + chunks' text + question, answers greedily
    native T,S  the same chunks' stored caches, assembled; every layer's context keys scaled by 1/T
                (logits / T: rotary keys are rotated already, so the scale commutes) and log S added
                to the question's and answer's attention logits over the context positions
Scored per setting: KL(direct || native T,S) over direct's answer tokens and its stop token
(teacher-forced; the tuning signal, less noisy than F1), top-1 agreement there, and the greedy
answer's F1.

    python scripts/build_hotpotqa_wide.py --split train   # HotpotQA training questions, 20 paragraphs
    python experiments/probe_parallel_attention.py --task multi_doc --limit 24 \
        --dataset data/hotpotqa_distractor/train_20passages.jsonl \
        --context-budget 4096 --no-f1 --grid 1:1,1:0.5,1:0.35,1:0.25,1:0.15,0.95:0.35,1.05:0.35 \
        --out runs/probe-train20 --record records/context_scale-hotpotqa-train20.json
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cag.kv.generate import forward_new_tokens, greedy_generate  # noqa: E402
from cag.models.loading import load_model  # noqa: E402
from cag.modes.base import ContextRequest  # noqa: E402
from cag.modes.registry import get_mode  # noqa: E402
from cag.progress import Progress  # noqa: E402
from cag.prompt import prompt_layout  # noqa: E402
from eval.metrics import squad_scores  # noqa: E402
from eval.runner import EvalConfig, prepare_run  # noqa: E402


def adjust(context, temperature: float, scale: float) -> None:
    """Scale the context keys by 1/temperature in place (logits / T) and set the context's log scale
    (the product's scaled modes: cag.kv.generate.context_mask)."""
    p, length = context.prefix_tokens, context.length
    if temperature != 1.0:
        for layer in context.cache.layers:
            layer.keys[:, :, p:length] *= 1.0 / temperature
    context.log_scale = math.log(scale)


@torch.no_grad()
def answer_logprobs(lm, ids_before, answer, context=None):
    """(len(answer)+1, vocab) log-probs predicting `answer` and the token after it, given `ids_before`
    (read after `context`, its scale applied, or from scratch)."""
    ids = torch.as_tensor(list(ids_before) + list(answer), dtype=torch.int64)
    if context is None:
        out = lm.model(input_ids=ids[None], logits_to_keep=len(answer) + 1)
        return out.logits[0].float().log_softmax(-1)
    logits = forward_new_tokens(lm, context.cache, ids, context.length, logits_to_keep=len(answer) + 1,
                                scaled_span=context.scaled_span)
    return logits.float().log_softmax(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--task", default=None)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--context-budget", type=int, default=4096)
    parser.add_argument("--grid", default="1:1,0.9:1,0.8:1,0.7:1,0.9:0.7,0.8:0.7,0.9:1.4")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--no-f1", action="store_true", help="KL and top-1 only (no greedy answers)")
    parser.add_argument("--out", required=True, help="run folder (the eval's ingest and store)")
    parser.add_argument("--record", required=True)
    parser.add_argument("--reuse-caches-from", nargs="*", default=[], help="run folders whose identical caches are linked")
    args = parser.parse_args()
    grid = [tuple(float(x) for x in item.split(":")) for item in args.grid.split(",")]
    config = EvalConfig(dataset=args.dataset, task=args.task, modes=("direct", "native"), limit=args.limit,
                        context_budget=args.context_budget, dtype=args.dtype, device="cpu", out=args.out,
                        reuse_caches=tuple(args.reuse_caches_from))
    progress = Progress()
    run = prepare_run(config, progress)
    lm = load_model(config.model, config.dtype, "cpu")
    layout = prompt_layout(lm.tokenizer)
    rows_by_id = {ex["id"]: (ex, rows) for ex, rows, _ in run.work(progress)}
    # every example has rows: answered modes are read from nothing here
    per = {f"{t}:{s}": {"kl": [], "top1": [], "f1": []} for t, s in grid}
    direct_f1, started = [], time.time()
    for n, ex in enumerate(run.examples, 1):
        ex, rows = rows_by_id[ex["id"]]
        q_ids = layout.question_ids(lm.tokenizer, ex["question"])
        lead = get_mode("direct").build(ContextRequest(run.store, lm, layout, rows, q_ids)).lead_ids
        gen = greedy_generate(lm, list(layout.prefix_ids) + lead + q_ids, None, args.max_new_tokens)
        answer = gen.token_ids
        direct_f1.append(squad_scores(gen.text.split("\n")[0].strip(), ex["answers"])["f1"])
        teacher = answer_logprobs(lm, list(layout.prefix_ids) + lead + q_ids, answer)
        for t, s in grid:
            key = f"{t}:{s}"
            request = ContextRequest(run.store, lm, layout, rows, q_ids)
            built = get_mode("native").build(request)
            adjust(built.context, t, s)
            student = answer_logprobs(lm, q_ids, answer, built.context)
            kl = (teacher.exp() * (teacher - student)).sum(-1)
            per[key]["kl"].append(float(kl.mean()))
            per[key]["top1"].append(float((teacher.argmax(-1) == student.argmax(-1)).float().mean()))
            if not args.no_f1:
                built = get_mode("native").build(ContextRequest(run.store, lm, layout, rows, q_ids))
                adjust(built.context, t, s)
                text = greedy_generate(lm, q_ids, built.context, args.max_new_tokens).text
                per[key]["f1"].append(squad_scores(text.split("\n")[0].strip(), ex["answers"])["f1"])
        line = " ".join(f"{k} kl={sum(v['kl'])/n:.3f}" + (f" f1={sum(v['f1'])/n:.1f}" if v["f1"] else "")
                        for k, v in per.items())
        print(f"[{n}/{len(run.examples)} {time.time() - started:.0f}s] direct f1={sum(direct_f1)/n:.1f} {line}",
              flush=True)
        write_record(args, config, direct_f1, per, started)  # after every question: a stopped probe keeps its record


def write_record(args, config, direct_f1, per, started) -> None:
    summary = {"dataset": args.dataset, "limit": args.limit, "context_budget": args.context_budget,
               "dtype": args.dtype, "model": config.model, "n": len(direct_f1),
               "direct_f1": sum(direct_f1) / len(direct_f1),
               "settings": {k: {m: (sum(v[m]) / len(v[m]) if v[m] else None) for m in ("kl", "top1", "f1")}
                            for k, v in per.items()},
               "per_question": {"direct_f1": direct_f1, **{k: v for k, v in per.items()}},
               "seconds": round(time.time() - started, 1)}
    Path(args.record).parent.mkdir(parents=True, exist_ok=True)
    Path(args.record).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
