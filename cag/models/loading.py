"""Load a model by alias, hub id, folder or GGUF path into a `LoadedModel`."""

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cag.errors import CagError
from cag.settings import setting
from cag.models import packaged
from cag.models.aliases import ALIASES, ModelSpec, resolve_spec
from cag.models.convert import converted_for, converted_dir, read_manifest, is_converted
from cag.models.fingerprint import (folder_weights_digest, model_fingerprint, tensors_digest,
                                    tokenizer_digest)

log = logging.getLogger(__name__)

DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
          "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}


@dataclass
class LoadedModel:
    """A causal LM ready for prefill and generation, with its identity."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    fingerprint: str
    tokenizer_fingerprint: str
    load_seconds: float = 0.0
    source: str = ""
    _geometry: object = field(default=None, repr=False)
    # native prefix K/V by prefix digest: the same prefix (chat-template start) precedes every
    # question, so it is prefilled once per loaded model
    prefix_kv: dict = field(default_factory=dict, repr=False)
    warm: bool = False  # its one-time costs paid (cag.kv.assemble.warm_up)
    stop_ids: frozenset | None = field(default=None, repr=False)  # cag.kv.generate.stop_token_ids, once

    @property
    def config(self):
        return self.model.config

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def geometry(self):
        if self._geometry is None:
            from cag.models.geometry import geometry_of
            self._geometry = geometry_of(self.model.config)
        return self._geometry


def parse_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise CagError(f"Unknown dtype {dtype!r}; choose one of auto, fp32, bf16, fp16.")
    return DTYPES[dtype]


def device_setting(default: str = "auto"):
    """The `device` field of a config (cag.settings): where models run."""
    return setting(default, "Where models run: auto (cuda if torch sees a GPU, else cpu), cpu, cuda, cuda:N or mps.",
                   envvar="CAG_DEVICE")


def dtype_setting(default: str = "auto", help: str = "Compute dtype: auto (bf16 on a GPU, fp32 on CPU), fp32, "
                  "bf16 or fp16."):
    """The `dtype` field of a config (cag.settings): the models' compute dtype."""
    return setting(default, help, envvar="CAG_DTYPE")


def check_dtype(dtype: str) -> None:
    """A compute dtype a config may hold: auto or one of DTYPES."""
    if dtype != "auto":
        parse_dtype(dtype)


def resolve_device(device: str = "auto") -> str:
    """"auto" -> cuda when torch sees a GPU, else cpu; a GPU device that is not there is refused."""
    device = (device or "auto").strip().lower()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise CagError(f"--device {device}: torch sees no CUDA GPU here; use --device cpu (or auto).")
        index = device.partition(":")[2]
        if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
            raise CagError(f"--device {device}: there are {torch.cuda.device_count()} CUDA device(s).")
        return device
    if device == "mps":
        if not torch.backends.mps.is_available():
            raise CagError("--device mps: torch sees no Apple GPU here; use --device cpu (or auto).")
        return device
    if device != "cpu":
        raise CagError(f"Unknown device {device!r}; choose auto, cpu, cuda, cuda:N or mps.")
    return device


def resolve_dtype(dtype: str = "auto", device: str = "cpu") -> str:
    """"auto" -> bf16 on a GPU (half the memory, the GPUs' native speed), fp32 on CPU (exact)."""
    if dtype == "auto":
        return "fp32" if device == "cpu" else "bf16"
    parse_dtype(dtype)
    return dtype


def load_model(name: str, dtype="fp32", device: str = "cpu") -> LoadedModel:
    """Resolve `name` and load model + tokenizer (converting a GGUF once on first use).
    `device` and `dtype` may be "auto" (see resolve_device / resolve_dtype)."""
    spec = resolve_spec(name)
    device = resolve_device(device)
    if not isinstance(dtype, torch.dtype):
        dtype = resolve_dtype(dtype, device)
    torch_dtype = parse_dtype(dtype)
    start = time.perf_counter()
    folder, weights = _folder_for(spec)
    model, tokenizer = _from_folder_or_hub(spec, folder, torch_dtype, device)
    if weights is None:
        weights = folder_weights_digest(folder) if folder is not None else _hub_weights_digest(model)
    seconds = time.perf_counter() - start
    log.info("loaded %s in %.1f s", spec.name, seconds)
    return wrap_model(spec.name, model, tokenizer, weights_digest=weights, load_seconds=seconds,
                      source=spec.source)


def wrap_model(name: str, model, tokenizer, weights_digest: str | None = None,
               load_seconds: float = 0.0, source: str = "memory") -> LoadedModel:
    """Wrap an already built model (tests build tiny ones in code) as a LoadedModel."""
    model.eval()
    tok_digest = tokenizer_digest(tokenizer)
    weights = weights_digest or tensors_digest(model)
    return LoadedModel(name=name, model=model, tokenizer=tokenizer,
                       fingerprint=model_fingerprint(model.config, weights, tok_digest),
                       tokenizer_fingerprint=tok_digest, load_seconds=load_seconds, source=source)


def _folder_for(spec: ModelSpec) -> tuple[Path | None, str | None]:
    """The local folder to load (None for a hub id) and its weights digest if already known."""
    if spec.kind == "packaged":
        folder = converted_for(spec.name, lambda: packaged.gguf_path(spec.source))
    elif spec.kind == "gguf":
        gguf = Path(spec.source)
        stamp = packaged.file_sha256(gguf)[:16]
        folder = converted_for(f"gguf-{gguf.stem}-{stamp}", lambda: gguf)
    elif spec.kind == "folder":
        return Path(spec.source), None
    else:
        return None, None
    return folder, read_manifest(folder)["weights_sha256"]


def _from_folder_or_hub(spec: ModelSpec, folder: Path | None, dtype: torch.dtype, device: str):
    from transformers import AutoModelForCausalLM

    target = str(folder) if folder is not None else spec.source
    tokenizer = _tokenizer(spec, folder)
    try:
        model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype).to(device)
    except OSError as exc:
        raise _load_error(spec, folder, exc) from exc
    return model, tokenizer


def _tokenizer(spec: ModelSpec, folder: Path | None):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    # converted GGUF folders hold a plain fast tokenizer; the generic class loads it 1.5x faster
    # than e.g. GemmaTokenizer with identical ids, offsets and chat template
    tokenizer_class = PreTrainedTokenizerFast if folder and is_converted(folder) else AutoTokenizer
    try:
        return tokenizer_class.from_pretrained(str(folder) if folder is not None else spec.source)
    except OSError as exc:
        raise _load_error(spec, folder, exc) from exc


def _load_error(spec: ModelSpec, folder: Path | None, exc: Exception) -> CagError:
    if folder is not None:
        return CagError(f"Could not load model folder {folder}: {exc}")
    return CagError(_hub_error(spec, exc))


@dataclass(frozen=True)
class ModelIdentity:
    """A model's name, tokenizer and fingerprints, read without loading its weights (a Ray driver
    chunks text and names cache spaces with it while workers hold the models)."""

    name: str
    tokenizer: object
    fingerprint: str
    tokenizer_fingerprint: str


def model_identity(name: str) -> ModelIdentity:
    """The identity `load_model(name)` would give (the same fingerprint: config, weight files and
    tokenizer), from the config and the weight files' digest; a hub model without a local snapshot
    to hash is loaded once on CPU."""
    from transformers import AutoConfig

    spec = resolve_spec(name)
    folder, weights = _folder_for(spec)
    if folder is None:
        try:
            from huggingface_hub import snapshot_download
            folder_or_none = Path(snapshot_download(spec.source, local_files_only=True))
        except Exception:  # not in the HF cache: only loading it can tell its weights
            lm = load_model(name, "fp32", "cpu")
            return ModelIdentity(lm.name, lm.tokenizer, lm.fingerprint, lm.tokenizer_fingerprint)
        weights = folder_weights_digest(folder_or_none)
    tokenizer = _tokenizer(spec, folder)
    try:
        config = AutoConfig.from_pretrained(str(folder) if folder is not None else spec.source)
    except OSError as exc:
        raise _load_error(spec, folder, exc) from exc
    weights = weights or folder_weights_digest(folder)
    tok_digest = tokenizer_digest(tokenizer)
    return ModelIdentity(spec.name, tokenizer, model_fingerprint(config, weights, tok_digest), tok_digest)


def _hub_error(spec: ModelSpec, exc: Exception) -> str:
    from huggingface_hub import is_offline_mode  # lazily, as transformers above: the error path only
    offline = is_offline_mode()  # what the hub library uses (read at its import), not the env now
    packaged_names = ", ".join(n for n, s in ALIASES.items() if s.kind == "packaged")
    return (f"Could not load {spec.name!r} ({spec.source}) from the Hugging Face hub"
            f"{' (HF_HUB_OFFLINE=1)' if offline else ''}: {str(exc).splitlines()[0]} "
            f"Connect to the hub (or pre-download it into the HF cache), pass a local model folder "
            f"or .gguf file, or use a packaged offline model: {packaged_names}."
            + ("" if offline else " Without a network, HF_HUB_OFFLINE=1 makes this fail at once."))


def _hub_weights_digest(model) -> str:
    """A hub model's files live in the HF cache: hash the files the model was loaded from."""
    path = getattr(model, "name_or_path", None) or model.config._name_or_path
    try:
        from huggingface_hub import snapshot_download
        folder = Path(snapshot_download(path, local_files_only=True))
        return folder_weights_digest(folder)
    except Exception:  # no local snapshot to hash: fall back to the tensors themselves
        return tensors_digest(model)


def availability(spec: ModelSpec) -> str:
    """A short word on whether `spec` can be loaded here without a network."""
    if spec.kind == "packaged":
        if not packaged.is_installed(spec.source):
            return "not installed"
        return "offline (converted)" if is_converted(converted_dir(spec.name)) else "offline"
    if spec.kind == "hub":
        try:
            from huggingface_hub import try_to_load_from_cache
            hit = try_to_load_from_cache(spec.source, "config.json")
            return "offline (HF cache)" if isinstance(hit, str) else "needs network"
        except Exception:
            return "needs network"
    return "local"
