"""Finding a causal LM's decoder layers and their attention modules (for forward hooks)."""


def decoder_layers(model) -> list:
    base = model.base_model
    for path in ("layers", "h", "decoder.layers"):
        module = base
        for part in path.split("."):
            module = getattr(module, part, None)
        if module is not None:
            return list(module)
    raise ValueError(f"cannot find the decoder layers of {type(model).__name__}")


def attention_modules(model) -> list:
    """Each decoder layer's self-attention module, in layer order."""
    return [getattr(layer, "self_attn", None) or layer.attn for layer in decoder_layers(model)]
