"""`cag eval`: run a QA dataset through cag's real path in several modes, resumably.

Run folder: config.json, contexts/ (the examples' passages as JSON Lines, ingested into store/ with
the real ingest pipeline), predictions.jsonl (one line per example and mode, appended and synced as
they finish, so a killed run continues where it stopped), then metrics.json, report.md and plots.
"""

import json
import logging
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cag.atomic import atomic_write_text
from cag.defaults import (DEFAULT_BLEND, DEFAULT_BLEND_SELECT, DEFAULT_EMBEDDER, DEFAULT_ENCODER, DEFAULT_GENERATOR,
                          DEFAULT_TOP_K)
from cag.errors import CagError
from cag.faults import fault_point
from cag.ingest.pipeline import PREFILL_TASK, IngestOptions, ingest
from cag.kv.blend import check_blend_options
from cag.kv.serde import CACHE_DTYPES, DEFAULT_CACHE_DTYPE, check_cache_dtype
from cag.models import load_model
from cag.models.loading import check_dtype, device_setting, dtype_setting, resolve_device, resolve_dtype
from cag.modes import REFERENCE, ModeOptions, Reads, get_mode, mode_names
from cag.modes.registry import AUTO
from cag.progress import Progress
from cag.prompt import prompt_layout
from cag.retrieval import Retriever
from cag.settings import check_at_least, comma_list, layer_span, setting
from cag.store import Store
from cag.translations import TranslationId
from eval.corpus import CORPORA, PER_QUESTION, SHARED, collect, ranked_own, retrieval_record, retrieved
from eval.datasets import PRESETS, TASKS, load_examples, resolve_dataset, sample
from eval.llamaindex_baseline import MODE as BASELINE
from eval.llamaindex_baseline import LlamaIndexBaseline
from eval.report import write_report
from eval.scoring import GENERATIVE, OPTION_SCORES, evaluate_example
from mot.registry import find_translator, translators_of_kind

log = logging.getLogger(__name__)
EXAMPLES_TASK, PASSAGES_TASK = "examples x modes", "passage chunks prefilled"  # progress tasks


def _preset_help() -> str:
    return f"JSON Lines file, or a preset: {', '.join(PRESETS)} (data/README.md)."


def _optional_str(value) -> str | None:
    return str(value) if value else None


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run: `cag eval`'s settings (its options come from these fields). Saved in the
    run folder; a run resumes only with the same settings, but for those `_start_or_resume` frees."""

    dataset: str = setting(help=_preset_help)
    task: str | None = setting(None, "extractive | multiple_choice | multi_doc (implied by a preset).")
    model: str = setting(DEFAULT_GENERATOR, "Generator.", short="-m")
    encoder: str = setting(DEFAULT_ENCODER, "Encoder that prefills the passages.")
    modes: tuple = setting(("direct", "native", "none"), "Comma-separated modes (`cag ask --help` lists them; "
                           "direct is required: retention is measured against it; the translator modes need "
                           "translators: `cag train`; auto answers as `cag ask --mode auto`, its picks recorded).", cli_type=str, parse=comma_list, show=",".join)
    limit: int | None = setting(None, "Examples to sample (default: all). A larger --limit on an existing run folder "
                                "extends it, keeping the answers made (the sample is prefix-stable).", minimum=1)
    seed: int = setting(0, "Sampling seed.")
    top_k: int = setting(DEFAULT_TOP_K, "multi_doc: paragraphs retrieved.", minimum=1)
    context_budget: int | None = setting(None, "multi_doc: all paragraphs in order up to this many encoder tokens "
                                         "instead of retrieval.")
    max_new_tokens: int = setting(32, "Answer length limit.", minimum=1)
    option_score: str = setting("mean", "multiple_choice: mean or sum log-likelihood of an option's tokens.")
    embedder: str = DEFAULT_EMBEDDER
    skip_missing: bool = setting(False, "Skip modes that cannot run, with a warning.")
    out: str | None = setting(None, "Run folder (default: runs/eval-...). Re-running the same command resumes it.",
                              cli_type=Path | None, parse=_optional_str)
    window: tuple | None = setting(None, "translated-window: generator layers START:END (default: the "
                                   "translator's training window or the middle third).",
                                   cli_type=str | None, parse=layer_span)
    dtype: str = dtype_setting("fp32", "Generator compute dtype: fp32, bf16, fp16 or auto (answers and its native "
                               "caches; bf16 prefills 2-2.6x faster on CPUs with AVX512-BF16). The encoder stays fp32.")
    device: str = device_setting()  # not part of the run's identity
    blend: float = setting(DEFAULT_BLEND, "-blend modes: share of context tokens the generator recomputes (those "
                           "the question attends to most).", minimum=0.0, maximum=1.0)
    blend_select: str = DEFAULT_BLEND_SELECT  # *-blend modes: which tokens (cag.kv.blend.SELECTIONS; others: experiments)
    reuse_caches: tuple = setting((), "Another run folder (or store): chunk caches it holds for the same model, "
                                  "prefix and text are hard-linked instead of prefilled (repeatable).",
                                  flag="--reuse-caches-from", cli_type=list[Path] | None,
                                  parse=lambda paths: tuple(str(p) for p in paths or ()), show=lambda d: None)
    keep_translated: bool = setting(True, "Store chunk translations in the run's store: reused by "
                                    "translated-window/-blend and when a killed run resumes. --no-keep-translated "
                                    "translates every time and stores none (a HotpotQA run stores about 7 GB per "
                                    "translator for gemma3-270m, 4.6 GB for qwen2.5-coder-0.5b).")
    cache_dtype: str = setting(DEFAULT_CACHE_DTYPE, "Storage of the run's chunk caches: "
                               f"{', '.join(CACHE_DTYPES)} (part of the run's identity).")
    corpus: str = setting(PER_QUESTION, "per-question: each example reads its own passages; shared: one store of "
                          "every passage of the dataset (and --distractors), each question retrieving its --top-k "
                          "chunks from all of it, with recall@k of its gold passages reported.")
    distractors: str | None = setting(None, "shared: a folder of more documents ingested into the store beside the "
                                      "dataset's passages.", cli_type=Path | None, parse=_optional_str)
    llamaindex: bool = setting(False, "shared: also answer through llama-index's own vector index, retriever and "
                               "query engine over the same chunks, embedder and generator (mode llamaindex: what "
                               "a llama-index user gets; its TTFT is its whole answer's time).")

    def __post_init__(self):
        unknown = [m for m in self.modes if m not in mode_names(auto=True)]
        if unknown or not self.modes:
            raise CagError(f"Unknown mode(s) {', '.join(unknown) or '(none)'}; choose from "
                           f"{', '.join(mode_names(auto=True))}.")
        if REFERENCE not in self.modes:
            raise CagError(f"Modes must include {REFERENCE}: retention is measured against it.")
        if self.option_score not in OPTION_SCORES:
            raise CagError(f"--option-score must be {' or '.join(OPTION_SCORES)}, not {self.option_score!r}.")
        if self.task is not None and self.task not in TASKS:
            raise CagError(f"Unknown task {self.task!r}; choose one of {', '.join(TASKS)}.")
        for name, value in (("top-k", self.top_k), ("max-new-tokens", self.max_new_tokens),
                            ("limit", self.limit or 1), ("context-budget", self.context_budget or 1)):
            check_at_least(name, value)
        check_dtype(self.dtype)  # a bad dtype fails before any model work (run_eval resolves "auto")
        check_cache_dtype(self.cache_dtype)
        check_blend_options(self.blend, self.blend_select)
        if self.corpus not in CORPORA:
            raise CagError(f"--corpus must be {' or '.join(CORPORA)}, not {self.corpus!r}.")
        if self.distractors and (self.corpus != SHARED or not Path(self.distractors).is_dir()):
            raise CagError(f"--distractors {self.distractors}: a folder, read with --corpus shared only.")
        if self.llamaindex and self.corpus != SHARED:
            raise CagError("--llamaindex answers from a shared corpus: add --corpus shared.")


def check_translators(config: EvalConfig, modes: tuple) -> tuple:
    """Modes whose translator exists; a missing one is an error, or skipped under --skip-missing.
    Models are loaded (to compare fingerprints) only when a translator for the pair is on disk."""
    kept, models = [], None
    for mode in modes:
        kind = get_mode(mode).translator_kind if mode != AUTO else None  # auto goes without a translator
        if kind:
            wanted = TranslationId(config.encoder, config.model, kind)
            reason = None
            if not translators_of_kind(kind):
                reason = (f"no translator {wanted}: train one with "
                          f"`cag train --source {config.encoder} --target {config.model} --kind {kind}`")
            else:
                models = models or (load_model(config.encoder, device=config.device),
                                    load_model(config.model, config.dtype, config.device))
                found = find_translator(models[0].fingerprint, models[1].fingerprint, wanted)
                reason = found.reason if found.path is None else None
            if _skipped(config, mode, reason):
                continue
        kept.append(mode)
    return tuple(kept)


def _skipped(config: EvalConfig, mode: str, reason: str | None) -> bool:
    """Whether `mode`, which cannot run for `reason` (None: it can), is skipped (--skip-missing);
    without that option it is an error."""
    if reason is None:
        return False
    if not config.skip_missing:
        raise CagError(f"Mode {mode} cannot run: {reason}; or pass --skip-missing.")
    log.warning("skipping mode %s: %s", mode, reason)
    return True


def default_run_dir(config: EvalConfig, path: Path, task: str) -> Path:
    model = "".join(c if c.isalnum() or c in ".-" else "_" for c in Path(config.model).name)
    setting = (f"-budget{config.context_budget}" if config.context_budget else "") + \
        ("-shared" if config.corpus == SHARED else "")
    return Path("runs") / f"eval-{path.parent.name}-{path.stem}-{task}-{model}-n{config.limit or 'all'}-s{config.seed}{setting}"


def run_eval(config: EvalConfig, progress: Progress | None = None) -> Path:
    """Run (or resume) the evaluation; its run folder. On a Ray cluster: eval.ray_eval.run_eval_on_ray."""
    progress = progress or Progress()
    device = resolve_device(config.device)
    config = replace(config, device=device, dtype=resolve_dtype(config.dtype, device))
    run = prepare_run(config, progress)
    lm = load_model(config.model, config.dtype, config.device)
    layout, options = prompt_layout(lm.tokenizer), mode_options(config)
    work, baseline = run.work(progress), None
    with open(run.folder / "predictions.jsonl", "a", encoding="utf-8") as out:
        for item in work:
            for mode in item.todo:
                if mode == BASELINE:
                    baseline = baseline or LlamaIndexBaseline(run.store, lm, Retriever(run.store).embedder,
                                                              config.top_k, config.max_new_tokens)
                    append_record(out, baseline.answer(item.example, item.gold))
                else:
                    record = evaluate_example(run.task, mode, item.example, item.rows, run.store, lm, layout,
                                              config.max_new_tokens, config.option_score, options)
                    append_record(out, {**record, **item.retrieval})
                progress.advance(EXAMPLES_TASK)
    return finish_run(run, lm)


@dataclass
class WorkItem:
    """An example to answer: its chunk rows in assembly order, the modes not yet answered, and what
    its predictions record of the retrieval (the passages read; whether its gold ones were)."""

    example: dict
    rows: list
    todo: list
    retrieval: dict
    gold: list  # the locators of the passages its answer comes from


@dataclass
class PreparedRun:
    """A run folder ready to answer in: its examples, modes and store."""

    config: EvalConfig
    folder: Path
    task: str
    modes: tuple  # this command's modes
    reported: tuple  # every mode the folder holds (the report covers them all)
    examples: list
    store: Store
    contexts: str  # the passages file (its path, as the catalog names it)
    passages: object  # eval.corpus.Passages: per example its passages' and its gold's locators

    def work(self, progress: Progress) -> list:
        """[WorkItem] for the examples with modes to answer (a torn last prediction is dropped
        first); the examples x modes task started, the pairs already answered counted."""
        config = self.config
        shared = config.corpus == SHARED
        ranks = shared or (self.task == "multi_doc" and not config.context_budget)
        retriever = Retriever(self.store) if ranks else None
        done = _done_keys(self.folder / "predictions.jsonl")
        progress.start(EXAMPLES_TASK, len(self.examples) * len(self.modes))
        work = []
        for example, own, gold in zip(self.examples, self.passages.own, self.passages.gold):
            todo = [m for m in self.modes if (example["id"], m) not in done]
            progress.advance(EXAMPLES_TASK, len(self.modes) - len(todo))
            if not todo:
                continue
            if shared:
                rows = retrieved(retriever, example["question"], config.top_k)
            else:
                rows = context_rows(self.store, (self.contexts, own), example, config,
                                    retriever.embedder if retriever else None)
            work.append(WorkItem(example, rows, todo, retrieval_record(rows, gold) if ranks else {}, gold))
        return work


def prepare_run(config: EvalConfig, progress: Progress, ingest_fn=ingest, check_config: EvalConfig | None = None
                ) -> PreparedRun:
    """Check the modes (translators with `check_config`, default `config`), sample the examples,
    start or resume the run folder and ingest the passages into its store with `ingest_fn`."""
    path, task = resolve_dataset(config.dataset, config.task)
    modes = tuple(config.modes)
    if _reading(modes, Reads.ENCODER):  # fail before any model work when a translator is missing
        modes = check_translators(check_config or config, modes)
    if config.llamaindex and task not in GENERATIVE:
        raise CagError(f"--llamaindex answers free-text questions; {config.dataset} is {task}.")
    modes += (BASELINE,) if config.llamaindex else ()
    everything = load_examples(path, task)
    examples = sample(everything, task, config.limit, config.seed)
    run = Path(config.out) if config.out else default_run_dir(config, path, task)
    # the report covers every mode the folder holds, also those of earlier runs with other --modes
    # through JSON: the saved config holds lists where the config holds tuples
    saved = json.loads(json.dumps({**asdict(config), "task": task, "dataset_path": str(path), "modes": list(modes)}))
    reported = _start_or_resume(run, saved)
    passages = collect(examples, task, config.corpus, everything)
    store, contexts = build_store(run, config, passages, modes, _PrefillOnly(progress), ingest_fn)
    return PreparedRun(config, run, task, modes, reported, examples, store, contexts, passages)


def mode_options(config: EvalConfig) -> ModeOptions:
    return ModeOptions(config.blend, config.blend_select, config.window, config.keep_translated)


def append_record(out, record: dict) -> None:
    """One prediction, synced before the next: a killed run resumes after the last one written."""
    out.write(json.dumps(record, ensure_ascii=False) + "\n")
    out.flush()
    os.fsync(out.fileno())
    fault_point("prediction_written")


def finish_run(run: PreparedRun, lm) -> Path:
    """metrics.json, report.md and plots over every mode the folder holds; `lm`: the generator
    (its name and fingerprint)."""
    # a mode this cag no longer has is left out
    known = tuple(m for m in run.reported if m in mode_names(auto=True) or m == BASELINE)
    write_report(run.folder, run.task, known, [e["id"] for e in run.examples], run.store, lm, run.config)
    run.store.close()
    return run.folder


def _start_or_resume(run: Path, config: dict) -> tuple:
    """Start the run folder or check that it holds the same run (other modes may be added, a larger
    --limit extends it); the modes it holds, in order."""
    path = run / "config.json"
    if path.is_file():
        # keys added since a run started take the value it ran with (runs before --dtype were fp32)
        previous = {"dtype": "fp32", "blend": DEFAULT_BLEND, "blend_select": "deviation", "cache_dtype": "fp16",
                    "reuse_caches": [], "keep_translated": True, "corpus": PER_QUESTION, "distractors": None,
                    "llamaindex": False,
                    **json.loads(path.read_text())}
        # keys removed since (the scaled modes' context_scale) no longer shape any answer
        previous = {k: v for k, v in previous.items() if k in config}
        if previous == config:
            return tuple(config["modes"])
        # the window only shapes translated-window answers: free to set until that mode has run
        # `out`: a run folder may have been moved or renamed since it started; `device`: where it runs;
        # `reuse_caches`: where identical caches come from (they are the same bytes either way);
        # `keep_translated`: whether translations are stored (the same translations either way)
        ran = [get_mode(m) for m in previous["modes"] if m in mode_names()]
        free = {"modes", "skip_missing", "out", "device", "reuse_caches", "keep_translated"}
        # a larger --limit extends the run: the seeded sample is prefix-stable, so the answers kept
        # are those of the first examples (eval.datasets.sample)
        free |= {"limit"} if _extends(previous.get("limit"), config.get("limit")) else set()
        free |= set() if any(m.uses_window for m in ran) else {"window"}
        free |= set() if any(m.recomputes for m in ran) else {"blend", "blend_select"}
        same = lambda c: {k: v for k, v in c.items() if k not in free}
        if same(previous) == same(config):
            # the same run with other modes: predictions already made are kept, new modes are added;
            # config.json lists them all, so the window/blend checks above see every mode that ran
            held = previous["modes"] + [m for m in config["modes"] if m not in previous["modes"]]
            log.info("run %s: modes %s + %s", run, previous["modes"], config["modes"])
            if config.get("limit") != previous.get("limit"):
                log.info("run %s: extended from %s to %s examples", run, previous.get("limit"),
                         config.get("limit") or "all")
            atomic_write_text(path, json.dumps({**config, "modes": held}, indent=2))
            return tuple(held)
        differ = ", ".join(f"{k}: {previous.get(k)!r} there, {config.get(k)!r} now"
                           for k in sorted(set(same(previous)) | set(same(config)))
                           if previous.get(k) != config.get(k))
        raise CagError(f"Run folder {run} holds a run with another config ({differ}); pass the same "
                       "options, another --out, or delete that folder.")
    run.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(config, indent=2))
    return tuple(config["modes"])


def _extends(before: int | None, now: int | None) -> bool:
    """Whether a run sampled with --limit `before` may go on with `now` (None: all examples)."""
    return before is not None and (now is None or now >= before)


def _done_keys(path: Path) -> set:
    """(id, mode) pairs already in predictions.jsonl; a torn last line (a kill mid-write) is dropped."""
    if not path.is_file():
        return set()
    keys, good = set(), 0
    lines = path.read_bytes().split(b"\n")
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break
        keys.add((record["id"], record["mode"]))
        good += len(line) + 1
    if good < path.stat().st_size:
        with open(path, "r+b") as handle:
            handle.truncate(good)
    return keys


def _reading(modes, what: Reads) -> bool:
    """Whether any of `modes` reads `what` (Reads.NATIVE or Reads.ENCODER caches); auto may read
    either (the generator's own caches first, else a translator's)."""
    if AUTO in modes and what in (Reads.NATIVE, Reads.ENCODER):
        return True
    return any(get_mode(m).reads is what for m in modes if m in mode_names())  # (not the baseline)


class _PrefillOnly(Progress):
    """Forwards ingest's prefill progress, not its file counts, to the eval's progress."""

    def __init__(self, progress: Progress):
        self.progress = progress

    def start(self, task: str, total: int | None = None) -> None:
        if task == PREFILL_TASK:
            self.progress.start(PASSAGES_TASK, total)

    def grow(self, task: str, more: int) -> None:
        if task == PREFILL_TASK:
            self.progress.grow(PASSAGES_TASK, more)

    def advance(self, task: str, n: int = 1, **info) -> None:
        if task == PREFILL_TASK:
            self.progress.advance(PASSAGES_TASK, n, **info)


def build_store(run: Path, config: EvalConfig, passages, modes: tuple, progress: Progress, ingest_fn=ingest):
    """Ingest the run's passages (eval.corpus.Passages), and the distractors of a shared corpus,
    through the real ingest path; the store and the passages file's path."""
    records = passages.records
    contexts = run / "contexts" / "passages.jsonl"
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if not contexts.is_file() or contexts.read_text(encoding="utf-8") != body:
        contexts.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(contexts, body)
    _follow_moved_run(run / "store", contexts)
    also = (config.model,) if _reading(modes, Reads.NATIVE) else ()
    # the encoder prefills in fp32 as in training; the generator's native caches in the run's dtype
    # the encoder's caches only when a mode reads them (translator modes; native when the generator
    # is the encoder, the same cache space): a direct/native/none run skips that prefill
    options = IngestOptions(encoder=config.encoder, embedder=config.embedder, also_for=also,
                            cache_dtype=config.cache_dtype,
                            device=config.device, dtype="fp32", also_for_dtype=config.dtype,
                            encoder_caches=_reading(modes, Reads.ENCODER),
                            reuse_from=tuple(_store_folder(Path(p)) for p in config.reuse_caches))
    if records:
        ingest_fn([contexts] + ([Path(config.distractors)] if config.distractors else []), run / "store",
                  options, progress)
    else:  # closed book: an empty store, so every mode still runs the same path
        (run / "contexts" / "empty").mkdir(exist_ok=True)
        ingest_fn([run / "contexts" / "empty"], run / "store", options)
    return Store.open(run / "store"), str(contexts.resolve())


def _store_folder(path: Path) -> Path:
    """A run folder's store, or the store folder itself."""
    return path / "store" if (path / "store" / "store.json").is_file() else path


def _follow_moved_run(store_dir: Path, contexts: Path) -> None:
    """A run folder moved or copied since its store was built: the catalog still names the old
    passages file (absolute path); point it at this run's own, so nothing is ingested twice."""
    if not (store_dir / "store.json").is_file():
        return
    store, current = Store.open(store_dir), str(contexts.resolve())
    try:
        paths = store.catalog.paths()
        stale = [p for p in paths if p != current and Path(p).parts[-2:] == ("contexts", "passages.jsonl")]
        if current not in paths and len(stale) == 1:
            log.info("run moved: catalog path %s -> %s", stale[0], current)
            store.catalog.rename_path(stale[0], current)
    finally:
        store.close()


def context_rows(store: Store, locs, example: dict, config: EvalConfig, embedder) -> list:
    """Chunk rows for one example in assembly order."""
    path, locators = locs
    rows = [row for loc in locators for row in store.catalog.chunks_of(path, loc)]
    if not rows or embedder is None:
        if config.context_budget:  # multi_doc, budget setting: paragraphs in order up to the budget
            kept, used = [], 0
            for row in rows:
                if used + row.n_tokens > config.context_budget:
                    break
                kept.append(row)
                used += row.n_tokens
            return kept
        return rows
    # multi_doc, retrieval setting: the question's own paragraphs ranked by the embedder, best last
    return ranked_own(store, rows, example["question"], config.top_k, embedder)
