"""Training windows for reader adapters, shaped like use: several independently prefilled chunks of
the ingest chunk length, and questions about one of them.

A window is what an ask assembles: `n` chunks (n drawn from `chunk_counts`), each a piece of at
most `chunk_tokens` encoder tokens of a corpus paragraph (paragraphs cut as ingest cuts documents),
from different paragraphs in a seeded order, like retrieved passages or HotpotQA's distractor
paragraphs; then questions about one chunk (its position in the window drawn too):
  - cloze: one fact of a sentence blanked (mot/cloze.py);
  - generated: a question the generator writes about the chunk (mot/reader_data.py asks it).
Only the training corpus is read: never an evaluation set.
"""

import random
from dataclasses import dataclass, field

from cag.ingest.chunking import Chunker
from mot.cloze import cloze_question


@dataclass
class ReaderWindow:
    chunks: list  # chunk texts, in assembly order
    target: int  # the chunk the questions are about
    cloze: list = field(default_factory=list)  # cloze question texts


def corpus_chunks(paragraphs: list[str], tokenizer, chunk_tokens: int) -> list[list[str]]:
    """Each paragraph cut into chunks of at most `chunk_tokens` tokens of `tokenizer` (the encoder's),
    with ingest's splitter."""
    chunker = Chunker(tokenizer, chunk_tokens)
    return [[c.text for c in chunker.split(p)] for p in paragraphs]


def make_reader_windows(pieces: list[list[str]], tokenizer, count: int, chunk_counts: tuple,
                        max_tokens: int, cloze: int, seed: int) -> list[ReaderWindow]:
    """Up to `count` windows from paragraph chunks `pieces` (corpus_chunks), in a seeded order.
    A window takes consecutive chunks of randomly drawn paragraphs until it holds `n` chunks or
    `max_tokens` tokens; its target chunk needs a fact for a cloze question."""
    rng = random.Random(seed)
    flat = [p for p in pieces if p]
    windows, attempts = [], 0
    while len(windows) < count and attempts < 20 * count:
        attempts += 1
        n = rng.choice(chunk_counts)
        chunks, used = [], 0
        for paragraph in rng.sample(flat, min(len(flat), n)):
            for chunk in paragraph:
                tokens = len(tokenizer(chunk, add_special_tokens=False)["input_ids"])
                if len(chunks) == n or used + tokens > max_tokens:
                    break
                chunks.append(chunk)
                used += tokens
            if len(chunks) == n or used >= max_tokens:
                break
        if not chunks:
            continue
        target = rng.randrange(len(chunks))
        questions = [q for q in (cloze_question(chunks[target], rng) for _ in range(cloze)) if q is not None]
        unique = list(dict.fromkeys(q.question for q in questions))
        if cloze and not unique:
            continue  # no fact to ask about in the target chunk: draw another window
        windows.append(ReaderWindow(chunks, target, unique))
    return windows
