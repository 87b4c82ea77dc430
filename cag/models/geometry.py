"""What a model's KV cache looks like: layers, heads, head size, layer types, position scheme."""

from dataclasses import dataclass, asdict

from cag.errors import CagError

ROTARY_FAMILIES = {"llama", "qwen2", "gemma3_text", "gemma3", "mistral", "qwen3"}
ABSOLUTE_FAMILIES = {"gpt2": 0, "opt": 2}  # family -> offset of the learned position table


@dataclass(frozen=True)
class PositionScheme:
    kind: str  # "rotary" or "absolute"
    rope_theta: dict  # layer type -> base (rotary only)
    rope_type: dict  # layer type -> "default", "linear", "llama3", ... (rotary only)
    rotary_fraction: float = 1.0
    rope_scaling: dict | None = None  # layer type -> scaling parameters (factor, ...) if any
    absolute_offset: int = 0  # OPT's learned positions are looked up at position + 2


@dataclass(frozen=True)
class KVGeometry:
    family: str
    num_layers: int
    kv_heads: int
    head_dim: int
    layer_types: tuple  # per layer: "full_attention" or "sliding_attention"
    sliding_window: int | None
    positions: PositionScheme
    max_positions: int

    @property
    def is_rotary(self) -> bool:
        return self.positions.kind == "rotary"

    def is_sliding(self, layer: int) -> bool:
        return self.layer_types[layer] == "sliding_attention"

    def kv_bytes_per_token(self, bytes_per_value: int) -> int:
        """Bytes of K and V for one token over all layers (before sliding-window trimming)."""
        return 2 * self.num_layers * self.kv_heads * self.head_dim * bytes_per_value

    def to_dict(self) -> dict:
        return asdict(self)


def geometry_of(config) -> KVGeometry:
    """Describe the KV cache of a transformers causal-LM config (the five supported families)."""
    family = config.model_type
    if family in ABSOLUTE_FAMILIES:
        return _absolute_geometry(config, family)
    if family in ROTARY_FAMILIES:
        return _rotary_geometry(config, family)
    raise CagError(f"Model family {family!r} is not supported; supported: gpt2, opt, llama, "
                   "qwen2, gemma3.")


def _absolute_geometry(config, family: str) -> KVGeometry:
    layers = config.num_hidden_layers if family == "opt" else config.n_layer
    heads = config.num_attention_heads if family == "opt" else config.n_head
    hidden = config.hidden_size if family == "opt" else config.n_embd
    max_pos = config.max_position_embeddings if family == "opt" else config.n_positions
    return KVGeometry(family, layers, heads, hidden // heads, ("full_attention",) * layers, None,
                      PositionScheme("absolute", {}, {}, absolute_offset=ABSOLUTE_FAMILIES[family]), max_pos)


def _rotary_geometry(config, family: str) -> KVGeometry:
    layers = config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    layer_types = tuple(getattr(config, "layer_types", None) or ["full_attention"] * layers)
    sliding = getattr(config, "sliding_window", None) if "sliding_attention" in layer_types else None
    params = config.rope_parameters
    # per-layer-type parameters (Gemma3) or one set for every layer (Llama, Qwen2)
    by_type = params if set(params) <= {"full_attention", "sliding_attention"} else {
        t: params for t in set(layer_types)}
    scheme = PositionScheme(
        "rotary",
        rope_theta={t: float(p["rope_theta"]) for t, p in by_type.items()},
        rope_type={t: p.get("rope_type", "default") for t, p in by_type.items()},
        rotary_fraction=float(getattr(config, "partial_rotary_factor", 1.0) or 1.0),
        rope_scaling={t: extra for t, p in by_type.items()
                      if (extra := {k: v for k, v in p.items() if k not in ("rope_theta", "rope_type")})}
        or None,
    )
    return KVGeometry(family, layers, config.num_key_value_heads, head_dim, layer_types, sliding,
                      scheme, config.max_position_embeddings)


def keeps_every_position(geometry: KVGeometry, length: int) -> bool:
    """Whether a cache of `length` positions still holds them all (no sliding window drops any)."""
    return not geometry.sliding_window or length < geometry.sliding_window


def require_every_position(lm, length: int, who: str) -> None:
    """Raise a one-line CagError unless `lm` keeps every one of `length` cache positions at its
    rotary place: what blend and link tokens need to write tokens between cached ones
    (`who`: "Blend modes", "Link tokens")."""
    geometry = lm.geometry
    if not geometry.is_rotary:
        raise CagError(f"{who} need a rotary generator; {geometry.family} uses absolute positions.")
    if not keeps_every_position(geometry, length):
        raise CagError(f"{who} need every position in the cache: {lm.name}'s sliding-window layers "
                       f"keep {geometry.sliding_window - 1} tokens, the context has {length}.")
