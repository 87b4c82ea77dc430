"""`cag train-reader`'s settings: one frozen ReaderConfig, validated once (`check`), saved in the run
folder and in the reader adapter's JSON. Its defaults are the CLI's: the shipped readers' recipe."""

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cag.defaults import DEFAULT_ENCODER, DEFAULT_GENERATOR
from cag.errors import CagError
from cag.models.loading import parse_dtype, resolve_device
from cag.readers import ATTENTION, MLP
from mot.train_config import DEFAULT_CORPUS, DEFAULT_HELDOUT

READS = ("native", "translated")
ADAPTERS = ("lora", "links")
TARGETS = {"attention": ATTENTION, "attention+mlp": ATTENTION + MLP}


@dataclass(frozen=True)
class ReaderConfig:
    generator: str = DEFAULT_GENERATOR
    reads: str = "native"  # native: its own chunk caches | translated: the MoT translator's
    encoder: str = DEFAULT_ENCODER  # reads translated: whose caches are translated
    kind: str = "mot"  # reads translated: the translator kind
    out: str = ""  # run folder; "" -> runs/train-reader-GENERATOR-READS
    data: str | None = None  # prepared windows (default OUT/data); shared by native and translated runs
    corpus: tuple = (DEFAULT_CORPUS,)
    heldout_corpus: tuple = (DEFAULT_HELDOUT,)
    windows: int = 120
    heldout_windows: int = 12
    chunk_tokens: int = 256  # the ingest chunk length, in encoder tokens
    chunk_counts: tuple = (1, 2, 4, 6, 8, 10, 12, 16)  # chunks per window, drawn uniformly
    max_context_tokens: int = 2560  # encoder tokens per window at most
    cloze: int = 4  # cloze questions per window (distinct ones kept)
    generated: int = 1  # questions the generator writes about the window's target chunk
    answer_tokens: int = 10
    teacher_top_k: int = 32
    adapter: str = "lora"  # lora: a LoRA on the question and answer | links: learned tokens after every chunk
    link_tokens: int = 4  # adapter links: tokens after every chunk
    rank: int = 16
    alpha: float = 32.0
    targets: str = "attention+mlp"  # attention | attention+mlp
    steps: int = 150
    batch: int = 8
    lr: float = 3e-4
    warmup: int = 20
    weight_decay: float = 0.0
    eval_every: int = 25
    checkpoint_every: int = 25
    seed: int = 0
    dtype: str = "bf16"  # the generator's compute dtype (teacher and reader); the encoder stays fp32
    weights_dtype: str = "fp16"  # of the saved adapter
    device: str = "cpu"

    def to_json(self) -> dict:
        return json.loads(json.dumps(asdict(self)))


def check(cfg: ReaderConfig) -> None:
    """Refuse bad settings before any model work."""
    if cfg.reads not in READS:
        raise CagError(f"Unknown --reads {cfg.reads!r}; choose {' or '.join(READS)}.")
    if cfg.adapter not in ADAPTERS:
        raise CagError(f"Unknown --adapter {cfg.adapter!r}; choose {' or '.join(ADAPTERS)}.")
    if cfg.adapter == "links" and cfg.link_tokens < 1:
        raise CagError("--link-tokens must be at least 1 for --adapter links.")
    if cfg.targets not in TARGETS:
        raise CagError(f"Unknown --targets {cfg.targets!r}; choose {' or '.join(TARGETS)}.")
    if cfg.steps < 0 or cfg.windows < 1 or cfg.batch < 1 or cfg.rank < 1 or cfg.heldout_windows < 1:
        raise CagError("--steps must be >= 0; --windows, --heldout-windows, --batch and --rank >= 1.")
    if not cfg.chunk_counts or min(cfg.chunk_counts) < 1:
        raise CagError(f"--chunk-counts must be positive numbers, not {cfg.chunk_counts}.")
    if cfg.cloze + cfg.generated < 1:
        raise CagError("A window needs questions: --cloze or --generated must be at least 1.")
    parse_dtype(cfg.dtype)
    if cfg.weights_dtype not in ("fp16", "bf16", "fp32"):
        raise CagError(f"Unknown --weights-dtype {cfg.weights_dtype!r}; choose fp16, bf16 or fp32.")
    resolve_device(cfg.device)


def resolve(cfg: ReaderConfig) -> ReaderConfig:
    clean = "".join(c if c.isalnum() or c in ".-" else "_" for c in Path(cfg.generator).name)
    kind = "" if cfg.adapter == "lora" else f"-{cfg.adapter}"
    return replace(cfg, out=cfg.out or str(Path("runs") / f"train-reader-{clean}-{cfg.reads}{kind}"),
                   chunk_counts=tuple(cfg.chunk_counts), corpus=tuple(cfg.corpus),
                   heldout_corpus=tuple(cfg.heldout_corpus))
