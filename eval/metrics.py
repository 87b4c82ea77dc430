"""Extractive QA metrics with the official SQuAD v1.1 normalization (max over gold answers)."""

import re
import string
from collections import Counter

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and articles, collapse whitespace (SQuAD v1.1)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def f1_score(prediction: str, gold: str) -> float:
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match_score(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def best_over_golds(metric, prediction: str, golds: list[str]) -> float:
    return max(metric(prediction, gold) for gold in golds) if golds else 0.0


def squad_scores(prediction: str, golds: list[str]) -> dict:
    """{"f1": .., "em": ..} as percentages for one prediction."""
    return {"f1": 100.0 * best_over_golds(f1_score, prediction, golds),
            "em": 100.0 * best_over_golds(exact_match_score, prediction, golds)}


def bootstrap_ratio_ci(numerator: list[float], denominator: list[float], resamples: int = 1000,
                       seed: int = 0) -> tuple[float, float, float]:
    """mean(numerator) / mean(denominator) over paired examples, with a 95% bootstrap interval."""

    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if len(num) == 0 or den.mean() == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(num), size=(resamples, len(num)))  # (resamples, n)
    den_means = den[picks].mean(axis=1)
    ratios = num[picks].mean(axis=1) / np.where(den_means == 0, np.nan, den_means)
    low, high = np.nanpercentile(ratios, [2.5, 97.5])
    return float(num.mean() / den.mean()), float(low), float(high)


def bootstrap_difference_ci(first: list[float], second: list[float], resamples: int = 1000,
                            seed: int = 0) -> tuple[float, float, float]:
    """mean(first - second) over paired examples, with a 95% bootstrap interval: whether one mode
    beats another beyond noise (an interval above 0), which two overlapping retention intervals
    cannot tell."""

    diff = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    if len(diff) == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(resamples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)
