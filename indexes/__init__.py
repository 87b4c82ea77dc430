"""Sentence embeddings and FAISS vector indexes over chunk ids."""

from indexes.embedder import DEFAULT_EMBEDDER, Embedder
from indexes.faiss_index import VectorIndex

__all__ = ["DEFAULT_EMBEDDER", "Embedder", "VectorIndex"]
