"""The larger packaged generator qwen2.5-coder-1.5b (slow; installed only by `make setup-large`).

The first run joins its 22 GGUF parts and converts it (about 75 s and 9 GiB of memory in fp32);
set $CAG_HOME_SLOW to keep the converted folder between sessions.
"""

import pytest

from cag.demo import demo_data
from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.generate import greedy_generate
from cag.models import load_model
from cag.models.packaged import PACKAGES, is_installed
from cag.prompt import prompt_layout

NAME = "qwen2.5-coder-1.5b"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not is_installed(NAME), reason=f"{NAME} is not installed: {PACKAGES[NAME][0]}")]


def test_the_large_generator_answers_from_its_cache_and_from_the_text(real_cag_home, monkeypatch):
    monkeypatch.setenv("CAG_HOME", real_cag_home)
    lm = load_model(NAME)
    assert lm.geometry.num_layers == 28 and lm.config.hidden_size == 1536
    assert lm.config.num_key_value_heads == 2 and lm.geometry.head_dim == 128
    data = demo_data()
    layout = prompt_layout(lm.tokenizer)
    chunk = prefill_chunk(lm, data["passage"], prefix_ids=layout.prefix_ids)
    item = data["questions"][0]  # Which NFL team represented the AFC at Super Bowl 50?
    q = layout.question_ids(lm.tokenizer, item["question"])
    cached = greedy_generate(lm, q, assemble(lm, [chunk], layout.prefix_ids), 12)
    direct = greedy_generate(lm, list(layout.prefix_ids) + chunk.token_ids.tolist() + q, None, 12)
    print(f"{NAME}: cache {cached.text!r} | prompt {direct.text!r} | loaded in {lm.load_seconds:.1f} s")
    assert item["answers"][0] in cached.text and cached.text == direct.text
    again = load_model(NAME)  # the converted folder reloads in seconds
    assert again.fingerprint == lm.fingerprint and again.load_seconds < 30
