"""Reader adapter checkpoints: what a reader is, and its files.

A reader adapter teaches a generator to read one kind of stored context: the generator's own
independently prefilled chunks (`reads` = "native") or the caches one translator makes (`reads` =
that translator's fingerprint). Two kinds:
  - "lora": a small LoRA active only on the tokens the generator computes after the stored context
    (question, answer; cag/readers/lora.py);
  - "links": `link_tokens` learned input embeddings after every chunk, computed by the unchanged
    generator at ask time (cag/readers/links.py).
Either way the context caches it reads are the same bytes with or without it.

    NAME.safetensors   lora: `<module path>.lora_A.weight`, `<module path>.lora_B.weight`;
                       links: `links` (link_tokens, hidden)
    NAME.json          {"spec": ReaderSpec, "weights_sha256": ..., "fingerprint": ...}

The fingerprint binds the weights to the generator and to what they read; the weights' sha256 is
checked on load.
"""

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from cag.atomic import atomic_write, atomic_write_text
from cag.errors import CagError
from cag.models.fingerprint import sha256_hex
from cag.records import checkpoint_paths, read_checkpoint_record

READER_FORMAT = 1
NATIVE = "native"  # `reads` of a reader of the generator's own chunk caches
_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
KINDS = ("lora", "links")


@dataclass(frozen=True)
class ReaderSpec:
    reads: str  # NATIVE, or the fingerprint of the translator whose caches it reads
    reads_name: str  # for messages: "native", or "SOURCE -> GENERATOR (KIND)"
    generator: str  # the generator's name
    generator_fingerprint: str
    rank: int
    alpha: float
    target_modules: tuple  # module names (q_proj, ...) the LoRA wraps in every decoder layer
    kind: str = "lora"  # "lora" or "links"
    link_tokens: int = 0  # links: learned tokens after every chunk
    training: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)  # held-out KL; `qa` / `qa_blend` (the auto gate)
    format_version: int = READER_FORMAT

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls, data: dict) -> "ReaderSpec":
        return cls(**{**data, "target_modules": tuple(data["target_modules"])})

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


@dataclass(frozen=True)
class Reader:
    spec: ReaderSpec
    weights: dict  # name -> float32 tensor
    fingerprint: str
    path: Path | None = None

    @property
    def adapter_name(self) -> str:
        """Its name among the adapters injected into one loaded model (a valid module name)."""
        return f"reader_{self.fingerprint[:16]}"


def reader_fingerprint(weights_sha256: str, spec: ReaderSpec) -> str:
    return sha256_hex(weights_sha256.encode(), spec.generator_fingerprint.encode(), spec.reads.encode())


def save_reader(spec: ReaderSpec, weights: dict, path, dtype: str = "fp16") -> Path:
    """Write NAME.safetensors and NAME.json atomically; the .safetensors path."""
    if dtype not in _DTYPES:
        raise CagError(f"Unknown reader weight dtype {dtype!r}; choose {', '.join(_DTYPES)}.")
    weights_path, record_path = checkpoint_paths(path)
    state = {k: v.detach().to(_DTYPES[dtype]).contiguous().cpu() for k, v in weights.items()}
    atomic_write(weights_path, lambda tmp: save_file(state, str(tmp)))
    digest = sha256_hex(weights_path.read_bytes())
    record = {"spec": spec.to_dict(), "weights_sha256": digest, "weights_dtype": dtype,
              "fingerprint": reader_fingerprint(digest, spec),
              "parameters": sum(v.numel() for v in state.values())}
    atomic_write_text(record_path, json.dumps(record, indent=2))
    return weights_path


def read_record(path) -> dict:
    return read_checkpoint_record(checkpoint_paths(path)[1], READER_FORMAT, "reader adapter", "cag train-reader")


def load_reader(path) -> Reader:
    """Load and verify (sha256 of the weights file, fingerprint) a reader adapter."""
    weights_path, _ = checkpoint_paths(path)
    record = read_record(path)
    if not weights_path.is_file():
        raise CagError(f"Reader adapter weights {weights_path} are missing.")
    digest = sha256_hex(weights_path.read_bytes())
    spec = ReaderSpec.from_dict(record["spec"])
    if digest != record["weights_sha256"] or record.get("fingerprint") != reader_fingerprint(digest, spec):
        raise CagError(f"Reader adapter weights {weights_path} do not match their record (corrupt or "
                       "replaced); retrain or re-copy it.")
    weights = {k: v.float() for k, v in load_file(str(weights_path)).items()}
    return Reader(spec, weights, record["fingerprint"], weights_path)


def record_qa(path, result: dict, key: str = "qa") -> None:
    """Write a QA measurement into a reader's JSON (weights and fingerprint unchanged): `key` "qa"
    (its full mode) or "qa_blend" (a blend setting); what `--mode auto` reads."""
    record_path = checkpoint_paths(path)[1]
    record = json.loads(record_path.read_text())
    record["spec"]["metrics"][key] = result
    atomic_write_text(record_path, json.dumps(record, indent=2))
