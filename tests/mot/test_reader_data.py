"""Reader adapters' training data (mot/reader_windows.py, mot/reader_data.py) with tiny models."""

import random

import torch

from cag.kv.chunk_cache import tokenize_chunk
from cag.kv.generate import greedy_generate, stop_token_ids
from cag.prompt import prompt_layout
from cag.testing import tiny_lm, tiny_tokenizer
from mot.reader_data import load_prepared, native_context, save_prepared, teacher_answers, PreparedReaderWindow
from mot.reader_windows import make_reader_windows

FACTS = ["The bridge was renamed after Alfred Nobel in 1998.", "Its length is 2,048 metres.",
         "Ada Lovelace wrote the first program.", "The report was written by the committee in 1999."]


def test_windows_are_shaped_like_use():
    tok = tiny_tokenizer()
    pieces = [[f"{FACTS[i % 4]} {FACTS[(i + 1) % 4]}", FACTS[(i + 2) % 4]] for i in range(12)]
    windows = make_reader_windows(pieces, tok, 20, (1, 3), max_tokens=300, cloze=2, seed=0)
    assert len(windows) == 20
    assert {len(w.chunks) for w in windows} <= {1, 2, 3} and any(len(w.chunks) == 3 for w in windows)
    for w in windows:
        assert 0 <= w.target < len(w.chunks) and w.cloze and len(set(w.cloze)) == len(w.cloze)
        assert sum(len(tok(c)["input_ids"]) for c in w.chunks) <= 300
        assert all("____" in q for q in w.cloze)  # a fact of the target chunk blanked
    again = make_reader_windows(pieces, tok, 20, (1, 3), max_tokens=300, cloze=2, seed=0)
    assert [(w.chunks, w.cloze) for w in again] == [(w.chunks, w.cloze) for w in windows]  # seeded


def test_batched_teacher_answers_as_the_generator_reads_one_question(tmp_path):
    """Questions decoded side by side (padded, each at its own positions) answer exactly as the
    generator answers each alone after the same text."""
    lm = tiny_lm("qwen2", seed=3)
    layout = prompt_layout(lm.tokenizer)
    chunk_ids = [tokenize_chunk(lm.tokenizer, t)[0] for t in FACTS[:3]]
    questions = [("Who wrote the first program?", "generated"), ("When?", "cloze"),
                 ("Fill in the blank: the bridge was renamed after ____ in 1998.", "cloze")]
    made = teacher_answers(lm, layout, chunk_ids, questions, answer_tokens=5, top_k=4)
    context = list(layout.prefix_ids) + torch.cat(chunk_ids).tolist()
    stops = stop_token_ids(lm)
    assert len(made) == 3
    for q, (text, kind) in zip(made, questions):
        alone = greedy_generate(lm, context + layout.question_ids(lm.tokenizer, text), None, 5).token_ids
        answer = [t for t in q.answer_ids.tolist() if t not in stops]
        assert answer == alone and q.kind == kind
        assert q.teacher_logp.shape == (q.answer_ids.numel(), 4) and (q.teacher_idx[:, 0] == q.answer_ids).all()
    window = PreparedReaderWindow(FACTS[:3], chunk_ids, made)
    save_prepared(window, tmp_path / "w.safetensors")
    loaded = load_prepared(tmp_path / "w.safetensors")
    assert loaded.texts == FACTS[:3] and [q.kind for q in loaded.questions] == [q.kind for q in made]
    assert all(torch.equal(a.teacher_logp, b.teacher_logp) for a, b in zip(loaded.questions, made))


def test_native_context_is_each_chunk_prefilled_alone():
    lm = tiny_lm("qwen2", seed=3)
    prefix = prompt_layout(lm.tokenizer).prefix_ids
    keys, values = native_context(lm, FACTS[:2], prefix)
    lengths = [tokenize_chunk(lm.tokenizer, t)[0].numel() for t in FACTS[:2]]
    assert keys[0].shape[1] == sum(lengths) and keys[0].dtype == torch.float16
    alone, _ = native_context(lm, FACTS[1:2], prefix)
    assert torch.allclose(keys[0][:, lengths[0]:], alone[0], atol=1e-3)  # no attention between chunks
