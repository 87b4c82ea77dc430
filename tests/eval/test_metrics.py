"""SQuAD v1.1 metrics on known cases."""

import pytest

from eval.metrics import bootstrap_difference_ci, exact_match_score, f1_score, normalize_answer, squad_scores


def test_normalization_drops_articles_punctuation_case_and_spaces():
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Levi's Stadium.") == "levis stadium"
    assert normalize_answer("theater") == "theater"  # 'the' only as a word


def test_f1_partial_overlap():
    assert f1_score("Denver Broncos won", "the Denver Broncos") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert f1_score("Carolina", "Denver Broncos") == 0.0
    assert f1_score("", "Denver") == 0.0


def test_exact_match_and_max_over_golds():
    assert exact_match_score("the Denver Broncos.", "Denver Broncos") == 1.0
    scores = squad_scores("Santa Clara", ["Levi's Stadium", "Santa Clara, California", "Santa Clara"])
    assert scores == {"f1": 100.0, "em": 100.0}
    partial = squad_scores("in Santa Clara, California, USA", ["Santa Clara, California"])
    assert partial["em"] == 0.0 and 0 < partial["f1"] < 100


def test_paired_difference_interval():
    better = [60.0, 70.0, 80.0, 90.0] * 10
    worse = [b - 10.0 + (i % 3) for i, b in enumerate(better)]  # always 8-10 lower
    mean, low, high = bootstrap_difference_ci(better, worse)
    assert mean == pytest.approx(10.0 - sum(i % 3 for i in range(40)) / 40)
    assert 8.0 <= low <= mean <= high <= 10.0
    noisy_mean, noisy_low, noisy_high = bootstrap_difference_ci([0.0, 100.0] * 10, [100.0, 0.0] * 10)
    assert noisy_mean == 0.0 and noisy_low < 0 < noisy_high


def test_storage_of_a_mode_whose_caches_the_store_lacks_is_not_zero():
    from eval.report import summarize

    records = {m: [{"id": "a", "score": 1.0, "em": 1.0, "timings_ms": {"ttft": 5.0}, "context_tokens": 9}]
               for m in ("direct", "native", "translated")}
    summary = summarize("extractive", ("direct", "native", "translated"), records,
                        {"direct": 0.0, "translated": 21000.0})  # no native space in this store
    assert [summary[m]["bytes_stored_per_context_token"] for m in summary] == [0.0, None, 21000.0]
