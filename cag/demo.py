"""The foundation demo: prefill a passage once, store its cache, reload it, answer from it.

Each question is answered twice with the same greedy decoding: from the reloaded chunk cache (the
generator prefills only the question) and from the full prompt (the generator reads the passage),
so the two answers and their time to first token can be compared side by side.
"""

import json
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from cag.defaults import DEFAULT_GENERATOR
from cag.home import cag_home
from cag.kv.assemble import assemble
from cag.kv.chunk_cache import prefill_chunk
from cag.kv.generate import greedy_generate
from cag.kv.serde import load_chunk_cache, save_chunk_cache
from cag.models import load_model
from cag.prompt import prompt_layout


@dataclass
class DemoAnswer:
    question: str
    gold: list
    from_cache: str
    from_prompt: str
    ttft_cache_ms: float
    ttft_prompt_ms: float

    @property
    def same(self) -> bool:
        return self.from_cache == self.from_prompt


@dataclass
class DemoReport:
    model: str
    load_seconds: float
    passage_tokens: int
    prefill_seconds: float
    cache_path: Path
    cache_bytes: int
    dtype: str
    answers: list = field(default_factory=list)


def demo_data() -> dict:
    return json.loads(files("cag").joinpath("data/demo.json").read_text(encoding="utf-8"))


def run_demo(model: str = DEFAULT_GENERATOR, dtype: str = "fp16", max_new_tokens: int = 16,
             lm=None) -> DemoReport:
    data = demo_data()
    lm = lm or load_model(model)
    layout = prompt_layout(lm.tokenizer)
    start = time.perf_counter()
    chunk = prefill_chunk(lm, data["passage"], prefix_ids=layout.prefix_ids, doc_id=data["title"],
                          chunk_index=0)
    prefill_seconds = time.perf_counter() - start
    path = cag_home() / "demo" / f"{lm.name.replace('/', '_')}.{dtype}.safetensors"
    size = save_chunk_cache(chunk, path, dtype=dtype)
    stored = load_chunk_cache(path)
    report = DemoReport(lm.name, lm.load_seconds, stored.num_tokens, prefill_seconds, path, size, dtype)
    for item in data["questions"]:
        q_ids = layout.question_ids(lm.tokenizer, item["question"])
        start = time.perf_counter()
        context = assemble(lm, [stored], layout.prefix_ids)  # counted in the cached TTFT
        assemble_seconds = time.perf_counter() - start
        cached = greedy_generate(lm, q_ids, context, max_new_tokens)
        prompt = list(layout.prefix_ids) + stored.token_ids.tolist() + q_ids
        direct = greedy_generate(lm, prompt, None, max_new_tokens)
        report.answers.append(DemoAnswer(item["question"], item["answers"], cached.text, direct.text,
                                         (assemble_seconds + cached.ttft_seconds) * 1e3,
                                         direct.ttft_seconds * 1e3))
    return report
