"""Evaluate one example in one mode through cag's answer path: generate, or score options."""

import copy
import time

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from cag.kv.blend import settle
from cag.kv.generate import forward_new_tokens, greedy_generate
from cag.modes import ContextRequest, ModeOptions, get_mode
from cag.readers import reading
from eval.metrics import squad_scores

GENERATIVE = ("extractive", "multi_doc")


def evaluate_example(task: str, mode: str, example: dict, rows: list, store, lm, layout,
                     max_new_tokens: int, option_score: str, options: ModeOptions = ModeOptions()) -> dict:
    """A predictions.jsonl record for `example` answered in `mode` from chunk `rows` (assembly order)."""
    start = time.perf_counter()
    q_ids = layout.question_ids(lm.tokenizer, example["question"])
    request = ContextRequest(store, lm, layout, rows, q_ids, options)
    built = get_mode(mode).build(request)
    context, lead, context_tokens, timings = built.context, built.lead_ids, built.context_tokens, request.timings
    if task in GENERATIVE:
        begin = time.perf_counter()
        with reading(lm, built.reader):  # reader modes: the adapter on the question and answer only
            generation = greedy_generate(lm, lead + q_ids, context, max_new_tokens)
        prediction = generation.text.split("\n")[0].strip()
        scores = squad_scores(prediction, example["answers"])
        gold = example["answers"]
        timings["prefill"] = generation.prefill_seconds * 1e3
        timings["ttft"] = (begin - start + generation.ttft_seconds) * 1e3
        record = {"prediction": prediction, "score": scores["f1"], "em": scores["em"]}
    else:
        choices = example["choices"]
        with reading(lm, built.reader):
            sums, means, prefill_s = option_logprobs(lm, context, lead + q_ids, choices, layout)
        picked = int(torch.tensor(means if option_score == "mean" else sums).argmax())
        gold = choices[example["answer_index"]]
        timings["prefill"] = prefill_s * 1e3
        timings["ttft"] = (time.perf_counter() - start) * 1e3  # all options scored
        record = {"prediction": choices[picked], "score": 100.0 * (picked == example["answer_index"]),
                  "option_logprob_sum": [round(x, 4) for x in sums],
                  "option_logprob_mean": [round(x, 4) for x in means]}
    return {"id": example["id"], "mode": mode, **record, "gold": gold,
            "context_tokens": context_tokens, "chunks": len(rows) if get_mode(mode).needs_retrieval else 0,
            "timings_ms": {k: round(v, 1) for k, v in timings.items()}}


@torch.no_grad()
def option_logprobs(lm, context, prompt_ids: list, options: list, layout) -> tuple[list, list, float]:
    """Sum and mean log-probability of each option's tokens after the prompt (context cached)."""
    start = time.perf_counter()
    settle(lm, context)  # a blend's deferred recompute, before the options branch off the cache
    cache = context.cache if context is not None else DynamicCache(config=lm.config)
    pos = context.length if context is not None else 0
    scaled = context.scaled_span if context is not None else None
    last = forward_new_tokens(lm, cache, torch.tensor(prompt_ids), pos, scaled_span=scaled)[-1]  # (vocab,)
    prefill_seconds = time.perf_counter() - start
    pos += len(prompt_ids)
    sums, means = [], []
    for option in options:
        text = option if layout.uses_chat_template else " " + option
        ids = torch.tensor(lm.tokenizer(text, add_special_tokens=False)["input_ids"])
        branch = copy.deepcopy(cache)
        logits = forward_new_tokens(lm, branch, ids, pos, logits_to_keep=0, scaled_span=scaled)  # (T, vocab)
        predictors = torch.cat([last[None], logits[:-1]])  # position t predicts token t
        logp = F.log_softmax(predictors.float(), dim=-1).gather(1, ids[:, None].to(predictors.device)).squeeze(1)
        sums.append(float(logp.sum()))
        means.append(float(logp.mean()))
    return sums, means, prefill_seconds
