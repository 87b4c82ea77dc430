"""Key errors weighted by the target's queries: the moments against logits computed another way,
and the loss's scale (0 when exact, 1 when predicting the mean, blind to what no query reads)."""

import pytest
import torch

from cag.kv.rotary import Rotary
from cag.testing import tiny_lm
from mot.training.query_metric import query_moments, query_weighted_error


@pytest.mark.parametrize("family", ["qwen2", "gemma3", "llama"])
def test_moments_give_the_logit_change_a_key_error_makes(family):
    """With every query meeting the key one token back, e^T S e is the mean (over query tokens,
    summed over the query heads sharing the KV head) squared change of the logit q_rot(m) . k_rot(m-1)
    when the position-free key moves by e: layer 0's queries rebuilt from the embeddings."""
    lm = tiny_lm(family, seed=3)
    ids = torch.randint(3, len(lm.tokenizer), (20,), generator=torch.Generator().manual_seed(1))
    moments = query_moments(lm, [ids], max_distance=1)
    geometry = lm.geometry
    assert len(moments) == geometry.num_layers
    assert moments[0].shape == (geometry.kv_heads, geometry.head_dim, geometry.head_dim)
    attn = lm.model.base_model.layers[0].self_attn
    heads, dim = lm.model.config.num_attention_heads, geometry.head_dim
    with torch.no_grad():
        hidden = lm.model.base_model.layers[0].input_layernorm(lm.model.base_model.embed_tokens(ids[None]))
        q = attn.q_proj(hidden).reshape(1, ids.numel(), heads, dim)
        if getattr(attn, "q_norm", None) is not None:
            q = attn.q_norm(q)
        q = q[0].transpose(0, 1)  # (heads, T, D)
    rotary = Rotary(lm.model, geometry)
    positions = torch.arange(ids.numel()) + 7  # any absolute positions: only the distance counts
    q_rot = rotary.apply(q, positions, 0)
    e = torch.randn(geometry.kv_heads, 1, dim, generator=torch.Generator().manual_seed(2))
    e_rot = rotary.apply(e.expand(-1, ids.numel(), -1), positions - 1, 0)  # the key one token back
    group = heads // geometry.kv_heads
    for h in range(geometry.kv_heads):
        change = (q_rot[h * group:(h + 1) * group] * e_rot[h]).sum(-1)  # (group, T)
        expected = (change ** 2).mean(dim=1).sum()
        got = e[h, 0] @ moments[0][h] @ e[h, 0]
        assert torch.allclose(got, expected, rtol=1e-4), (h, got, expected)


def test_query_weighted_error_scale():
    g = torch.Generator().manual_seed(0)
    target = torch.randn(2, 30, 8, generator=g) + 5.0  # a large constant part, as Qwen2's key biases
    a = torch.randn(2, 8, 8, generator=g)
    moment = a @ a.transpose(1, 2)  # (H, D, D), positive definite
    assert float(query_weighted_error(target.clone(), target, moment)) == 0.0
    mean = target.mean(dim=1, keepdim=True).expand_as(target)
    assert float(query_weighted_error(mean, target, moment)) == pytest.approx(1.0, rel=1e-5)
    noise = 0.1 * torch.randn(target.shape, generator=g)
    one = float(query_weighted_error(target + noise, target, moment))
    assert float(query_weighted_error(target + 2 * noise, target, moment)) == pytest.approx(4 * one, rel=1e-5)
    # an error no query reads costs nothing, however large
    blind = moment.clone()
    blind[:, 0, :] = blind[:, :, 0] = 0.0
    shifted = target.clone()
    shifted[..., 0] += 100.0
    assert float(query_weighted_error(shifted, target, blind)) == pytest.approx(0.0, abs=1e-6)
    assert float(query_weighted_error(shifted, target, moment)) > 100.0


def test_a_target_without_a_separate_query_projection_is_refused():
    from cag.errors import CagError
    lm = tiny_lm("gpt2", seed=0)  # fused c_attn
    with pytest.raises(CagError, match="use --key-loss nmse"):
        query_moments(lm, [torch.tensor([3, 4, 5])])
