"""`cag train-reader`: learn a reader adapter for one generator reading one kind of stored context
(its own independently prefilled chunks, or a frozen translator's caches).

Run folder (resumable; a killed run continues from its last checkpoint):
    config.json                 the ReaderConfig
    data/data.json, data/train/, data/heldout/
                                prepared windows (mot/reader_data.py): teacher answers and the
                                contexts, computed once and shareable between runs (--data)
    state.safetensors, state.json
                                adapter + optimizer state and the step, every checkpoint
    metrics.jsonl               the held-out baseline (adapter off), step losses, held-out KL over time
    reader.safetensors, reader.json
                                the adapter (cag.readers checkpoint), with its training record

The loss is the context correction on QA-shaped continuations: KL(teacher || generator reading the
stored context with the adapter on) over the teacher's answer tokens, the teacher being the
generator reading the chunks' text. Only the question and the answer run through the adapter; the
prefix and the context caches stay as ask reads them.
"""

import json
import logging
import random
import time
from pathlib import Path

import torch

from cag.errors import CagError
from cag.faults import fault_point
from cag.kv.chunk_cache import run_prefill
from cag.models import load_model
from cag.progress import Progress
from cag.prompt import prompt_layout
from cag.readers import NATIVE, ReaderSpec, save_reader
from mot.checkpoint import load_translator
from mot.data import read_paragraphs
from mot.losses import top1_agreement, topk_kl
from mot.modes import reads_name
from mot.reader_adapters import under_training
from mot.reader_config import ReaderConfig, check, resolve
from mot.reader_data import (load_context, load_prepared, native_context, prepare_reader_window, save_context,
                             save_prepared, translated_context)
from mot.reader_windows import corpus_chunks, make_reader_windows
from mot.registry import find_translator
from mot.run_folder import append_record, claim, drop_records_after, load_state, lr_at, save_state, train_seconds

log = logging.getLogger(__name__)
TRAINING_TASK = "training"


class Sources:
    """What the windows are prepared from: the generator (teacher, native contexts), the encoder
    (its tokenizer cuts the chunks; its caches are translated) and, reading translated, the translator."""

    def __init__(self, cfg: ReaderConfig):
        self.lm = load_model(cfg.generator, cfg.dtype, cfg.device)
        self.encoder = load_model(cfg.encoder, device=cfg.device)
        self.layout = prompt_layout(self.lm.tokenizer)
        self.encoder_prefix = prompt_layout(self.encoder.tokenizer).prefix_ids
        self.translator = None
        if cfg.reads == "translated":
            found = find_translator(self.encoder.fingerprint, self.lm.fingerprint, cfg.kind,
                                    self.encoder.name, self.lm.name)
            if found.path is None:
                raise CagError(f"Cannot train a reader of translated caches: {found.reason}.")
            self.translator = load_translator(found.path).to(self.lm.device)

    @property
    def context_key(self) -> str:
        """How this run's context files are named: "native", or the translator's fingerprint (16 digits)."""
        return "native" if self.translator is None else self.translator.fingerprint()[:16]

    def reads(self) -> tuple[str, str]:
        if self.translator is None:
            return NATIVE, NATIVE
        spec = self.translator.spec
        return self.translator.fingerprint(), reads_name(spec.source.name, self.lm.name, spec.kind)

    def context(self, texts: list) -> tuple[list, list]:
        if self.translator is None:
            return native_context(self.lm, texts, self.layout.prefix_ids)
        return translated_context(self.encoder, self.translator, self.lm, texts, self.encoder_prefix,
                                  self.layout.prefix_ids)


def train_reader(cfg: ReaderConfig, progress: Progress | None = None) -> Path:
    """Run (or resume) the reader training `cfg` describes; the run folder."""
    progress = progress or Progress()
    check(cfg)
    cfg = resolve(cfg)
    torch.manual_seed(cfg.seed)
    run = Path(cfg.out)
    claim(run / "config.json", cfg.to_json(), f"Run folder {run} holds a reader training with another config; "
          "pass another --out or delete that folder.")
    src = Sources(cfg)
    lm = src.lm
    for p in lm.model.parameters():
        p.requires_grad_(False)
    data = Path(cfg.data) if cfg.data else run / "data"
    _check_data(data, cfg, lm)
    began = time.perf_counter()
    train_set = _prepared(data / "train", cfg.corpus, cfg.windows, cfg, src, progress, cfg.seed)
    heldout = _prepared(data / "heldout", cfg.heldout_corpus, cfg.heldout_windows, cfg, src, progress, cfg.seed + 1)
    prepare_seconds = time.perf_counter() - began
    prefix = list(src.layout.prefix_ids)
    prefix_kv = run_prefill(lm.model, torch.tensor(prefix), torch.arange(len(prefix))) if prefix else None
    adapter = under_training(lm, cfg)
    params = adapter.params
    metrics_path = run / "metrics.jsonl"
    trainer = _Trainer(lm, prefix_kv, len(prefix), cfg, adapter)
    if not _has_event(metrics_path, "baseline"):
        append_record(metrics_path, {"event": "baseline", **trainer.evaluate(heldout, adapter=False)})
    if cfg.steps > 0:
        trainer.optimize(params, train_set, heldout, run, metrics_path, progress)
    final = trainer.evaluate(heldout, adapter=True)
    baseline = next(json.loads(l) for l in metrics_path.read_text().splitlines() if '"baseline"' in l)
    append_record(metrics_path, {"event": "final", **final})
    reads, name = src.reads()
    spec = ReaderSpec(reads, name, lm.name, lm.fingerprint, **adapter.spec_fields,
                      training={**cfg.to_json(), "examples": sum(len(w.questions) for w, _ in train_set),
                                "train_seconds": round(train_seconds(metrics_path), 1),
                                "prepare_seconds_this_session": round(prepare_seconds, 1),
                                "parameters": sum(p.numel() for p in params),
                                "generator_parameters": sum(p.numel() for n, p in lm.model.named_parameters()
                                                            if "lora_" not in n)},
                      metrics={"heldout": {"without_adapter": {k: baseline[k] for k in ("kl", "top1", "questions")},
                                           "with_adapter": final}})
    save_reader(spec, adapter.weights(), run / "reader", cfg.weights_dtype)
    return run


def _has_event(path: Path, event: str) -> bool:
    return path.is_file() and any(json.loads(l).get("event") == event for l in path.read_text().splitlines() if l.strip())


def _check_data(data: Path, cfg: ReaderConfig, lm) -> None:
    """Prepared windows depend on the generator, the corpora and the window shape."""
    wanted = {"generator": lm.fingerprint, "dtype": cfg.dtype, "encoder": cfg.encoder,
              "corpus": list(cfg.corpus), "heldout_corpus": list(cfg.heldout_corpus),
              "chunk_tokens": cfg.chunk_tokens, "chunk_counts": list(cfg.chunk_counts),
              "max_context_tokens": cfg.max_context_tokens, "cloze": cfg.cloze, "generated": cfg.generated,
              "answer_tokens": cfg.answer_tokens, "teacher_top_k": cfg.teacher_top_k, "seed": cfg.seed}
    claim(data / "data.json", wanted, f"Prepared data in {data} was made for another generator or window "
          "settings; use another --data folder.")


def _prepared(folder: Path, corpus: tuple, count: int, cfg: ReaderConfig, src: Sources, progress: Progress,
              seed: int) -> list:
    """[(PreparedReaderWindow, context file)] from `corpus`, made where missing (both kept in `folder`)."""
    pieces = corpus_chunks(read_paragraphs([Path(p) for p in corpus]), src.encoder.tokenizer, cfg.chunk_tokens)
    windows = make_reader_windows(pieces, src.encoder.tokenizer, count, cfg.chunk_counts,
                                  cfg.max_context_tokens, cfg.cloze, seed)
    if not windows:
        raise CagError(f"No window with a fact to ask about could be made from {', '.join(corpus)}.")
    folder.mkdir(parents=True, exist_ok=True)
    task = f"preparing {folder.name} windows"
    progress.start(task, len(windows))
    made = []
    for i, window in enumerate(windows):
        path, context = folder / f"w{i:05d}.safetensors", folder / f"w{i:05d}.{src.context_key}.safetensors"
        if not path.is_file():
            save_prepared(prepare_reader_window(window, src.lm, src.layout, cfg.generated, cfg.answer_tokens,
                                                cfg.teacher_top_k), path)
        prepared = load_prepared(path)
        if not context.is_file():
            save_context(*src.context(prepared.texts), context)
        if prepared.questions:
            made.append((prepared, context))
        progress.advance(task)
    return made


class _Trainer:
    def __init__(self, lm, prefix_kv, prefix_len: int, cfg: ReaderConfig, adapter):
        self.lm, self.prefix_kv, self.prefix_len, self.cfg, self.adapter = lm, prefix_kv, prefix_len, cfg, adapter
        self.dtype = next(lm.model.parameters()).dtype

    def losses(self, keys: list, values: list, lengths: list, question, on: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(KL, top-1 agreement) of the generator reading the stored context (chunks of `lengths`)
        then `question`'s continuation, adapter `on` or off, against the teacher on the answer tokens."""
        lm, device = self.lm, self.lm.device
        cache, start = self.adapter.cache(self.prefix_kv, self.prefix_len, [k.to(device, self.dtype) for k in keys],
                                          [v.to(device, self.dtype) for v in values], lengths, on)
        answer = question.answer_ids
        ids = torch.cat([question.question_ids, answer[:-1]])
        positions = torch.arange(start, start + ids.numel(), device=device)[None]
        hidden = lm.model.get_decoder()(input_ids=ids[None].to(device), position_ids=positions, cache=cache,
                                        use_cache=True).last_hidden_state
        # the output layer on the answer positions only, applied here: a frozen bf16 model's own
        # logits_to_keep > 1 path is very slow on CPU (MODELS.md)
        logits = lm.model.get_output_embeddings()(hidden[0, -answer.numel():].contiguous()).float()
        cap = getattr(lm.config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return topk_kl(logits, question.teacher_logp, question.teacher_idx), top1_agreement(logits, question.teacher_idx)

    @torch.no_grad()
    def evaluate(self, windows: list, adapter: bool) -> dict:
        """Held-out means over every question: KL and top-1 agreement with the teacher."""
        kl = top1 = 0.0
        count = 0
        with self.adapter.switch(adapter):
            for prepared, context in windows:
                keys, values = load_context(context)
                for q in prepared.questions:
                    k, t = self.losses(keys, values, _lengths(prepared), q, adapter)
                    kl, top1, count = kl + float(k), top1 + float(t), count + 1
        return {"kl": round(kl / max(count, 1), 5), "top1": round(top1 / max(count, 1), 5), "questions": count}

    def optimize(self, params: list, train_set: list, heldout: list, run: Path, metrics_path: Path, progress) -> None:
        cfg = self.cfg
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        step = _load_state(run, params, optimizer)
        drop_records_after(metrics_path, step, keep_events=("baseline",))
        examples = [(w, c, q) for w, c in train_set for q in w.questions]
        rng = random.Random(cfg.seed * 1000 + step)
        progress.start(TRAINING_TASK, cfg.steps)
        progress.advance(TRAINING_TASK, step)
        while step < cfg.steps:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, cfg.lr, cfg.warmup, cfg.steps)
            began = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            kl_sum = top1_sum = 0.0
            with self.adapter.switch(True):
                for prepared, context, q in rng.sample(examples, min(cfg.batch, len(examples))):
                    keys, values = load_context(context)
                    kl, top1 = self.losses(keys, values, _lengths(prepared), q, True)
                    (kl / cfg.batch).backward()
                    kl_sum, top1_sum = kl_sum + float(kl.detach()), top1_sum + float(top1)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            step += 1
            n = min(cfg.batch, len(examples))
            record = {"step": step, "lr": lr_at(step - 1, cfg.lr, cfg.warmup, cfg.steps),
                      "seconds": round(time.perf_counter() - began, 3), "kl": round(kl_sum / n, 5),
                      "top1": round(top1_sum / n, 5)}
            if step % cfg.eval_every == 0 or step == cfg.steps:
                record["heldout"] = self.evaluate(heldout, adapter=True)
            append_record(metrics_path, record)
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                _save_state(run, params, optimizer, step)
                fault_point("reader_checkpoint")
            progress.advance(TRAINING_TASK, 1, kl=record["kl"])


def _lengths(prepared) -> list:
    return [ids.numel() for ids in prepared.chunk_ids]


def _save_state(run: Path, params: list, optimizer, step: int) -> None:
    save_state(run, {f"param.{i}": p.detach().cpu().contiguous() for i, p in enumerate(params)}, optimizer, step)


def _load_state(run: Path, params: list, optimizer) -> int:
    step, tensors = load_state(run, optimizer)
    with torch.no_grad():
        for i, p in enumerate(params if tensors else []):
            p.copy_(tensors[f"param.{i}"])
    return step
