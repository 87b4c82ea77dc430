"""Evaluate one example in one mode through cag's answer path: generate, or score options."""

import copy
import time

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from cag.defaults import DEFAULT_MIN_RETENTION
from cag.kv.generate import forward_new_tokens, greedy_generate, read_after
from cag.modes import AutoChooser, ContextRequest, ModeOptions, get_mode
from cag.modes.registry import AUTO
from eval.metrics import squad_scores

GENERATIVE = ("extractive", "multi_doc")
OPTION_SCORES = ("mean", "sum")  # multiple_choice: an option's mean or summed token log-likelihood


def evaluate_example(task: str, mode: str, example: dict, rows: list, store, lm, layout,
                     max_new_tokens: int, option_score: str, options: ModeOptions = ModeOptions()) -> dict:
    """A predictions.jsonl record for `example` answered in `mode` from chunk `rows` (assembly order).
    Mode auto answers as `cag ask --mode auto` would, recording the mode it picked and why."""
    if mode == AUTO:
        picked, options, why = auto_chooser(store, lm).choose(store, lm, rows, options)
        record = evaluate_example(task, picked.name, example, rows, store, lm, layout, max_new_tokens,
                                  option_score, options)
        return {**record, "mode": AUTO, "picked": picked.name, "pick": why}
    start = time.perf_counter()
    q_ids = layout.question_ids(lm.tokenizer, example["question"])
    request = ContextRequest(store, lm, layout, rows, q_ids, options)
    built = get_mode(mode).build(request)
    context, lead, context_tokens, timings = built.context, built.lead_ids, built.context_tokens, built.timings
    if task in GENERATIVE:
        begin = time.perf_counter()
        generation = greedy_generate(lm, lead + q_ids, context, max_new_tokens)
        prediction = generation.text.split("\n")[0].strip()
        scores = squad_scores(prediction, example["answers"])
        gold = example["answers"]
        timings["prefill"] = generation.prefill_seconds * 1e3
        timings["ttft"] = (begin - start + generation.ttft_seconds) * 1e3
        record = {"prediction": prediction, "score": scores["f1"], "em": scores["em"]}
    else:
        choices = example["choices"]
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


def auto_chooser(store, lm) -> AutoChooser:
    """The --mode auto chooser of (`store`, `lm`) at the default quality gate, prepared once per
    loaded generator and store (as one `cag ask` prepares it)."""
    choosers = lm.__dict__.setdefault("auto_choosers", {})
    key = str(store.folder)
    if key not in choosers:
        choosers[key] = AutoChooser(DEFAULT_MIN_RETENTION)
        choosers[key].prepare(store, lm)
    return choosers[key]


@torch.no_grad()
def option_logprobs(lm, context, prompt_ids: list, options: list, layout) -> tuple[list, list, float]:
    """Sum and mean log-probability of each option's tokens after the prompt (context cached)."""
    start = time.perf_counter()
    prompt = torch.tensor(prompt_ids)
    if context is not None:  # a blend's deferred recompute runs in this read, before the options branch
        cache, pos = context.cache, context.length
        last = read_after(lm, context, prompt)[-1]  # (vocab,)
    else:
        cache, pos = DynamicCache(config=lm.config), 0
        last = forward_new_tokens(lm, cache, prompt, pos)[-1]
    prefill_seconds = time.perf_counter() - start
    pos += len(prompt_ids)
    sums, means = [], []
    for option in options:
        text = option if layout.uses_chat_template else " " + option
        ids = torch.tensor(lm.tokenizer(text, add_special_tokens=False)["input_ids"])
        branch = copy.deepcopy(cache)
        logits = forward_new_tokens(lm, branch, ids, pos, logits_to_keep=0)  # (T, vocab)
        predictors = torch.cat([last[None], logits[:-1]])  # position t predicts token t
        logp = F.log_softmax(predictors.float(), dim=-1).gather(1, ids[:, None].to(predictors.device)).squeeze(1)
        sums.append(float(logp.sum()))
        means.append(float(logp.mean()))
    return sums, means, prefill_seconds
