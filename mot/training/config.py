"""`cag train`'s settings: one frozen TrainConfig, validated once (`check`) and resolved once
against the target model (`resolve`), saved in the run folder and in the translator's JSON. Its
defaults are the CLI's: the shipped translators' recipe."""

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cag.defaults import DEFAULT_ENCODER, DEFAULT_GENERATOR
from cag.errors import CagError
from cag.models.loading import resolve_device
from mot.checkpoint import check_weight_dtype
from mot.training.data import CONTINUATIONS
from mot.injection import default_window
from cag.translations import TranslationId, TranslatorKind
from mot.translator import check_attention, check_kind

CORPUS_DIR = Path(__file__).resolve().parent.parent / "data" / "corpus" / "wikitext2"
DEFAULT_CORPUS = str(CORPUS_DIR / "train_raw_part.jsonl")
DEFAULT_HELDOUT = str(CORPUS_DIR / "valid.jsonl")
MODES = ("full", "window")
KEY_LOSSES = ("nmse", "query")


@dataclass(frozen=True)
class TrainConfig:
    source: str = DEFAULT_ENCODER
    target: str = DEFAULT_GENERATOR
    out: str = ""  # run folder; "" -> runs/train-SOURCE__TARGET__KIND-MODE[-CONTINUATION]
    corpus: tuple = (DEFAULT_CORPUS,)
    heldout_corpus: tuple = (DEFAULT_HELDOUT,)
    kind: TranslatorKind = TranslatorKind.MOT  # mot | single | ridge
    mode: str = "full"  # full | window
    window: tuple | None = None  # [start, end) target layers for mode window; default the middle third
    experts: int = 4
    top_k: int = 2
    rank: int = 24
    router_hidden: int = 32
    attention_dim: int = 0  # > 0: chunk attention (both ways) in front of each layer's mixtures
    attention_heads: int = 4
    target_embeddings: int = 2  # > 0: the target's embeddings of each token and the ones before it
    token_rank: int = 512  # > 0: those features through one projection to this width (0: full width)
    pairs_per_layer: int = 2
    windows: int = 256
    heldout_windows: int = 32
    chunk_tokens: int = 64
    chunks: int = 2
    continuation_tokens: int = 32
    continuation: str = "text"  # text | cloze (a question about the context + the teacher's answer)
    answer_tokens: int = 12  # cloze: the most tokens of the teacher's answer
    teacher_top_k: int = 32
    steps: int = 120
    batch: int = 4
    lr: float = 1e-3
    trunk_lr_scale: float = 0.01  # the ridge trunks' learning rate relative to lr
    warmup: int = 20
    weight_decay: float = 0.01
    ridge_lambda: float = 1e-2
    w_reconstruction: float = 1.0
    w_kl: float = 1.0
    w_continuation_kv: float = 0.5
    w_balance: float = 0.01
    eval_every: int = 40
    checkpoint_every: int = 20
    seed: int = 0
    device: str = "cpu"
    dtype: str = "fp16"  # of the saved translator weights
    data: str | None = None  # prepared windows folder (default OUT/data); shareable between runs
    init: str | None = None  # a trained translator to continue from (instead of the ridge start)
    key_loss: str = "nmse"  # nmse | query (keys' error as the target's own queries see it)
    query_windows: int = 64  # key_loss query: training windows the target's queries are read from

    def to_json(self) -> dict:
        """The config as JSON holds it (tuples as lists), for saving and for comparing with a saved one."""
        return json.loads(json.dumps(asdict(self)))


# what a saved config that lacks a key meant: the setting did not exist yet, so it was off
ABSENT_MEANS = {**TrainConfig().to_json(), "target_embeddings": 0, "token_rank": 0}


def check(cfg: TrainConfig) -> None:
    """Refuse bad settings before any model work."""
    check_kind(cfg.kind)
    if cfg.mode not in MODES:
        raise CagError(f"Unknown mode {cfg.mode!r}; choose {' or '.join(MODES)}.")
    if cfg.continuation not in CONTINUATIONS:
        raise CagError(f"Unknown continuation {cfg.continuation!r}; choose {' or '.join(CONTINUATIONS)}.")
    if cfg.key_loss not in KEY_LOSSES:
        raise CagError(f"Unknown key loss {cfg.key_loss!r}; choose {' or '.join(KEY_LOSSES)}.")
    if cfg.init and TranslatorKind(cfg.kind) is TranslatorKind.RIDGE:
        raise CagError("--init continues training a translator; kind ridge has no training (use mot or single).")
    if cfg.steps < 0 or cfg.windows < 1 or cfg.batch < 1:
        raise CagError("--steps must be >= 0, --windows and --batch >= 1.")
    check_attention(cfg.kind, cfg.attention_dim, cfg.attention_heads)
    check_weight_dtype(cfg.dtype)
    resolve_device(cfg.device)  # a GPU that is not there is refused before any work


def default_out(cfg: TrainConfig) -> str:
    suffix = "" if cfg.continuation == "text" else f"-{cfg.continuation}"
    return str(Path("runs") / f"train-{TranslationId(cfg.source, cfg.target, cfg.kind).file_stem}-{cfg.mode}{suffix}")


def resolve(cfg: TrainConfig, target_layers: int) -> TrainConfig:
    """The settings a run uses: its folder, the window of a window-mode run, no token projection
    without token embeddings."""
    return replace(cfg, out=cfg.out or default_out(cfg),
                   window=tuple(cfg.window) if cfg.window else
                   (tuple(default_window(target_layers)) if cfg.mode == "window" else None),
                   token_rank=cfg.token_rank if cfg.target_embeddings else 0)
