"""KV geometry descriptions for the five families."""

import pytest

from cag.errors import CagError
from cag.models.geometry import geometry_of
from tests.tiny_models import tiny_config


def test_gpt2_and_opt_are_absolute():
    gpt2, opt = geometry_of(tiny_config("gpt2")), geometry_of(tiny_config("opt"))
    assert (gpt2.positions.kind, gpt2.positions.absolute_offset, gpt2.max_positions) == ("absolute", 0, 128)
    assert (opt.positions.kind, opt.positions.absolute_offset) == ("absolute", 2)
    assert (gpt2.num_layers, gpt2.kv_heads, gpt2.head_dim) == (2, 4, 8)


def test_llama_qwen_rotary_with_gqa():
    for family, theta in (("llama", 10000.0), ("qwen2", 1000000.0)):
        g = geometry_of(tiny_config(family))
        assert g.is_rotary and g.kv_heads == 2 and g.head_dim == 8
        assert g.positions.rope_theta == {"full_attention": theta}
        assert g.sliding_window is None


def test_gemma3_local_and_global_layers():
    g = geometry_of(tiny_config("gemma3"))
    assert g.layer_types == ("sliding_attention", "sliding_attention", "full_attention")
    assert g.sliding_window == 8 and g.is_sliding(0) and not g.is_sliding(2)
    assert g.positions.rope_theta == {"sliding_attention": 10000.0, "full_attention": 1000000.0}
    assert g.kv_bytes_per_token(2) == 2 * 3 * 1 * 16 * 2


def test_unsupported_family_is_refused():
    from transformers import BertConfig
    with pytest.raises(CagError, match="not supported"):
        geometry_of(BertConfig())


def test_rope_scaling_is_described():
    from transformers import LlamaConfig
    config = LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 8192})
    g = geometry_of(config)
    assert g.positions.rope_type == {"full_attention": "llama3"}
    assert g.positions.rope_scaling["full_attention"]["factor"] == 32.0
    assert geometry_of(tiny_config("qwen2")).positions.rope_scaling is None
