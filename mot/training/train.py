"""`cag train`: learn a translator for one (source model, target model) pair.

Run folder (resumable; a killed run continues from its last checkpoint):
    config.json            the TrainConfig
    data/train/*.safetensors, data/heldout/*.safetensors
                           prepared windows (model outputs computed once; reused every step)
    state.safetensors, state.json
                           translator + optimizer state and the step, written every checkpoint
    metrics.jsonl          training losses and held-out evaluations over time
    translator.safetensors, translator.json
                           the final checkpoint, with its held-out diagnostics
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
from cag.prompt import prompt_layout
from cag.progress import Progress
from cag.translations import TranslatorKind
from mot.checkpoint import load_translator, read_record, save_translator
from mot.training.data import load_window, make_windows, prepare_window, read_paragraphs, save_window
from mot.injection import default_window
from mot.training.ridge import RidgeFit
from mot.training.run_folder import append_record, claim, drop_records_after, load_state, lr_at, save_state, train_seconds
from mot.training.step import chunk_tokens, chunk_weights, run_window
from mot.training.config import ABSENT_MEANS, TrainConfig, check, resolve, without_retired
from mot.translator import TrainingRecord, Translator, make_spec

log = logging.getLogger(__name__)
TRAINING_TASK = "training"  # progress task of the optimizer steps


def train(cfg: TrainConfig, progress: Progress | None = None) -> Path:
    """Run (or resume) the training `cfg` describes; the run folder."""
    progress = progress or Progress()
    check(cfg)
    torch.manual_seed(cfg.seed)
    source = load_model(cfg.source, device=cfg.device)
    target = load_model(cfg.target, device=cfg.device)
    cfg = resolve(cfg, target.geometry.num_layers)
    run = Path(cfg.out)
    _start_or_resume(run, cfg)
    for p in target.model.parameters():
        p.requires_grad_(False)
    s_prefix = prompt_layout(source.tokenizer).prefix_ids
    t_prefix = prompt_layout(target.tokenizer).prefix_ids
    prepare_started = time.perf_counter()
    data = Path(cfg.data) if cfg.data else run / "data"
    _check_data_folder(data, cfg, source, target)
    train_set = _prepared(data / "train", cfg.corpus, cfg.windows, cfg, source, target,
                          s_prefix, t_prefix, progress, seed=cfg.seed)
    heldout = _prepared(data / "heldout", cfg.heldout_corpus, cfg.heldout_windows, cfg, source,
                        target, s_prefix, t_prefix, progress, seed=cfg.seed + 1)
    prepare_seconds = time.perf_counter() - prepare_started  # ~0 when the windows were prepared before
    spec = make_spec(cfg.kind, source, target, cfg.pairs_per_layer, cfg.experts, cfg.top_k, cfg.rank,
                     cfg.router_hidden, cfg.target_embeddings, cfg.token_rank)
    prefix_kv = run_prefill(target.model, torch.tensor(t_prefix), torch.arange(len(t_prefix))) if t_prefix else None
    started = time.perf_counter()
    if cfg.init:
        translator, init_record = _initial_translator(cfg.init, spec)
        translator = translator.to(cfg.device)
        start = {"tokens": sum(c.tgt_ids.numel() for w in train_set for c in w.chunks),
                 "init_weights_sha256": init_record["weights_sha256"]}
    else:
        translator = Translator(spec).to(cfg.device)
        start = _fit_ridge(translator, target, train_set, len(t_prefix), cfg, progress)
        log.info("ridge fit on %d tokens in %.1f s", start["tokens"], time.perf_counter() - started)
    start["seconds"] = time.perf_counter() - started
    metrics_path = run / "metrics.jsonl"
    if TranslatorKind(cfg.kind) is not TranslatorKind.RIDGE and cfg.steps > 0:
        _optimize(translator, target, prefix_kv, len(t_prefix), train_set, heldout, cfg, run,
                  metrics_path, progress)
    translator.eval()
    final = evaluate(translator, target, prefix_kv, len(t_prefix), heldout, cfg)
    training = {**cfg.to_json(), "train_tokens": start["tokens"],
                **({"init_weights_sha256": start["init_weights_sha256"]} if cfg.init else {}),
                "train_seconds": round(train_seconds(metrics_path) + start["seconds"], 1),
                "prepare_seconds_this_session": round(prepare_seconds, 1),
                "parameters": translator.parameter_count(),
                "target_parameters": sum(p.numel() for p in target.model.parameters())}
    translator.record = TrainingRecord(training, {"heldout": final})
    append_record(metrics_path, {"event": "final", **final})
    save_translator(translator, run / "translator", cfg.dtype)
    return run


def _initial_translator(path: str, spec) -> tuple:
    """The translator at `path` (verified), to continue training from: its shape must be the one
    this run's options make (same models, layer map, experts, embeddings...)."""
    translator = load_translator(Path(path))
    # through JSON both ways: a loaded geometry holds lists where a made one holds tuples
    held, wanted = (json.loads(json.dumps(s.to_dict())) for s in (translator.spec, spec))
    differ = sorted(k for k in wanted if held.get(k) != wanted[k])
    if differ:
        raise CagError(f"--init {path} is a translator of another shape ({', '.join(differ)} differ "
                       "from this run's options); pass the options it was trained with.")
    translator.record = TrainingRecord()  # this run's training record replaces the one it was loaded with
    return translator.train(), read_record(Path(path))


def _start_or_resume(run: Path, cfg: TrainConfig) -> None:
    defaults = {**ABSENT_MEANS, "source": cfg.source, "target": cfg.target, "out": cfg.out}
    claim(run / "config.json", cfg.to_json(), f"Run folder {run} holds a training run with another "
           "config; pass another --out or delete that folder.", defaults,
          held_as=lambda held: without_retired(held, f"The run in {run}"))


def _check_data_folder(data: Path, cfg: TrainConfig, source, target) -> None:
    """Prepared windows depend on both models, the corpora and the window shape: a data folder
    records them and refuses to be reused for anything else."""
    wanted = {"source": source.fingerprint, "target": target.fingerprint, "corpus": list(cfg.corpus),
              "heldout_corpus": list(cfg.heldout_corpus), "chunk_tokens": cfg.chunk_tokens,
              "chunks": cfg.chunks, "continuation_tokens": cfg.continuation_tokens,
              "teacher_top_k": cfg.teacher_top_k, "seed": cfg.seed}
    claim(data / "data.json", wanted, f"Prepared data in {data} was made for other models or "
           "window settings; use another --data folder.")


def _prepared(folder: Path, corpus: list, count: int, cfg: TrainConfig, source, target, s_prefix,
              t_prefix, progress: Progress, seed: int) -> list:
    """Prepared windows from `corpus` (cached in `folder`; missing ones are computed)."""
    if not corpus:
        raise CagError("No corpus given: pass --corpus (and --heldout) paths.")
    paragraphs = read_paragraphs([Path(p) for p in corpus])
    texts = make_windows(paragraphs, source.tokenizer, count, cfg.chunk_tokens, cfg.chunks,
                         cfg.continuation_tokens, seed)
    if not texts:
        shape = f"{cfg.chunks} x {cfg.chunk_tokens} + {cfg.continuation_tokens} tokens"
        raise CagError(f"No paragraph in {', '.join(map(str, corpus))} is long enough for a window of {shape}.")
    if len(texts) < count:
        log.warning("only %d windows of the %d asked fit in %s", len(texts), count, corpus)
    folder.mkdir(parents=True, exist_ok=True)
    task = f"preparing {folder.name} windows"
    progress.start(task, len(texts))
    windows = []
    for i, text in enumerate(texts):
        path = folder / f"w{i:05d}.safetensors"
        if not path.is_file():
            save_window(prepare_window(text, source, target, s_prefix, t_prefix, cfg.teacher_top_k), path)
        windows.append(load_window(path))
        progress.advance(task)
    return windows


def _fit_ridge(translator, target, windows: list, prefix_len: int, cfg: TrainConfig, progress) -> dict:
    fit = RidgeFit(translator)
    progress.start("ridge fit", len(windows))
    for window in windows:
        pos = prefix_len
        for chunk in window.chunks:
            weights, _ = chunk_weights(chunk)
            positions = torch.arange(pos, pos + chunk.tgt_ids.numel())
            fit.add(chunk.src_keys, chunk.src_values, weights, chunk.tgt_keys, chunk.tgt_values, positions,
                    chunk_tokens(translator, target, chunk))
            pos += chunk.tgt_ids.numel()
        progress.advance("ridge fit")
    return fit.solve(cfg.ridge_lambda)


def _trainable(translator) -> list:
    """Parameters to train (all, from the ridge start; in window mode only the window's layers)."""
    return [p for p in translator.parameters() if p.requires_grad]


def _optimize(translator, target, prefix_kv, prefix_len, train_set, heldout, cfg, run, metrics_path, progress):
    if cfg.mode == "window":
        for layer, mod in enumerate(translator.layers):
            if not cfg.window[0] <= layer < cfg.window[1]:
                mod.requires_grad_(False)
    params = _trainable(translator)
    # the ridge trunks read raw features (any scale): Adam's fixed-size steps at the experts' rate
    # wreck them in a few steps (measured: reconstruction 0.20 -> 0.55 in 17 steps at 1e-3), so
    # they move at trunk_lr_scale of it; experts and routers read normalized features
    # (the token projection feeds the trunks too, and is a ridge solution: it moves at their rate)
    trunk = [p for name, p in translator.named_parameters()
             if (".base." in name or name == "token_projection") and p.requires_grad]
    trunk_ids = {id(p) for p in trunk}
    rest = [p for p in params if id(p) not in trunk_ids]
    optimizer = torch.optim.AdamW([{"params": rest, "scale": 1.0},
                                   {"params": trunk, "scale": cfg.trunk_lr_scale, "weight_decay": 0.0}],
                                  lr=cfg.lr, weight_decay=cfg.weight_decay)
    step = _load_state(run, translator, optimizer)
    drop_records_after(metrics_path, step)  # steps after the last checkpoint are redone
    rng = random.Random(cfg.seed * 1000 + step)
    progress.start(TRAINING_TASK, cfg.steps)
    progress.advance(TRAINING_TASK, step)
    translator.train()
    while step < cfg.steps:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg.lr, cfg.warmup, cfg.steps) * group["scale"]
        began = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        totals = {"loss": 0.0, "reconstruction": 0.0, "kl": 0.0, "continuation_kv": 0.0, "top1": 0.0}
        for window in rng.sample(train_set, min(cfg.batch, len(train_set))):
            r = run_window(translator, target, prefix_kv, prefix_len, window, cfg.mode, cfg.window)
            loss = (cfg.w_reconstruction * r.reconstruction + cfg.w_kl * r.kl
                    + cfg.w_continuation_kv * r.continuation_kv + cfg.w_balance * r.balance) / cfg.batch
            loss.backward()
            for name, value in (("loss", loss * cfg.batch), ("reconstruction", r.reconstruction),
                                ("kl", r.kl), ("continuation_kv", r.continuation_kv), ("top1", r.top1)):
                totals[name] += float(value.detach() if torch.is_tensor(value) else value) / cfg.batch
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        step += 1
        record = {"step": step, "lr": lr_at(step - 1, cfg.lr, cfg.warmup, cfg.steps), "seconds": round(time.perf_counter() - began, 3),
                  **{k: round(v, 5) for k, v in totals.items()}}
        if step % cfg.eval_every == 0 or step == cfg.steps:
            translator.eval()
            record["heldout"] = evaluate(translator, target, prefix_kv, prefix_len, heldout, cfg,
                                         diagnostics=False)
            translator.train()
        append_record(metrics_path, record)
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            _save_state(run, translator, optimizer, step)
            fault_point("train_checkpoint")
        progress.advance(TRAINING_TASK, 1, loss=totals["loss"], kl=totals["kl"])


@torch.no_grad()
def evaluate(translator, target, prefix_kv, prefix_len, windows, cfg, diagnostics: bool = True) -> dict:
    """Held-out means: reconstruction nMSE, KL and top-1 agreement vs the native teacher in the
    translator's mode; with diagnostics also the other mode and the no-context floor."""
    def mean_over(mode, with_context=True, window=None):
        sums = {"reconstruction": 0.0, "kl": 0.0, "top1": 0.0, "misaligned": 0}
        for w in windows:
            r = run_window(translator, target, prefix_kv, prefix_len, w, mode, window, with_context)
            sums["reconstruction"] += float(r.reconstruction) / len(windows)
            sums["kl"] += float(r.kl) / len(windows)
            sums["top1"] += float(r.top1) / len(windows)
            sums["misaligned"] += r.misaligned
        return {k: round(v, 5) if isinstance(v, float) else v for k, v in sums.items()}

    result = {cfg.mode: mean_over(cfg.mode, window=cfg.window)}
    if diagnostics:
        other = "window" if cfg.mode == "full" else "full"
        window = cfg.window or default_window(target.geometry.num_layers)
        result[other] = mean_over(other, window=window)
        none = mean_over("full", with_context=False)
        result["none"] = {"kl": none["kl"], "top1": none["top1"]}
        result["window_layers"] = window
    return result


def _save_state(run: Path, translator, optimizer, step: int) -> None:
    save_state(run, {f"model.{k}": v.detach().cpu().contiguous() for k, v in translator.state_dict().items()},
               optimizer, step)


def _load_state(run: Path, translator, optimizer) -> int:
    step, tensors = load_state(run, optimizer)
    if tensors:
        translator.load_state_dict({k[6:]: v for k, v in tensors.items()})
    return step
