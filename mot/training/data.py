"""Training data for translators: text windows from a corpus and their precomputed model outputs.

A window is a context of `chunks` consecutive pieces of a paragraph (each `chunk_tokens` encoder
tokens, prefilled independently as ingest would) and a continuation: the text that follows it.
Prepared once per window and reused at every step (the models are frozen):
    source chunk K/V (encoder, after its answer-time prefix)          c{j}.sk.{l}, c{j}.sv.{l}
    target native chunk K/V (generator, after its prefix): the
      reconstruction targets                                          c{j}.tk.{l}, c{j}.tv.{l}
    token ids / offsets of both tokenizations                         c{j}.sids, c{j}.soff, c{j}.tids, c{j}.toff
    teacher: the generator reading prefix + context text + continuation (direct prompting):
      top-k next-token log-probs on the continuation                  cont.ids, teacher.logp, teacher.idx
      the continuation's own K/V                                      cont.k.{l}, cont.v.{l}
"""

import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import DynamicCache

from cag.atomic import atomic_write
from cag.errors import CagError
from cag.kv.chunk_cache import prefill_chunks

log = logging.getLogger(__name__)


@dataclass
class TextWindow:
    chunks: list
    continuation: str  # running text after the chunks


@dataclass
class PreparedChunk:
    text: str
    src_keys: list  # per source layer (Hs, Ts, Ds)
    src_values: list
    src_offsets: torch.Tensor  # (Ts, 2)
    tgt_ids: torch.Tensor  # (Tt,)
    tgt_offsets: torch.Tensor  # (Tt, 2)
    tgt_keys: list  # per target layer (Ht, Tt, Dt), position-free for rotary targets
    tgt_values: list


@dataclass
class PreparedWindow:
    chunks: list  # [PreparedChunk]
    cont_ids: torch.Tensor  # (Tc,)
    teacher_logp: torch.Tensor  # (Tc, k) log-probs of the teacher's top-k tokens
    teacher_idx: torch.Tensor  # (Tc, k)
    cont_keys: list  # per target layer (Ht, Tc, Dt), as cached (rotated)
    cont_values: list


def read_paragraphs(paths: list[Path]) -> list[str]:
    """Paragraphs from .jsonl (field `text`) or plain-text files (blank-line separated)."""
    paragraphs = []
    for path in paths:
        path = Path(path)
        files = sorted(path.rglob("*.jsonl")) + sorted(path.rglob("*.txt")) if path.is_dir() else [path]
        if not files:
            raise CagError(f"No .jsonl or .txt files under {path}.")
        for file in files:
            if not file.is_file():
                raise CagError(f"Corpus file {file} does not exist.")
            if file.suffix == ".jsonl":
                for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
                    if line.strip():
                        try:
                            paragraphs.append(json.loads(line)["text"])
                        except (json.JSONDecodeError, KeyError, TypeError) as exc:
                            raise CagError(f"{file}:{number}: not a JSON record with a text field ({exc}).") from exc
            else:
                paragraphs.extend(p for p in file.read_text(encoding="utf-8").split("\n\n"))
    return [p.strip() for p in paragraphs if p.strip() and "<unk>" not in p]


def make_windows(paragraphs: list[str], tokenizer, count: int, chunk_tokens: int = 64,
                 chunks: int = 2, continuation_tokens: int = 32, seed: int = 0) -> list[TextWindow]:
    """Up to `count` windows from paragraphs long enough (in `tokenizer` tokens), in a seeded order."""
    order = list(range(len(paragraphs)))
    random.Random(seed).shuffle(order)
    need = chunks * chunk_tokens + continuation_tokens
    windows = []
    for i in order:
        if len(windows) >= count:
            break
        text = paragraphs[i]
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        if len(offsets) < need:
            continue
        cuts = [offsets[j * chunk_tokens][0] for j in range(chunks + 1)]
        cuts[0] = 0
        end = offsets[need - 1][1]
        windows.append(TextWindow([text[cuts[j]:cuts[j + 1]] for j in range(chunks)], text[cuts[-1]:end]))
    return windows


@torch.no_grad()
def prepare_window(window: TextWindow, source_lm, target_lm, source_prefix, target_prefix,
                   top_k: int = 32) -> PreparedWindow:
    src = prefill_chunks(source_lm, window.chunks, source_prefix, batch_size=len(window.chunks))
    tgt = prefill_chunks(target_lm, window.chunks, target_prefix, batch_size=len(window.chunks))
    chunks = [PreparedChunk(text, s.keys, s.values, s.offsets, t.token_ids, t.offsets, t.keys, t.values)
              for text, s, t in zip(window.chunks, src, tgt)]
    context = torch.cat([torch.as_tensor(list(target_prefix), dtype=torch.int64)] + [t.token_ids for t in tgt])
    cont = torch.tensor(target_lm.tokenizer(window.continuation, add_special_tokens=False)["input_ids"])
    ids = torch.cat([context, cont])
    cache = DynamicCache()  # no config: sliding layers keep every token, as chunk prefill does
    device = target_lm.device
    out = target_lm.model(input_ids=ids[None].to(device), cache=cache, use_cache=True,
                          logits_to_keep=cont.numel())
    logp = out.logits[0].float().log_softmax(-1)  # (Tc, V)
    top = logp.topk(top_k, dim=-1)
    n = context.numel()
    cont_keys = [layer.keys[0, :, n:].cpu() for layer in cache.layers]
    cont_values = [layer.values[0, :, n:].cpu() for layer in cache.layers]
    return PreparedWindow(chunks, cont, top.values.cpu(), top.indices.cpu(), cont_keys, cont_values)


def save_window(window: PreparedWindow, path: Path) -> None:
    tensors = {"cont.ids": window.cont_ids, "teacher.logp": window.teacher_logp,
               "teacher.idx": window.teacher_idx}
    for name, items in (("cont.k", window.cont_keys), ("cont.v", window.cont_values)):
        tensors.update({f"{name}.{l}": t.half().contiguous() for l, t in enumerate(items)})
    for j, c in enumerate(window.chunks):
        tensors.update({f"c{j}.soff": c.src_offsets, f"c{j}.tids": c.tgt_ids, f"c{j}.toff": c.tgt_offsets})
        for name, items in (("sk", c.src_keys), ("sv", c.src_values), ("tk", c.tgt_keys), ("tv", c.tgt_values)):
            tensors.update({f"c{j}.{name}.{l}": t.half().contiguous() for l, t in enumerate(items)})
    meta = {"texts": json.dumps([c.text for c in window.chunks])}
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=meta))


def load_window(path: Path) -> PreparedWindow:
    with safe_open(str(path), "pt") as handle:
        texts = json.loads(handle.metadata()["texts"])
    t = load_file(str(path))

    def layers(prefix):
        count = sum(1 for k in t if k.startswith(prefix + "."))
        return [t[f"{prefix}.{l}"] for l in range(count)]  # fp16; cast where used

    chunks = [PreparedChunk(text, layers(f"c{j}.sk"), layers(f"c{j}.sv"), t[f"c{j}.soff"], t[f"c{j}.tids"],
                            t[f"c{j}.toff"], layers(f"c{j}.tk"), layers(f"c{j}.tv"))
              for j, text in enumerate(texts)]
    return PreparedWindow(chunks, t["cont.ids"], t["teacher.logp"], t["teacher.idx"],
                          layers("cont.k"), layers("cont.v"))
