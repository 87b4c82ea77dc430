"""Model aliases, offline packaged GGUF models, conversion, loading and fingerprints."""

from cag.models.aliases import ALIASES, ModelSpec, resolve_spec
from cag.models.loading import LoadedModel, load_model, wrap_model

__all__ = ["ALIASES", "LoadedModel", "ModelSpec", "load_model", "resolve_spec", "wrap_model"]
