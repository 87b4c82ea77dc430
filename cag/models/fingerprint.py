"""Model and tokenizer fingerprints: sha256 over bytes, recorded by every stored cache and translator.

model fingerprint = sha256(config digest, weights digest, tokenizer digest)
- config digest: canonical JSON of the model config, without fields that do not change the model
  (library version, load path, compute dtype);
- weights digest: sha256 of the weight files' bytes for a model loaded from a folder (computed once
  and remembered under the cag home by file size and mtime), or of every tensor's bytes for a model
  built in memory;
- tokenizer digest: the serialized fast tokenizer, its special tokens and chat template.
"""

import hashlib
import json
import logging
from pathlib import Path

import torch

from cag.atomic import atomic_write_text
from cag.home import cag_home

log = logging.getLogger(__name__)

_VOLATILE_CONFIG_KEYS = {"transformers_version", "_name_or_path", "torch_dtype", "dtype",
                         "quantization_config", "use_cache", "_commit_hash", "output_attentions",
                         "output_hidden_states", "return_dict", "_attn_implementation_autoset"}


def sha256_hex(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))  # length-prefixed: no ambiguity between parts
        digest.update(part)
    return digest.hexdigest()


def config_digest(config) -> str:
    data = {k: v for k, v in config.to_dict().items() if k not in _VOLATILE_CONFIG_KEYS}
    return sha256_hex(json.dumps(data, sort_keys=True, default=str).encode())


def tokenizer_digest(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    body = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    extras = json.dumps({"special": tokenizer.all_special_tokens,
                         "bos": tokenizer.bos_token, "eos": tokenizer.eos_token,
                         "chat_template": getattr(tokenizer, "chat_template", None)},
                        sort_keys=True, default=str)
    return sha256_hex(body.encode(), extras.encode())


def tensors_digest(module: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def weight_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    return files


def folder_weights_digest(folder: Path) -> str:
    """sha256 over the weight files of a model folder, remembered by (path, size, mtime)."""
    files = weight_files(folder)
    stat_key = sha256_hex(*[f"{f.resolve()}|{f.stat().st_size}|{f.stat().st_mtime_ns}".encode()
                            for f in files])
    memo_path = cag_home() / "fingerprints.json"
    memo = json.loads(memo_path.read_text()) if memo_path.is_file() else {}
    if stat_key in memo:
        return memo[stat_key]
    log.info("hashing %d weight file(s) in %s (once)", len(files), folder)
    memo[stat_key] = files_digest(files)
    atomic_write_text(memo_path, json.dumps(memo, indent=1))
    return memo[stat_key]


def files_digest(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def model_fingerprint(config, weights: str, tokenizer: str) -> str:
    return sha256_hex(config_digest(config).encode(), weights.encode(), tokenizer.encode())
