"""Wider multi-document contexts from a multi_doc dataset: each question keeps its own paragraphs
and gets distractor paragraphs of *other* questions, up to `passages` in all, in a seeded order.

HotpotQA's distractor setting gives 10 paragraphs per question (2 gold + 8 retrieved distractors,
about 1,350 generator tokens). Long-context CAG reads more: `widen(examples, 20)` makes contexts of
20 paragraphs (about 2,700 tokens), the gold ones kept, the added ones from other questions (never
a paragraph whose title the question already holds), everything shuffled with
`random.Random(f"{seed}|{id}")`. Deterministic: the same input, `passages` and `seed` give the same
file, byte for byte (`scripts/build_hotpotqa_wide.py` writes it, its SOURCE.md gives the sha256).
"""

import random

from cag.errors import CagError


def widen(examples: list[dict], passages: int = 20, seed: int = 0) -> list[dict]:
    """Each example with `passages` documents: its own plus others' paragraphs, shuffled."""
    if passages < 1:
        raise CagError(f"passages must be at least 1, not {passages}.")
    pool = [(ex["id"], doc) for ex in examples for doc in ex["documents"]]
    widened = []
    for ex in examples:
        rng = random.Random(f"{seed}|{ex['id']}")
        own = {doc.get("title", "") for doc in ex["documents"]}
        candidates = [doc for owner, doc in pool if owner != ex["id"] and doc.get("title", "") not in own]
        needed = max(0, passages - len(ex["documents"]))
        if needed > len(candidates):
            raise CagError(f"Only {len(candidates)} other paragraphs to add to {ex['id']}; "
                           f"cannot reach {passages} passages.")
        added, seen = [], set(own)
        for doc in rng.sample(candidates, len(candidates)):  # a seeded order over all candidates
            if len(added) == needed:
                break
            if doc.get("title", "") not in seen:  # one paragraph per title
                seen.add(doc.get("title", ""))
                added.append(doc)
        documents = list(ex["documents"]) + added
        rng.shuffle(documents)
        widened.append({**ex, "documents": documents, "added_from_other_questions": len(added)})
    return widened
