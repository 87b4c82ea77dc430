"""Cloze questions from running text: training continuations shaped like use (issue: QA retention).

A translated cache keeps a text's topic but loses its facts; running-text continuations barely test
facts, questions do. From a window's context, pick a sentence and blank one fact in it (a number or
date, or a capitalised name not at the sentence start), and ask the generator to fill it in:

    context: "... In 1998 the bridge was renamed after Alfred Nobel ..."
    question: 'Fill in the blank with the words the context uses: "In ____ the bridge was renamed
              after Alfred Nobel."'

The teacher is the generator answering from the text itself (direct prompting); the translator is
trained to make it answer the same from the translated cache. The blanked span is kept for
inspection only: the target is the teacher's answer, right or wrong.
"""

import random
import re
from dataclasses import dataclass

QUESTION = 'Fill in the blank with the words the context uses: "{sentence}"'
BLANK = "____"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# a number (with separators, a unit or a percent), or a run of capitalised words after a lowercase
# word or punctuation (so not the sentence's first word)
_FACTS = re.compile(r"(?<![\w.])\d[\d,.]*\d(?:\s?%)?(?![\w])|(?<![\w.])\d(?![\w.])|"
                    r"(?<=[a-z,;:] )[A-Z][\w'-]+(?: (?:of |the |de |von )?[A-Z][\w'-]+)*")


@dataclass(frozen=True)
class Cloze:
    question: str
    answer: str  # the blanked span (for inspection; training follows the teacher)
    sentence: str


def sentences(text: str, min_words: int = 6, max_words: int = 60) -> list[str]:
    found = [s.strip() for s in _SENTENCE_END.split(text)]
    return [s for s in found if min_words <= len(s.split()) <= max_words and s[-1:] in ".!?"]


def cloze_question(text: str, rng: random.Random) -> Cloze | None:
    """A cloze question about one fact of `text`, or None when no sentence holds a fact."""
    candidates = [(s, m) for s in sentences(text) for m in _FACTS.finditer(s)]
    if not candidates:
        return None
    sentence, match = rng.choice(candidates)
    blanked = sentence[:match.start()] + BLANK + sentence[match.end():]
    return Cloze(QUESTION.format(sentence=blanked), match.group(0), sentence)
