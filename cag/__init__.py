"""cag: cache-augmented generation across heterogeneous language models.

Prefill a document collection once with one encoder model, store per-chunk KV caches, and answer
with any generator from those caches (translated by MoT where the generator differs).
"""

__version__ = "0.1.0"
