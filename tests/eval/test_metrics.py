"""SQuAD v1.1 metrics on known cases."""

import pytest

from eval.metrics import exact_match_score, f1_score, normalize_answer, squad_scores


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
