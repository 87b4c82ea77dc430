"""Translator checkpoints: weights in safetensors, the spec (both models' fingerprints and
geometries, layer map, training config, held-out metrics) in a JSON file beside them.

    NAME.safetensors   tensors (fp16 by default, to keep shipped files small; int8: every matrix
                       as int8 rows with one fp16 scale per row, `NAME` + `NAME::scale`, half of
                       fp16's size)
    NAME.json          {"spec": ..., "weights_sha256": ..., "fingerprint": ...}
"""

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from cag.atomic import atomic_write, atomic_write_text
from cag.errors import CagError
from cag.models.fingerprint import sha256_hex
from cag.records import checkpoint_paths, read_checkpoint_record
from mot.translator import CHECKPOINT_FORMAT, TrainingRecord, Translator, TranslatorSpec

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
WEIGHT_DTYPES = (*_DTYPES, "int8")  # what a translator may be saved in


SCALE = "::scale"  # suffix of an int8 matrix's per-row scales


def _int8_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per row of the last axis: (int8 values, fp16 scales of shape [..., 1])."""
    w = weight.detach().float()
    scale = (w.abs().amax(-1, keepdim=True) / 127.0).clamp(min=1e-12).half()
    return (w / scale.float()).round().clamp(-127, 127).to(torch.int8).contiguous(), scale.contiguous()


def check_weight_dtype(dtype: str) -> None:
    if dtype not in WEIGHT_DTYPES:
        raise CagError(f"Unknown translator weight dtype {dtype!r}; choose {', '.join(WEIGHT_DTYPES)}.")


def storable_state(translator: Translator, dtype: str) -> dict:
    """The tensors written for `dtype` (fp32, fp16, bf16, or int8: matrices as int8 rows with
    per-row scales, vectors and buffers in fp16)."""
    check_weight_dtype(dtype)
    state = {}
    for name, value in translator.state_dict().items():
        if dtype == "int8" and value.dim() >= 2:
            state[name], state[name + SCALE] = _int8_rows(value)
        else:
            state[name] = value.detach().to(_DTYPES.get(dtype, torch.float16)).contiguous()
    return state


def _float_state(stored: dict) -> dict:
    """The float32 state dict back from stored tensors (int8 rows times their scales)."""
    state = {}
    for name, value in stored.items():
        if name.endswith(SCALE):
            continue
        scale = stored.get(name + SCALE)
        state[name] = value.float() * scale.float() if scale is not None else value.float()
    return state


def save_translator(translator: Translator, path: Path, dtype: str = "fp16") -> Path:
    """Write PATH.safetensors and PATH.json atomically; returns the .safetensors path."""
    path, record_path = checkpoint_paths(path)
    state = storable_state(translator, dtype)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: save_file(state, str(tmp)))
    data = path.read_bytes()
    reloaded = load_translator_weights(translator.spec, path)
    # one "spec" object on disk, as the first checkpoints had it: identity and training record together
    spec = {**translator.spec.to_dict(), "training": translator.record.training, "metrics": translator.record.metrics}
    record = {"spec": spec, "weights_sha256": sha256_hex(data),
              "weights_dtype": dtype, "fingerprint": reloaded.fingerprint(),
              "parameters": translator.parameter_count()}
    atomic_write_text(record_path, json.dumps(record, indent=2))
    return path


def load_translator_weights(spec: TranslatorSpec, path: Path, record: TrainingRecord = TrainingRecord()) -> Translator:
    translator = Translator(spec, record)
    state = _float_state(load_file(str(path)))
    wanted = translator.state_dict()
    differ = sorted(set(wanted) ^ set(state)) or [k for k in wanted if wanted[k].shape != state[k].shape]
    if differ:
        raise CagError(f"Translator weights {path} do not fit the translator its JSON describes ({spec.source.name} "
                       f"-> {spec.target.name}, {spec.kind}; {len(differ)} tensor(s) differ, e.g. {differ[0]}): "
                       "the two files belong to different translators; reinstall or retrain it.")
    translator.load_state_dict(state)
    return translator.eval()


def read_record(path: Path) -> dict:
    return read_checkpoint_record(checkpoint_paths(path)[1], CHECKPOINT_FORMAT, "translator", "cag train")


def load_translator(path: Path) -> Translator:
    """Load and verify (sha256 of the weights file) a translator checkpoint."""
    path = checkpoint_paths(path)[0]
    record = read_record(path)
    if not path.is_file():
        raise CagError(f"Translator weights {path} are missing.")
    if sha256_hex(path.read_bytes()) != record["weights_sha256"]:
        raise CagError(f"Translator weights {path} do not match their record (corrupt or replaced); "
                       "retrain or re-copy it.")
    translator = load_translator_weights(TranslatorSpec.from_dict(record["spec"]), path,
                                         TrainingRecord.from_dict(record["spec"]))
    translator.checkpoint_path = path
    return translator


def record_qa(checkpoint: Path, result: dict, key: str = "qa") -> None:
    """Write a QA retention measurement into a translator's JSON (weights and fingerprint
    unchanged): `key` "qa" (its full mode) or "qa_blend" (a translated-blend setting)."""
    record_path = checkpoint_paths(checkpoint)[1]
    record = json.loads(record_path.read_text())
    record["spec"]["metrics"][key] = result
    atomic_write_text(record_path, json.dumps(record, indent=2))
