"""Batched chunk prefill (shared prefix, right padding) equals one-by-one prefill."""

import pytest
import torch

from cag.kv.chunk_cache import prefill_chunk, prefill_chunks
from tests.tiny_models import FAMILIES, tiny_lm, tiny_tokenizer

TEXTS = ["Ada Lovelace wrote the report in 1999.", "Paris is the capital of France.",
         "Numbers like 42 and 2048 appear in text, and so do names such as Ada Lovelace.",
         "The dog.", "Berlin is the capital of Germany; the quick brown fox jumps over it."]


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_prefill_equals_single(family):
    lm = tiny_lm(family)
    prefix = [tiny_tokenizer().bos_token_id] + tiny_tokenizer().encode("Context:")
    batched = prefill_chunks(lm, TEXTS, prefix, batch_size=3, doc_ids=["d"] * 5,
                             chunk_indices=list(range(5)))
    for i, (text, got) in enumerate(zip(TEXTS, batched)):
        want = prefill_chunk(lm, text, prefix, doc_id="d", chunk_index=i)
        assert got.meta == want.meta
        assert torch.equal(got.token_ids, want.token_ids)
        for a, b in zip(got.keys + got.values, want.keys + want.values):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
