"""Tiny random-config models of the five supported families, built in code (tests, examples).

Weights come from a fixed seed; the tokenizer is a small byte-level BPE trained in code on a fixed
text, so everything is offline, deterministic and fast.
"""

import functools

import torch

from cag.models.loading import LoadedModel, wrap_model

FAMILIES = ("gpt2", "opt", "llama", "qwen2", "gemma3")
TINY_VOCAB = 384
_TRAINING_TEXT = (
    "The quick brown fox jumps over the lazy dog. Cache augmented generation stores the key and "
    "value states of every chunk once. Paris is the capital of France; Berlin is the capital of "
    "Germany. Question: who wrote the report? Answer: the committee wrote it in 1999. "
    "Numbers like 42, 2048 and 3.14 appear in text, and so do names such as Ada Lovelace. "
) * 4


@functools.lru_cache(maxsize=1)
def tiny_tokenizer():
    """A byte-level BPE tokenizer with <bos>, <eos>, <pad> and a tiny chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TINY_VOCAB, special_tokens=["<pad>", "<bos>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([_TRAINING_TEXT], trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}<bos>{{ m['role'] }}: {{ m['content'] }}\n"
                          "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")
    return fast


def tiny_config(family: str, **overrides):
    """A tiny config of `family`; `overrides` replace any field (e.g. max_position_embeddings)."""
    config = _base_tiny_config(family)
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


def _base_tiny_config(family: str):
    from transformers import (Gemma3TextConfig, GPT2Config, LlamaConfig, OPTConfig, Qwen2Config)

    tok = tiny_tokenizer()
    common = dict(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                  pad_token_id=tok.pad_token_id)
    if family == "gpt2":
        return GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=128, initializer_range=0.2,
                          **common)
    if family == "opt":
        return OPTConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, ffn_dim=64,
                         word_embed_proj_dim=32, max_position_embeddings=128, init_std=0.2, **common)
    rotary = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.2)
    if family == "llama":
        return LlamaConfig(num_hidden_layers=2, rope_parameters={"rope_type": "default",
                                                                  "rope_theta": 10000.0},
                           **rotary, **common)
    if family == "qwen2":
        return Qwen2Config(num_hidden_layers=2, rope_parameters={"rope_type": "default",
                                                                  "rope_theta": 1000000.0},
                           **rotary, **common)
    if family == "gemma3":
        return Gemma3TextConfig(
            num_hidden_layers=3, head_dim=16, sliding_window=8,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                             "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
            **{**rotary, "num_key_value_heads": 1}, **common)
    raise ValueError(f"unknown tiny family {family!r}; choose from {FAMILIES}")


def tiny_lm(family: str, seed: int = 0, **overrides) -> LoadedModel:
    """A tiny fp32 model of `family` with random weights from `seed`."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(family, **overrides), dtype=torch.float32)
    return wrap_model(f"tiny-{family}", model, tiny_tokenizer())


def save_tiny_model(folder, family: str = "qwen2", seed: int = 0, **overrides):
    """Write a tiny model + tokenizer folder that `load_model(str(folder))` (and the CLI) can load."""
    lm = tiny_lm(family, seed=seed, **overrides)
    lm.model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder

