"""The llama-index baseline of a shared-corpus evaluation: what a llama-index user gets from the same
chunks, the same embedder and the same generator. llama-index's own vector index (its in-memory
vector store, its own embedding calls and similarity search), its own retriever and query engine
with their default prompt, and the generator behind llama-index's LLM interface (prompted through its
chat template, as a user of an instruct model sets `completion_to_prompt`). Its answers are recorded
as mode `llamaindex` beside `direct`, which reads the same retrieved text through cag's path.
"""

import time

from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.schema import TextNode
from pydantic import PrivateAttr

from cag.kv.generate import greedy_generate
from eval.corpus import LLAMAINDEX, retrieval_record
from eval.metrics import squad_scores

MODE = LLAMAINDEX  # how its predictions are named (not one of cag's context modes)


class _Embedding(BaseEmbedding):
    """cag's sentence-transformers embedder behind llama-index's embedding interface."""

    _embedder: object = PrivateAttr()

    def __init__(self, embedder, **kwargs):
        super().__init__(model_name=embedder.name, **kwargs)
        self._embedder = embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.encode([query])[0].tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.encode([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.encode(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


class _Generator(CustomLLM):
    """The generator, greedy, behind llama-index's LLM interface."""

    max_new_tokens: int = 32
    _lm: object = PrivateAttr()

    def __init__(self, lm, max_new_tokens: int):
        super().__init__(max_new_tokens=max_new_tokens)
        self._lm = lm

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=self._lm.geometry.max_positions, num_output=self.max_new_tokens,
                           model_name=self._lm.name)

    def _ids(self, prompt: str) -> list:
        tokenizer = self._lm.tokenizer
        if tokenizer.chat_template:
            return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=True,
                                                 add_generation_prompt=True, return_dict=True)["input_ids"]
        return tokenizer(prompt)["input_ids"]

    def complete(self, prompt: str, formatted: bool = False, **kwargs) -> CompletionResponse:
        generation = greedy_generate(self._lm, self._ids(prompt), None, self.max_new_tokens)
        return CompletionResponse(text=generation.text, raw={"prompt_tokens": len(self._ids(prompt))})

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs) -> CompletionResponseGen:
        raise NotImplementedError("the baseline answers whole")


class LlamaIndexBaseline:
    """A llama-index query engine over every chunk of `store`, answering with `lm`."""

    def __init__(self, store, lm, embedder, top_k: int, max_new_tokens: int):
        rows = store.catalog.all_chunks()
        self.rows, self.tokenizer = {str(r.id): r for r in rows}, lm.tokenizer
        nodes = [TextNode(text=r.text, id_=str(r.id)) for r in rows]
        index = VectorStoreIndex(nodes, embed_model=_Embedding(embedder))
        self.engine = index.as_query_engine(llm=_Generator(lm, max_new_tokens), similarity_top_k=top_k)

    def _tokens(self, rows: list) -> int:
        """The retrieved chunks' length in generator tokens (as `direct` counts its context)."""
        return sum(len(self.tokenizer(r.text, add_special_tokens=False)["input_ids"]) for r in rows)

    def answer(self, example: dict, gold: list) -> dict:
        """A predictions.jsonl record of `example` (extractive or multi_doc), with its retrieval."""
        start = time.perf_counter()
        response = self.engine.query(example["question"])
        seconds = time.perf_counter() - start
        prediction = str(response.response).split("\n")[0].strip()
        scores = squad_scores(prediction, example["answers"])
        read = [self.rows[n.node.node_id] for n in response.source_nodes]
        return {"id": example["id"], "mode": MODE, "prediction": prediction, "score": scores["f1"],
                "em": scores["em"], "gold": example["answers"], "context_tokens": self._tokens(read),
                "chunks": len(read), "timings_ms": {"ttft": round(seconds * 1e3, 1), "total": round(seconds * 1e3, 1)},
                **retrieval_record(read, gold)}
