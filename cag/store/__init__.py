"""The chunk-cache store: a SQLite catalog, a FAISS index and per-model chunk cache files."""

from cag.store.store import Store, StoreConfig, default_store_dir

__all__ = ["Store", "StoreConfig", "default_store_dir"]
