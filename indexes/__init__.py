"""Sentence embeddings and FAISS vector indexes over int64 ids. The lowest layer: it imports
nothing of cag, mot, eval or cli."""

from indexes.embedder import Embedder, EmbedderLoadError
from indexes.faiss_index import IndexInfo, IndexSetupError, VectorIndex

__all__ = ["Embedder", "EmbedderLoadError", "IndexInfo", "IndexSetupError", "VectorIndex"]
