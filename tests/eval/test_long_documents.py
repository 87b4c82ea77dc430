"""Long-document presets built from the packaged SQuAD file: the window around the question's own
paragraph, the built bytes checked against their digest, and the gold the eval reads from them."""

import json

import pytest

from cag.errors import CagError
from eval import long_documents
from eval.corpus import gold_texts, passage_texts
from eval.datasets import load_examples, resolve_dataset

PARAGRAPHS = [("p%d " % i) * (40 + 13 * (i % 5)) for i in range(60)]  # 120-380 characters each


def _tokens(first, last):
    return sum(len(p) for p in PARAGRAPHS[first:last + 1]) / long_documents.CHARS_PER_TOKEN


@pytest.mark.parametrize("own", [0, 7, 30, 59])
@pytest.mark.parametrize("place", [0.0, 0.5, 1.0])
def test_the_window_holds_the_own_paragraph_and_about_the_length_asked(own, place):
    sizes = [len(p) / long_documents.CHARS_PER_TOKEN for p in PARAGRAPHS]
    first, last = long_documents.window(sizes, own, 400, place)
    assert first <= own <= last
    assert 400 - 100 < _tokens(first, last) <= 400  # one more paragraph would pass the length
    if 20 < own < 40:  # room on both sides: `place` of the rest comes before it, to one paragraph
        wanted = place * (400 - _tokens(own, own))
        assert wanted - 90 < _tokens(first, own - 1) <= wanted  # a paragraph is at most 86 tokens


def test_a_preset_is_built_once_checked_and_rebuilt_when_its_bytes_change(cag_home):
    path, task = resolve_dataset("squad-doc-4k", None)
    assert task == "multi_doc" and path.parent == cag_home / "datasets"
    examples = load_examples(path, task)
    assert len(examples) == long_documents.QUESTIONS
    for example in examples[:50]:
        gold = gold_texts(example, task)
        assert len(gold) == 1 and any(a in gold[0] for a in example["answers"])  # its SQuAD paragraph
        size = sum(len(t) for t in passage_texts(example, task)) / long_documents.CHARS_PER_TOKEN
        assert 3500 < size <= 4096
    built = path.read_bytes()
    path.write_text(path.read_text().replace(examples[0]["question"], "Who?", 1))
    again, _ = resolve_dataset("squad-doc-4k", None)
    assert again.read_bytes() == built


def test_a_source_that_builds_other_bytes_is_an_error(cag_home, tmp_path, monkeypatch):
    lines = long_documents.SOURCE.read_text().splitlines()[:3000]
    source = tmp_path / "dev.jsonl"
    source.write_text("\n".join(json.dumps({**json.loads(line), "context": json.loads(line)["context"] + " x"})
                                for line in lines))
    monkeypatch.setattr(long_documents, "SOURCE", source)
    monkeypatch.setattr(long_documents, "QUESTIONS", 5)
    with pytest.raises(CagError, match="other bytes than expected"):
        resolve_dataset("squad-doc-4k", None)
