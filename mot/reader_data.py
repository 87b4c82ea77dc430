"""Prepared data for reader adapters: per window, the teacher (the generator reading the text) and
the contexts a reader reads (the generator's own chunk caches, or a translator's), computed once.

    wNNNNN.safetensors        chunk token ids (the generator's), and per question: its ids as ask
                              lays a question out, the teacher's greedy answer (its stop token kept),
                              the teacher's top-k next-token log-probs on every answer position
    wNNNNN.native.safetensors the generator's own chunk caches, each prefilled after its prefix as
                              ingest does: per layer K (position-free) and V, (kv_heads, T, head_dim)
    wNNNNN.<T16>.safetensors  the same chunks translated by the translator of fingerprint T (its
                              first 16 hex digits), from the encoder's chunk caches (fp16, as stored)

Teacher: the generator reading prefix + the chunks' text + the question (direct prompting) and
answering greedily; the reader is trained so that the generator reading the stored context answers
the same way (top-k KL on the answer tokens, mot/reader_train.py).
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import DynamicCache

from cag.atomic import atomic_write
from cag.kv.chunk_cache import prefill_chunks, tokenize_chunk
from cag.kv.generate import greedy_generate, stop_token_ids
from mot.reader_windows import ReaderWindow
from mot.translator import translate_chunks

log = logging.getLogger(__name__)
WRITE_QUESTION = ("Passage:\n{passage}\n\nWrite one short question that this passage answers, about a "
                  "specific fact in it (a name, a number, a date or a place). Reply with the question only.")


@dataclass
class ReaderQuestion:
    question_ids: torch.Tensor  # (Tq,) as ask lays the question out after the context
    answer_ids: torch.Tensor  # (Ta,) the teacher's greedy answer, its stop token kept
    teacher_logp: torch.Tensor  # (Ta, k) top-k log-probs at each answer position
    teacher_idx: torch.Tensor  # (Ta, k)
    kind: str  # "cloze" or "generated"


@dataclass
class PreparedReaderWindow:
    texts: list
    chunk_ids: list  # [(T_j,)] the generator's token ids of each chunk
    questions: list  # [ReaderQuestion]

    @property
    def context_tokens(self) -> int:
        return sum(ids.numel() for ids in self.chunk_ids)


def write_question(lm, passage: str, max_tokens: int = 40) -> str | None:
    """A question the generator writes about `passage` (None when it writes none)."""
    tokenizer = lm.tokenizer
    text = WRITE_QUESTION.format(passage=passage.strip())
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
                                            add_generation_prompt=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    else:
        ids = tokenizer(text + "\nQuestion:", add_special_tokens=True)["input_ids"]
    line = greedy_generate(lm, list(ids), None, max_tokens).text.strip().split("\n")[0].strip()
    line = line.removeprefix("Question:").strip()
    return line if line.endswith("?") and 3 <= len(line.split()) <= 40 else None


@torch.no_grad()
def teacher_answers(lm, layout, chunk_ids: list, questions: list, answer_tokens: int, top_k: int) -> list:
    """The generator reading the chunks' text answers each (question text, kind): ReaderQuestions.
    The context is prefilled once; the questions continue it side by side (one batch, right-padded,
    each at its own positions, padding masked), and are decoded greedily together."""
    if not questions:
        return []
    context = torch.cat([torch.as_tensor(list(layout.prefix_ids), dtype=torch.int64)] + list(chunk_ids))
    device, n = lm.device, context.numel()
    cache = DynamicCache()  # no config: sliding layers keep every token (the masks apply the window)
    lm.model(input_ids=context[None].to(device), cache=cache, use_cache=True, logits_to_keep=1)
    q_ids = [torch.tensor(layout.question_ids(lm.tokenizer, text), dtype=torch.int64) for text, _ in questions]
    rows, width = len(q_ids), max(q.numel() for q in q_ids)
    lengths = torch.tensor([q.numel() for q in q_ids])
    cache.batch_repeat_interleave(rows)
    ids = torch.zeros((rows, width), dtype=torch.int64)
    mask = torch.zeros((rows, n + width), dtype=torch.int64)
    mask[:, :n] = 1
    for row, q in enumerate(q_ids):
        ids[row, :q.numel()] = q
        mask[row, n:n + q.numel()] = 1
    positions = torch.arange(n, n + width)[None].expand(rows, -1)
    logits = _last_logits(lm, ids, mask, positions, cache, lengths - 1)  # (B, V)
    stops, answers, logps, idxs = stop_token_ids(lm), [[] for _ in q_ids], [[] for _ in q_ids], [[] for _ in q_ids]
    done = [False] * rows
    for step in range(answer_tokens):
        top = logits.float().log_softmax(-1).topk(top_k)
        tokens = top.indices[:, 0]
        for row in range(rows):
            if not done[row]:
                answers[row].append(int(tokens[row]))
                logps[row].append(top.values[row].cpu())
                idxs[row].append(top.indices[row].cpu())
                done[row] = int(tokens[row]) in stops
        if all(done) or step == answer_tokens - 1:
            break
        mask = torch.cat([mask, torch.ones((rows, 1), dtype=torch.int64)], dim=1)
        logits = _last_logits(lm, tokens[:, None].cpu(), mask, (n + lengths + step)[:, None], cache,
                              torch.zeros(rows, dtype=torch.int64))
    made = []
    for row, (q, (_, kind)) in enumerate(zip(q_ids, questions)):
        if answers[row][0] in stops:
            continue  # no answer at all: nothing to learn from
        made.append(ReaderQuestion(q, torch.tensor(answers[row], dtype=torch.int64), torch.stack(logps[row]),
                                   torch.stack(idxs[row]), kind))
    return made


def _last_logits(lm, ids, mask, positions, cache, last) -> torch.Tensor:
    """(B, V) the logits at column `last[b]` of each row of a forward over (B, T) `ids`."""
    device = lm.device
    hidden = lm.model.get_decoder()(input_ids=ids.to(device), attention_mask=mask.to(device),
                                    position_ids=positions.to(device), cache=cache, use_cache=True).last_hidden_state
    picked = hidden[torch.arange(ids.shape[0], device=device), last.to(device)].contiguous()  # (B, H)
    logits = lm.model.get_output_embeddings()(picked).float()
    cap = getattr(lm.config, "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits


def prepare_reader_window(window: ReaderWindow, lm, layout, generated: int, answer_tokens: int,
                          top_k: int) -> PreparedReaderWindow:
    chunk_ids = [tokenize_chunk(lm.tokenizer, text)[0] for text in window.chunks]
    questions = [(q, "cloze") for q in window.cloze]
    for _ in range(generated):
        written = write_question(lm, window.chunks[window.target])
        if written is not None:
            questions.append((written, "generated"))
    made = teacher_answers(lm, layout, chunk_ids, questions, answer_tokens, top_k)
    return PreparedReaderWindow(list(window.chunks), chunk_ids, made)


def save_prepared(window: PreparedReaderWindow, path: Path) -> None:
    tensors = {f"c{j}.ids": ids for j, ids in enumerate(window.chunk_ids)}
    for i, q in enumerate(window.questions):
        tensors.update({f"q{i}.ids": q.question_ids, f"q{i}.answer": q.answer_ids,
                        f"q{i}.logp": q.teacher_logp.contiguous(), f"q{i}.idx": q.teacher_idx.contiguous()})
    meta = {"texts": json.dumps(window.texts), "kinds": json.dumps([q.kind for q in window.questions])}
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))


def load_prepared(path: Path) -> PreparedReaderWindow:
    with safe_open(str(path), "pt") as handle:
        meta = handle.metadata()
    t = load_file(str(path))
    texts, kinds = json.loads(meta["texts"]), json.loads(meta["kinds"])
    questions = [ReaderQuestion(t[f"q{i}.ids"], t[f"q{i}.answer"], t[f"q{i}.logp"], t[f"q{i}.idx"], kind)
                 for i, kind in enumerate(kinds)]
    return PreparedReaderWindow(texts, [t[f"c{j}.ids"] for j in range(len(texts))], questions)


@torch.no_grad()
def native_context(lm, texts: list, prefix_ids) -> tuple[list, list]:
    """The generator's own chunk caches, each prefilled after its prefix: per layer (H, T, D), concatenated."""
    caches = prefill_chunks(lm, texts, prefix_ids, batch_size=4)
    return _concatenated(caches)


@torch.no_grad()
def translated_context(encoder, translator, lm, texts: list, encoder_prefix, prefix_ids) -> tuple[list, list]:
    """The encoder's chunk caches (rounded to fp16, as a store keeps them) translated for `lm`."""
    sources = [c.to(torch.float16) for c in prefill_chunks(encoder, texts, encoder_prefix, batch_size=4)]
    return _concatenated(translate_chunks(translator, sources, lm, prefix_ids))


def _concatenated(caches: list) -> tuple[list, list]:
    layers = range(len(caches[0].keys))
    keys = [torch.cat([c.keys[l] for c in caches], dim=1).half().cpu() for l in layers]
    values = [torch.cat([c.values[l] for c in caches], dim=1).half().cpu() for l in layers]
    return keys, values


def save_context(keys: list, values: list, path: Path) -> None:
    tensors = {f"k.{l}": k.contiguous() for l, k in enumerate(keys)}
    tensors.update({f"v.{l}": v.contiguous() for l, v in enumerate(values)})
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp)))


def load_context(path: Path) -> tuple[list, list]:
    t = load_file(str(path))
    layers = sum(1 for k in t if k.startswith("k."))
    return [t[f"k.{l}"] for l in range(layers)], [t[f"v.{l}"] for l in range(layers)]
