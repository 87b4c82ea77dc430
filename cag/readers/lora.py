"""Putting reader adapters (LoRA, with peft) into a loaded generator, and switching them on only
while the generator reads new tokens.

`attach(lm, reader)` injects the reader's LoRA into `lm.model` once (peft's
`inject_adapter_in_model`, one named adapter per reader) and leaves it switched off: every forward
pass of the model is then exactly the base model's. `reading(lm, name)` switches that adapter on
for the duration of a block: ask and eval wrap only the generation (the question and the answer)
in it, so the generator's prompt prefix, its stored or translated context caches and any tokens a
blend recomputes are computed without it, and `direct` never uses one.
"""

from contextlib import contextmanager

import torch

from cag.errors import CagError
from cag.models.layers import decoder_layers

# the linear layers of a decoder block a reader may adapt (attention, then MLP; names by family)
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")


def lora_layers(model) -> list:
    from peft.tuners.lora import LoraLayer  # peft only when a reader is used
    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def lora_targets(model, wanted: tuple) -> tuple:
    """The names in `wanted` that are linear layers of every decoder block (refused when none is)."""
    blocks = decoder_layers(model)
    present = tuple(name for name in wanted
                    if all(any(n.split(".")[-1] == name and isinstance(m, torch.nn.Linear)
                               for n, m in block.named_modules()) for block in blocks))
    if not present:
        raise CagError(f"{type(model).__name__} has none of the layers a reader adapter wraps "
                       f"({', '.join(wanted)}): reader adapters support llama, qwen2 and gemma3 generators.")
    return present


def inject(lm, name: str, rank: int, alpha: float, targets: tuple) -> None:
    """Add a fresh LoRA adapter `name` (B = 0: the base model's outputs) to `lm.model`, switched off."""
    from peft import LoraConfig, inject_adapter_in_model

    requires = {n: p.requires_grad for n, p in lm.model.named_parameters()}
    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0, bias="none")
    inject_adapter_in_model(config, lm.model, adapter_name=name)
    for n, p in lm.model.named_parameters():  # peft freezes the base model: leave it as it was
        if n in requires:
            p.requires_grad_(requires[n])
    for layer in lora_layers(lm.model):
        if name in layer.lora_A:
            layer.lora_A[name].float()  # fp32 adapters on any compute dtype (peft casts the input)
            layer.lora_B[name].float()
        layer.enable_adapters(False)


def _named_layers(model, name: str):
    for path, module in model.named_modules():
        if hasattr(module, "lora_A") and name in getattr(module, "lora_A", {}):
            yield path, module


def lora_parameters(lm, name: str) -> list:
    return [p for _, m in _named_layers(lm.model, name) for p in (m.lora_A[name].weight, m.lora_B[name].weight)]


def lora_state(lm, name: str) -> dict:
    """The adapter's matrices by `<module path>.lora_A.weight` / `.lora_B.weight`."""
    state = {}
    for path, module in _named_layers(lm.model, name):
        state[f"{path}.lora_A.weight"] = module.lora_A[name].weight.detach()
        state[f"{path}.lora_B.weight"] = module.lora_B[name].weight.detach()
    return state


def load_lora_state(lm, name: str, weights: dict, what: str = "reader adapter") -> None:
    held = {k: v for k, v in lora_state(lm, name).items()}
    differ = sorted(set(held) ^ set(weights)) or [k for k in held if held[k].shape != weights[k].shape]
    if differ:
        raise CagError(f"The {what}'s weights do not fit {lm.name} ({len(differ)} tensor(s) differ, e.g. "
                       f"{differ[0]}): it was made for a generator of another shape; retrain it.")
    with torch.no_grad():
        for path, module in _named_layers(lm.model, name):
            module.lora_A[name].weight.copy_(weights[f"{path}.lora_A.weight"])
            module.lora_B[name].weight.copy_(weights[f"{path}.lora_B.weight"])


def check_generator(lm, reader) -> None:
    """Refuse a reader trained for another generator (or another version of it)."""
    spec = reader.spec
    if spec.generator_fingerprint != lm.fingerprint:
        raise CagError(f"Reader adapter {reader.path or ''} was trained for {spec.generator} "
                       f"({spec.generator_fingerprint[:12]}), not for {lm.name} ({lm.fingerprint[:12]}): "
                       "use it with that generator, or train one for this one.")


def attach(lm, reader) -> str:
    """Inject the LoRA `reader` (cag.readers.checkpoint.Reader) into `lm` once, switched off; its
    adapter name. A reader trained for another generator (or another version of it) is refused."""
    check_generator(lm, reader)
    spec = reader.spec
    if spec.kind != "lora":
        raise CagError(f"Reader adapter {reader.path or ''} is a {spec.kind} reader, not a LoRA one.")
    name = reader.adapter_name
    if name not in lm.readers:
        inject(lm, name, spec.rank, spec.alpha, spec.target_modules)
        load_lora_state(lm, name, reader.weights)
        lm.readers[name] = reader.fingerprint
    return name


@contextmanager
def reading(lm, name: str | None):
    """Adapter `name` on for the block (None: nothing changes); off again afterwards, whatever happens."""
    if name is None:
        yield
        return
    layers = [layer for layer in lora_layers(lm.model) if name in layer.lora_A]
    if not layers:
        raise CagError(f"Reader adapter {name} is not attached to {lm.name}.")
    try:
        for layer in layers:
            layer.set_adapter(name)
            layer.enable_adapters(True)
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(False)
