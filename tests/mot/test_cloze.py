"""Cloze continuations: questions about one fact of the context, laid out as ask lays out a question."""

import random

import pytest
import torch

from cag.errors import CagError
from cag.prompt import prompt_layout
from cag.testing import tiny_lm
from mot.training.cloze import BLANK, cloze_question, sentences
from mot.training.data import make_windows, prepare_window

TEXT = ("The lobster was first described in 1758 by Carl Linnaeus. It may grow to a length of 60 cm. "
        "the animals are blue in life. Fishing for lobsters is managed in Norway and Sweden.")


def test_cloze_blanks_one_fact_of_a_sentence():
    seen = set()
    for seed in range(40):
        cloze = cloze_question(TEXT, random.Random(seed))
        assert cloze.sentence in TEXT and cloze.answer in cloze.sentence
        assert cloze.question.count(BLANK) == 1 and cloze.answer not in cloze.question.split('"')[1].split(BLANK)[0][-1:]
        # the question holds the sentence with exactly the answer's span replaced
        assert cloze.question.split('"')[1] == cloze.sentence.replace(cloze.answer, BLANK, 1) or \
            cloze.sentence.count(cloze.answer) > 1
        seen.add(cloze.answer)
    # numbers and capitalised names after a lowercase word; never a sentence's first word
    assert seen == {"1758", "Carl Linnaeus", "60", "Norway", "Sweden"}


def test_no_fact_no_question():
    assert cloze_question("the cat sat on the mat and looked at the door.", random.Random(0)) is None
    assert sentences("Too short. This sentence is long enough to count here.") == [
        "This sentence is long enough to count here."]


def test_cloze_windows_end_in_the_question_and_the_teachers_answer():
    source, target = tiny_lm("llama", seed=1), tiny_lm("qwen2", seed=2)
    paragraphs = [TEXT, "the cat sat on the mat and looked at the door. " * 6, TEXT + " " + TEXT]
    windows = make_windows(paragraphs, source.tokenizer, 4, chunk_tokens=40, chunks=2, continuation="cloze")
    assert len(windows) == 2  # the paragraph without a fact gives no window
    exact = source.tokenizer.decode(source.tokenizer(TEXT + " " + TEXT, add_special_tokens=False)["input_ids"][:80])
    make_windows([exact], source.tokenizer, 1, chunk_tokens=40, chunks=2, continuation="cloze")  # no IndexError
    assert windows and all(w.question and not w.continuation for w in windows)
    layout = prompt_layout(target.tokenizer)
    prepared = prepare_window(windows[0], source, target, prompt_layout(source.tokenizer).prefix_ids,
                              layout.prefix_ids, top_k=4, answer_tokens=3)
    question = layout.question_ids(target.tokenizer, windows[0].question)
    ids = prepared.cont_ids.tolist()
    assert ids[:len(question)] == question and len(question) < len(ids) <= len(question) + 3
    assert prepared.teacher_logp.shape == (len(ids), 4)
    # the teacher's answer is its own greedy choice: each answer token is its top-1 at the step before
    answer_steps = prepared.teacher_idx[len(question) - 1:len(ids) - 1, 0]
    assert torch.equal(answer_steps, torch.tensor(ids[len(question):]))
    with pytest.raises(CagError, match="Unknown continuation"):
        make_windows(paragraphs, source.tokenizer, 1, continuation="qa")
