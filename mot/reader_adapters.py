"""What a reader training trains: a LoRA on the generator (switched on for the question and the
answer) or link tokens after every chunk. Each gives the parameters, the cache the generator reads
(the stored context, plus the links when they are on) and the switch around the question's forward."""

from contextlib import nullcontext

import torch

from cag.readers import inject, lora_parameters, lora_state, lora_targets, reading
from cag.readers.links import initial_links, linked_cache
from mot.injection import full_cache
from mot.reader_config import TARGETS, ReaderConfig

LORA_NAME = "reader_in_training"  # the adapter's name while it trains (a module name: not "training")


class LoraUnderTraining:
    kind = "lora"

    def __init__(self, lm, cfg: ReaderConfig):
        self.lm = lm
        self.targets = lora_targets(lm.model, TARGETS[cfg.targets])
        inject(lm, LORA_NAME, cfg.rank, cfg.alpha, self.targets)
        self.params = lora_parameters(lm, LORA_NAME)
        for p in self.params:
            p.requires_grad_(True)
        self.spec_fields = {"rank": cfg.rank, "alpha": cfg.alpha, "target_modules": self.targets,
                            "kind": "lora", "link_tokens": 0}

    def switch(self, on: bool):
        """The block the question and answer run in: the LoRA on, or off."""
        return reading(self.lm, LORA_NAME if on else None)

    def cache(self, prefix_kv, prefix_len: int, keys: list, values: list, lengths: list, on: bool):
        """(cache, its length): the prefix and the stored chunks at their positions."""
        return full_cache(self.lm, prefix_kv, keys, values, prefix_len), prefix_len + keys[0].shape[1]

    def weights(self) -> dict:
        return lora_state(self.lm, LORA_NAME)


class LinksUnderTraining:
    kind = "links"

    def __init__(self, lm, cfg: ReaderConfig):
        self.lm = lm
        self.params = [torch.nn.Parameter(initial_links(lm, cfg.link_tokens))]
        self.spec_fields = {"rank": 0, "alpha": 0.0, "target_modules": (), "kind": "links",
                            "link_tokens": cfg.link_tokens}

    def switch(self, on: bool):
        return nullcontext()

    def cache(self, prefix_kv, prefix_len: int, keys: list, values: list, lengths: list, on: bool):
        """With the links on: the chunks re-placed with room for them, and the links computed."""
        if not on:
            return full_cache(self.lm, prefix_kv, keys, values, prefix_len), prefix_len + keys[0].shape[1]
        cache, where = linked_cache(self.lm, prefix_kv, keys, values, lengths, self.params[0])
        return cache, where.length

    def weights(self) -> dict:
        return {"links": self.params[0].detach()}


def under_training(lm, cfg: ReaderConfig):
    return (LoraUnderTraining if cfg.adapter == "lora" else LinksUnderTraining)(lm, cfg)
