"""`cag train`'s settings: one frozen TrainConfig, validated once (`check`) and resolved once
against the target model (`resolve`), saved in the run folder and in the translator's JSON. Its
defaults are the CLI's: the shipped translators' recipe."""

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cag.defaults import DEFAULT_ENCODER, DEFAULT_GENERATOR
from cag.errors import CagError
from cag.settings import layer_span, setting
from cag.models.loading import resolve_device
from mot.checkpoint import check_weight_dtype
from mot.injection import default_window
from cag.translations import TranslationId, TranslatorKind
from mot.translator import check_kind

CORPUS_DIR = Path(__file__).resolve().parents[2] / "data" / "corpus" / "wikitext2"
DEFAULT_CORPUS = str(CORPUS_DIR / "train_raw_part.jsonl")
DEFAULT_HELDOUT = str(CORPUS_DIR / "valid.jsonl")
MODES = ("full", "window")


def _paths(values) -> tuple:
    return tuple(str(v) for v in values)


def _optional_str(value) -> str | None:
    return str(value) if value else None


@dataclass(frozen=True)
class TrainConfig:
    """`cag train`'s settings (its options come from these fields; defaults: the shipped recipe)."""

    source: str = setting(DEFAULT_ENCODER, "Model whose chunk caches are translated (the encoder).")
    target: str = setting(DEFAULT_GENERATOR, "Generator the caches are translated into.")
    out: str = setting("", "Run folder (default runs/train-SOURCE__TARGET__KIND-MODE). Re-running the same command "
                       "resumes it.", cli_type=Path | None, parse=lambda v: str(v or ""), show=lambda d: None)
    corpus: tuple = setting((DEFAULT_CORPUS,), "Training text: .jsonl (field text) or .txt files or folders; "
                            "repeatable (default: the packaged wikitext-2 part).", cli_type=list[Path] | None,
                            parse=lambda v: _paths(v) if v else (DEFAULT_CORPUS,), show=lambda d: None)
    heldout_corpus: tuple = setting((DEFAULT_HELDOUT,), "Held-out text for evaluation.", flag="--heldout",
                                    cli_type=list[Path] | None,
                                    parse=lambda v: _paths(v) if v else (DEFAULT_HELDOUT,), show=lambda d: None)
    kind: TranslatorKind = setting(TranslatorKind.MOT, "mot (experts + router) | single (one expert per layer) | "
                                   "ridge (closed form, no training).", cli_type=str, show=str)
    mode: str = setting("full", "full: every target layer translated (ask's default); window: a window of layers, "
                        "the generator replays the rest.")
    window: tuple | None = setting(None, "mode window: target layers START:END (default: the middle third).",
                                   cli_type=str | None, parse=layer_span)
    experts: int = setting(4, "Experts per K/V mixture (kind mot).", minimum=1)
    top_k: int = setting(2, "Experts mixed per token.", minimum=1)
    rank: int = setting(24, "Hidden width of each expert's MLP.", minimum=1)
    router_hidden: int = 32
    target_embeddings: int = setting(2, "Give every layer's translator the target's own input embeddings of each "
                                     "token and of the N-1 tokens before it (a table lookup; 0: none).", minimum=0)
    token_rank: int = setting(512, "Project those embedding features to this width, one map for every layer "
                              "(fitted in closed form; 0: full width). Smaller and faster translators.", minimum=0)
    pairs_per_layer: int = setting(2, "Source layers each target layer reads (the ones nearest in relative depth; "
                                   "their K and V).", flag="--source-layers", minimum=1)
    windows: int = setting(256, "Training windows prepared from the corpus.", minimum=1)
    heldout_windows: int = setting(32, "Held-out windows.", minimum=1)
    chunk_tokens: int = setting(64, "Tokens per context chunk.", minimum=4)
    chunks: int = setting(2, "Independently prefilled chunks per context.", minimum=1)
    continuation_tokens: int = setting(32, "Continuation tokens per window (the running text after the context).",
                                       minimum=2)
    teacher_top_k: int = 32
    steps: int = setting(120, "Optimizer steps.", minimum=0)
    batch: int = setting(4, "Windows per step.", minimum=1)
    lr: float = setting(1e-3, "Peak learning rate (AdamW, warmup + cosine).")
    trunk_lr_scale: float = 0.01  # the ridge trunks' learning rate relative to lr
    warmup: int = 20
    weight_decay: float = 0.01
    ridge_lambda: float = 1e-2
    w_reconstruction: float = 1.0
    w_kl: float = 1.0
    w_continuation_kv: float = 0.5
    w_balance: float = 0.01
    eval_every: int = setting(40, "Held-out evaluation every N steps.", minimum=1)
    checkpoint_every: int = setting(20, "Checkpoint every N steps.", minimum=1)
    seed: int = setting(0, "Seed for window sampling and initialization.")
    device: str = setting("cpu", "cpu, cuda or cuda:N (training stays on CPU unless asked).")
    dtype: str = setting("fp16", "Saved weights: fp16, fp32, bf16 or int8 (int8 rows with per-row scales: half of "
                         "fp16's size).", flag="--weights-dtype")
    data: str | None = setting(None, "Folder for the prepared windows (default OUT/data); runs with the same models "
                               "and window settings can share it.", cli_type=Path | None, parse=_optional_str)
    init: str | None = setting(None, "Continue from this trained translator (NAME or NAME.safetensors, the same "
                               "options) instead of the ridge start.", cli_type=Path | None, parse=_optional_str)

    def __post_init__(self):
        object.__setattr__(self, "kind", check_kind(self.kind))  # a kind's name is accepted
        check(self)

    def to_json(self) -> dict:
        """The config as JSON holds it (tuples as lists), for saving and for comparing with a saved one."""
        return json.loads(json.dumps(asdict(self)))




def check(cfg: TrainConfig) -> None:
    """Refuse bad settings before any model work."""
    check_kind(cfg.kind)
    if cfg.mode not in MODES:
        raise CagError(f"Unknown mode {cfg.mode!r}; choose {' or '.join(MODES)}.")
    if cfg.init and cfg.kind is TranslatorKind.RIDGE:
        raise CagError("--init continues training a translator; kind ridge has no training (use mot or single).")
    if cfg.steps < 0 or cfg.windows < 1 or cfg.batch < 1:
        raise CagError("--steps must be >= 0, --windows and --batch >= 1.")
    check_weight_dtype(cfg.dtype)
    resolve_device(cfg.device)  # a GPU that is not there is refused before any work


# what a saved config that lacks a key meant: the setting did not exist yet, so it was off
ABSENT_MEANS = {**TrainConfig().to_json(), "target_embeddings": 0, "token_rank": 0}
# settings measured without gain and removed (docs/results.md, "What was tried and did not help"),
# with the value that meant off: a saved config holding one at that value reads as without it
RETIRED = {"attention_dim": 0, "attention_heads": 4, "continuation": "text", "answer_tokens": 12,
           "key_loss": "nmse", "query_windows": 64}


def without_retired(saved: dict, what: str) -> dict:
    """`saved` (a recorded training config) without the retired settings; one that used a retired
    feature is refused, naming it."""
    used = [f"{k}={saved[k]!r}" for k, off in RETIRED.items() if k in saved and saved[k] != off]
    if used:
        raise CagError(f"{what} was trained with {', '.join(used)}, a setting this cag no longer has (it measured "
                       "no gain; docs/results.md).")
    return {k: v for k, v in saved.items() if k not in RETIRED}


def default_out(cfg: TrainConfig) -> str:
    return str(Path("runs") / f"train-{TranslationId(cfg.source, cfg.target, cfg.kind).file_stem}-{cfg.mode}")


def resolve(cfg: TrainConfig, target_layers: int) -> TrainConfig:
    """The settings a run uses: its folder, the window of a window-mode run, no token projection
    without token embeddings."""
    return replace(cfg, out=cfg.out or default_out(cfg),
                   window=tuple(cfg.window) if cfg.window else
                   (tuple(default_window(target_layers)) if cfg.mode == "window" else None),
                   token_rank=cfg.token_rank if cfg.target_embeddings else 0)
