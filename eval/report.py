"""Summaries of an eval run: metrics.json, report.md and PNG plots."""

import json
import statistics
from pathlib import Path

from cag.atomic import atomic_write_text
from cag.modes import REFERENCE, Reads, get_mode, mode_names
from cag.modes import modes as all_modes
from cag.modes.derived import DerivedMode
from cag.modes.registry import AUTO
from cag.store.spaces import Role
from eval.corpus import LLAMAINDEX
from eval.metrics import bootstrap_difference_ci, bootstrap_ratio_ci

GENERATIVE = ("extractive", "multi_doc")


def translator_modes() -> list[str]:
    """Modes that read translators, in registration order."""
    return [m.name for m in all_modes() if m.translator_kind]


def load_predictions(run: Path, ids: list, modes: tuple) -> dict:
    """mode -> records in `ids` order (only the sampled examples, each once)."""
    wanted, by_key = set(ids), {}
    for line in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] in wanted:
            by_key[(record["id"], record["mode"])] = record
    return {m: [by_key[(i, m)] for i in ids if (i, m) in by_key] for m in modes}


def summarize(task: str, modes: tuple, records: dict, bytes_per_token: dict) -> dict:
    direct = {r["id"]: r["score"] for r in records["direct"]}
    summary = {}
    for mode in modes:
        rows = records[mode]
        paired = [(r["score"], direct[r["id"]]) for r in rows if r["id"] in direct]
        ratio, low, high = bootstrap_ratio_ci([p[0] for p in paired], [p[1] for p in paired])
        ttft = [r["timings_ms"]["ttft"] for r in rows]
        entry = {"n": len(rows)}
        if task in GENERATIVE:
            entry["f1"] = round(statistics.fmean(r["score"] for r in rows), 2) if rows else None
            entry["em"] = round(statistics.fmean(r["em"] for r in rows), 2) if rows else None
        else:
            entry["accuracy"] = round(statistics.fmean(r["score"] for r in rows), 2) if rows else None
        entry.update({"retention": _finite(ratio), "retention_ci95": [_finite(low), _finite(high)],
                      "ttft_mean_ms": round(statistics.fmean(ttft), 1) if ttft else None,
                      "ttft_median_ms": round(statistics.median(ttft), 1) if ttft else None,
                      "context_tokens_mean": round(statistics.fmean(r["context_tokens"] for r in rows), 1) if rows else None,
                      # None: the store holds none of this mode's caches (a run forked with its predictions)
                      "bytes_stored_per_context_token": bytes_per_token.get(mode)})
        summary[mode] = entry
    return summary


def paired_differences(modes: tuple, records: dict) -> dict:
    """Score differences on the same examples, with bootstrap CIs: every pair of translator modes in
    the run ("translated - single" etc.), each mode built on another against it
    ("native-blend - native"), and the llama-index baseline against direct."""
    present = [m for m in translator_modes() if m in modes]
    pairs = [(first, second) for i, first in enumerate(present) for second in present[i + 1:]]
    pairs += [(m, get_mode(m).base_name) for m in modes if m in mode_names()
              and isinstance(get_mode(m), DerivedMode) and get_mode(m).base_name in modes
              and (get_mode(m).base_name, m) not in pairs]
    if LLAMAINDEX in modes and REFERENCE in modes:  # what a llama-index user gets, against cag's text RAG
        pairs.append((LLAMAINDEX, REFERENCE))
    result = {}
    for first, second in pairs:
        scores = {r["id"]: r["score"] for r in records[second]}
        pairs_ = [(r["score"], scores[r["id"]]) for r in records[first] if r["id"] in scores]
        mean, low, high = bootstrap_difference_ci([a for a, _ in pairs_], [b for _, b in pairs_])
        result[f"{first} - {second}"] = {"n": len(pairs_), "mean": _finite(mean),
                                         "ci95": [_finite(low), _finite(high)]}
    return result


def _finite(value: float):
    """Rounded, or None where undefined (a direct score of 0): JSON has no NaN."""
    return None if value != value else round(value, 3)


def storage_per_token(store, lm) -> dict:
    """Bytes of stored chunk caches per context token: native uses the generator's own caches."""
    info = store.info()
    tokens = max(info["distinct_tokens"], 1)  # a passage ingested twice is cached once
    by_reads = {Reads.TEXT: 0.0, Reads.NOTHING: 0.0}
    for space in info["cache_spaces"]:
        # the generator's own caches: its native space, or the encoder's when it is the encoder
        if space["role"] in (Role.NATIVE, Role.ENCODER) and space["fingerprint"] == lm.fingerprint[:12]:
            by_reads[Reads.NATIVE] = round(space["bytes"] / tokens, 1)
        if space["role"] is Role.ENCODER:  # translated modes read the shared encoder caches
            by_reads[Reads.ENCODER] = round(space["bytes"] / tokens, 1)
    result = {m.name: by_reads[m.reads] for m in all_modes() if m.reads in by_reads}
    if Reads.ENCODER in by_reads:
        result["encoder_caches"] = by_reads[Reads.ENCODER]
    return result


def write_report(run: Path, task: str, modes: tuple, ids: list, store, lm, config) -> dict:
    records = load_predictions(run, ids, modes)
    per_token = storage_per_token(store, lm)
    metrics = {"task": task, "model": lm.name, "encoder": config.encoder, "examples": len(ids),
               "dtype": config.dtype,
               "option_score": config.option_score if task == "multiple_choice" else None,
               "setting": _setting(task, config),
               "encoder_cache_bytes_per_token": per_token.get("encoder_caches"),
               "modes": summarize(task, modes, records, per_token)}
    retrieval = retrieval_summary(records, config.top_k)
    if retrieval:
        metrics["retrieval"] = retrieval
    picks = [r["picked"] for r in records.get(AUTO, [])]
    if picks:  # which mode auto answered in, how often
        metrics["auto_picks"] = {m: picks.count(m) for m in sorted(set(picks), key=picks.index)}
    differences = paired_differences(modes, records)
    if differences:
        metrics["paired_differences"] = differences
    atomic_write_text(run / "metrics.json", json.dumps(metrics, indent=2))
    atomic_write_text(run / "report.md", _markdown(metrics, config))
    _plots(run, metrics, records)
    return metrics


def _setting(task: str, config) -> str:
    if getattr(config, "corpus", "per-question") == "shared":
        return (f"retrieval top-{config.top_k} from one store of every passage of the dataset"
                + (f" and the documents of {config.distractors}" if config.distractors else ""))
    if task != "multi_doc":
        return "the example's own passage"
    if config.context_budget:
        return f"all paragraphs up to {config.context_budget} encoder tokens"
    return f"retrieval top-{config.top_k} of the example's own paragraphs"


def retrieval_summary(records: dict, top_k: int) -> dict | None:
    """recall@k (all of a question's gold passages among its retrieved chunks) and any@k, over the
    questions whose predictions recorded them (the same retrieval feeds every mode: the first mode's)."""
    rows = next((rs for rs in records.values() if rs and "gold_all" in rs[0]), None)
    if not rows:
        return None
    return {"k": top_k, "questions": len(rows),
            "recall_at_k": round(statistics.fmean(r["gold_all"] for r in rows), 3),
            "any_at_k": round(statistics.fmean(r["gold_any"] for r in rows), 3),
            "passages_read_mean": round(statistics.fmean(len(r["retrieved"]) for r in rows), 2)}


def _markdown(metrics: dict, config) -> str:
    score = "f1" if metrics["task"] in GENERATIVE else "accuracy"
    lines = [f"# cag eval: {Path(config.dataset).name} ({metrics['task']})", "",
             f"Model {metrics['model']}, encoder {metrics['encoder']}, {metrics['examples']} examples, "
             f"seed {config.seed}; context: {metrics['setting']}; generator dtype {metrics['dtype']}."]
    if metrics["option_score"]:
        lines.append(f"Options are scored by the {metrics['option_score']} log-likelihood of their tokens.")
    if metrics.get("retrieval"):
        r = metrics["retrieval"]
        lines.append(f"Retrieval: the gold passages among the top {r['k']} chunks for {r['recall_at_k']} of "
                     f"{r['questions']} questions (recall@{r['k']}); at least one for {r['any_at_k']}.")
    head = f"| mode | n | {score} |" + (" em |" if score == "f1" else "") + \
        " retention [95% CI] | TTFT mean / median ms | context tokens | bytes stored / token |"
    lines += ["", head, "|" + "---|" * (head.count("|") - 1)]
    for mode, m in metrics["modes"].items():
        em = f" {m['em']} |" if score == "f1" else ""
        lines.append(f"| {mode} | {m['n']} | {m[score]} |{em} {m['retention']} [{m['retention_ci95'][0]}, "
                     f"{m['retention_ci95'][1]}] | {m['ttft_mean_ms']} / {m['ttft_median_ms']} | "
                     f"{m['context_tokens_mean']} | {_or_na(m['bytes_stored_per_context_token'])} |")
    if metrics.get("auto_picks"):
        lines += ["", "Mode auto answered in: " + ", ".join(f"{m} ({n})" for m, n in metrics["auto_picks"].items())
                  + "."]
    if metrics.get("paired_differences"):
        lines += ["", f"Modes on the same examples: mean {score} difference [paired bootstrap "
                  "95% CI]; an interval above 0 means the first beats the second beyond noise.", ""]
        lines += [f"- {pair}: {d['mean']} [{d['ci95'][0]}, {d['ci95'][1]}] over {d['n']} examples"
                  for pair, d in metrics["paired_differences"].items()]
    return "\n".join(lines) + "\n"


def _or_na(value) -> str:
    return "n/a" if value is None else str(value)


def _plots(run: Path, metrics: dict, records: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(metrics["modes"])
    values, errors = [], [[], []]
    for mode in modes:  # an undefined retention (direct scored 0) is drawn as an empty bar
        m = metrics["modes"][mode]
        value, (low, high) = m["retention"], m["retention_ci95"]
        values.append(value or 0.0)
        errors[0].append(value - low if value is not None and low is not None else 0.0)
        errors[1].append(high - value if value is not None and high is not None else 0.0)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(modes, values, yerr=errors, capsize=4, color="#4c72b0")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylabel("retention (score / direct)")
    ax.set_title(f"{metrics['task']}: retention per mode (95% CI)")
    fig.tight_layout()
    fig.savefig(run / "retention.png", dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for mode in modes:
        rows = records[mode]
        ax.scatter([r["context_tokens"] for r in rows], [r["timings_ms"]["ttft"] for r in rows],
                   label=mode, s=12)
    ax.set_xlabel("context tokens")
    ax.set_ylabel("TTFT (ms)")
    ax.set_title("time to first token against context length")
    ax.legend()
    fig.tight_layout()
    fig.savefig(run / "ttft.png", dpi=120)
    plt.close(fig)
