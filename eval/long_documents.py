"""Long-document QA from a packaged set: each SQuAD question asked over a long stretch of Wikipedia.

    squad-doc-4k, squad-doc-8k, squad-doc-16k, squad-doc-32k

SQuAD v1.1's dev file holds 2,067 paragraphs of 48 articles, in article order (about 284k encoder
tokens). For one question on each of 300 paragraphs (seeded), the document is the run of
consecutive paragraphs of about N tokens that holds the question's own paragraph at a seeded place
(from the start of the run to its end): the neighbouring paragraphs of its article, crossing into
the next or previous article where one is short. Each paragraph is one `documents` entry, the question's own marked `supporting` (its
gold), so the context is the whole document read in order (`cag eval --context-budget`, tokens up to
the generator's positions), or a top-k retrieved from it.

Built on first use into $CAG_HOME/datasets/ from the packaged file alone: the same bytes on every
machine (no tokenizer: tokens estimated at 4.45 characters each, measured for smollm2-135m and
qwen2.5-coder-0.5b on these paragraphs: 4.45 and 4.53), checked against their sha256 whenever read.
"""

import hashlib
import json
import random
from pathlib import Path

from cag.atomic import atomic_write_text
from cag.errors import CagError
from cag.home import cag_home

SOURCE = Path(__file__).resolve().parents[1] / "data" / "squad_v1.1" / "dev.jsonl"
LENGTHS = {"squad-doc-4k": 4096, "squad-doc-8k": 8192, "squad-doc-16k": 16384, "squad-doc-32k": 32768}
SHA256 = {"squad-doc-4k": "0b7ccf198fc1198d2fd1902b4cb10cd16ce3711868cdfc9b0a569c86d9fd3eb6",
          "squad-doc-8k": "abb40bd95f4d5a9519c81f0141e479fa8f4945c27f814cc64858bbc37a962450",
          "squad-doc-16k": "2f32ee8434329058c86de6a35202bb5f17c6ce37258acc5815502cf257311aa8",
          "squad-doc-32k": "1f07340acbb858182e2594564e5aa4914385d004d6815d927bf08867953cad7e"}
CHARS_PER_TOKEN = 4.45
SEED = 0
QUESTIONS = 300  # a 32k preset takes about 45 MB


def document_dataset(name: str) -> Path:
    """The JSON Lines file of preset `name` (of LENGTHS), built on first use (again where its bytes
    are not the expected ones)."""
    path = cag_home() / "datasets" / f"{name}.jsonl"
    if path.is_file() and _sha256(path) == SHA256[name]:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    records = build(LENGTHS[name], SOURCE.read_text(encoding="utf-8").splitlines())
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    if _sha256(path) != SHA256[name]:
        raise CagError(f"{path}: built from {SOURCE} with other bytes than expected ({SHA256[name][:12]}...); "
                       "is the packaged SQuAD file changed?")
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()  # the file's own digest, as sha256sum prints it


def build(tokens: int, lines: list[str]) -> list[dict]:
    """multi_doc records: one question on each of QUESTIONS paragraphs (seeded), over about
    `tokens` tokens of consecutive paragraphs around its own."""
    paragraphs, questions = [], {}  # paragraph texts in file order; paragraph index -> its questions
    index = {}
    for line in lines:
        if line.strip():
            record = json.loads(line)
            if record["context"] not in index:
                index[record["context"]] = len(paragraphs)
                paragraphs.append(record["context"])
            questions.setdefault(index[record["context"]], []).append(record)
    rng = random.Random(SEED)
    size = [len(p) / CHARS_PER_TOKEN for p in paragraphs]  # estimated tokens, once for every window
    records = []
    for own in sorted(rng.sample(sorted(questions), QUESTIONS)):
        question = rng.choice(questions[own])
        first, last = window(size, own, tokens, rng.random())
        records.append({"id": question["id"], "question": question["question"], "answers": question["answers"],
                        "documents": [{"title": "", "text": paragraphs[i], **({"supporting": True} if i == own else {})}
                                      for i in range(first, last + 1)]})
    return records


def window(size: list[float], own: int, tokens: int, place: float) -> tuple[int, int]:
    """(first, last) paragraph of a run of about `tokens` tokens (`size`: each paragraph's) holding
    paragraph `own`, with about `place` (0..1) of the rest before it; where the file ends, the
    other side takes the rest."""
    before_budget = place * max(0.0, tokens - size[own])
    first, last, used = own, own, size[own]
    while first > 0 and used - size[own] + size[first - 1] <= before_budget:
        first -= 1
        used += size[first]
    while last + 1 < len(size) and used + size[last + 1] <= tokens:
        last += 1
        used += size[last]
    while first > 0 and used + size[first - 1] <= tokens:  # the file's end reached: fill before
        first -= 1
        used += size[first]
    return first, last
