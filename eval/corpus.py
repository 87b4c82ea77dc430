"""Where an evaluation's passages come from, and which chunks each question reads.

    per-question  each sampled example's own passages (its SQuAD paragraph, its HotpotQA set),
                  as every evaluation before the shared corpus did
    shared        one store of every passage of the dataset (all of its examples, not only the
                  sampled ones), plus an optional folder of distractor documents; each question
                  retrieves its top-k chunks from the whole store through the product's FAISS path,
                  as a user's store would be asked

A passage is written once per distinct text (locators L1, L2, ... in the run's passages file). The
passages an example's answer comes from (its gold: the SQuAD paragraph, HotpotQA's supporting
paragraphs) are kept per example, so that `recall@k` (all of them among the retrieved chunks) and
`any@k` are measured beside the answers.
"""

from dataclasses import dataclass, field

import numpy as np

from cag.retrieval import Retriever

CORPORA = ("per-question", "shared")
PER_QUESTION, SHARED = CORPORA
LLAMAINDEX = "llamaindex"  # the llama-index baseline's predictions (eval.llamaindex_baseline), not a cag mode


@dataclass
class Passages:
    """The passages file's records and, per example (in order), its passages' and its gold's locators."""

    records: list = field(default_factory=list)  # [{"text": ...}] in locator order
    own: list = field(default_factory=list)  # per example: the locators of its passages
    gold: list = field(default_factory=list)  # per example: the locators its answer comes from ([]: unknown)
    _seen: dict = field(default_factory=dict)  # text -> locator

    def locator(self, text: str) -> str:
        """The locator of `text`, written once."""
        if text not in self._seen:
            self._seen[text] = self.add(text)
        return self._seen[text]

    def add(self, text: str) -> str:
        """A new record of `text`; its locator."""
        self.records.append({"text": text})
        return f"L{len(self.records)}"


def passage_texts(example: dict, task: str) -> list[str]:
    """An example's passages as ingested: a multi-doc paragraph with its title on the first line."""
    if task == "multi_doc":
        return [f"{d.get('title', '')}\n{d['text']}".strip() for d in example["documents"]]
    return [example["context"]] if example["context"].strip() else []


def gold_texts(example: dict, task: str) -> list[str]:
    """The passages an example's answer comes from ([] where the dataset does not say)."""
    if task == "multi_doc":
        # HotpotQA names its gold by title; a long document marks its paragraph `supporting`
        wanted = set(example.get("supporting_titles") or ())
        return [text for d, text in zip(example["documents"], passage_texts(example, task))
                if d.get("title") in wanted or d.get("supporting")]
    return passage_texts(example, task) if task == "extractive" else []


def collect(examples: list, task: str, corpus: str, everything: list) -> Passages:
    """The passages to ingest: the sampled `examples`' own (per-question), or those of `everything`
    (the whole dataset) written before any example's (shared), each distinct text once."""
    passages = Passages()
    if corpus == SHARED:
        for example in everything:
            for text in passage_texts(example, task):
                passages.locator(text)
    for example in examples:
        texts = passage_texts(example, task)
        # per-question: an example's own passages, each its own record, in order (as ingested before)
        own = [passages.locator(t) if corpus == SHARED else passages.add(t) for t in texts]
        mine = dict(zip(texts, own))
        passages.own.append(own)
        passages.gold.append([mine[t] for t in gold_texts(example, task)])
    return passages


def retrieved(retriever: Retriever, question: str, top_k: int) -> list:
    """The question's top-k chunk rows from the whole store, in assembly order (best last)."""
    return [r.chunk for r in reversed(retriever.retrieve(question, top_k).results)]


def ranked_own(store, rows: list, question: str, top_k: int, embedder) -> list:
    """The top-k of an example's own chunk `rows` by the embedder, in assembly order (best last)."""
    vectors = store.catalog.embeddings_of([r.id for r in rows], store.config.embedding_dim)
    scores = vectors @ embedder.encode([question])[0]
    best = np.argsort(-scores)[:top_k]
    return [rows[i] for i in reversed(best)]


def retrieval_record(rows: list, gold: list) -> dict:
    """What a prediction records of its retrieval: the passages read and whether the gold ones were."""
    read = sorted({r.doc_locator for r in rows}, key=lambda loc: int(loc[1:]))
    if not gold:
        return {"retrieved": read}
    return {"retrieved": read, "gold_all": set(gold) <= set(read), "gold_any": bool(set(gold) & set(read))}
