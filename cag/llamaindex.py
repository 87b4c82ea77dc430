"""llama-index adapters over a cag store: a retriever and a query engine.

    from cag.llamaindex import CagRetriever, CagQueryEngine
    nodes = CagRetriever(store_dir, top_k=3).retrieve("How long can lobsters grow?")
    engine = CagQueryEngine(store_dir, model="qwen2.5-coder-0.5b", mode="auto")
    response = engine.query("How long can lobsters grow?")   # response.response, .source_nodes

The query engine answers through cag's own path (stored caches, no re-reading of the text); both
return llama-index types, so they plug into llama-index pipelines.
"""

from pathlib import Path

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import Response
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from cag.ask import AskOptions, ask
from cag.defaults import DEFAULT_TOP_K
from cag.models import load_model
from cag.retrieval import Retriever
from cag.store import Store


def _node(chunk, score: float) -> NodeWithScore:
    node = TextNode(text=chunk.text, id_=f"{chunk.doc}::{chunk.idx}",
                    metadata={"doc": chunk.doc, "chunk": chunk.idx, "char_start": chunk.char_start,
                              "char_end": chunk.char_end})
    return NodeWithScore(node=node, score=score)


class CagRetriever(BaseRetriever):
    """Top-k chunks of a cag store for a query, as llama-index nodes (best first)."""

    def __init__(self, store_dir: Path | None = None, top_k: int = DEFAULT_TOP_K, **kwargs):
        super().__init__(**kwargs)
        self.cag_retriever = Retriever(Store.open(store_dir))
        self.top_k = top_k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        retrieval = self.cag_retriever.retrieve(query_bundle.query_str, self.top_k)
        return [_node(r.chunk, r.score) for r in retrieval.results]


class CagQueryEngine(BaseQueryEngine):
    """Answers with a generator from the store's chunk caches (cag's ask path)."""

    def __init__(self, store_dir: Path | None = None, callback_manager=None, **settings):
        """`settings`: cag.ask.AskOptions fields (model, mode, top_k, max_new_tokens, ...)."""
        super().__init__(callback_manager)
        self.options = AskOptions(**settings)
        self.retriever = Retriever(Store.open(store_dir))
        self.lm = load_model(self.options.model, self.options.dtype, self.options.device)

    def _query(self, query_bundle: QueryBundle) -> Response:
        question = query_bundle.query_str
        result = ask(question, options=self.options, lm=self.lm, retriever=self.retriever)
        nodes = [_node(r.chunk, r.score) for r in result.retrieved]
        return Response(response=result.answer, source_nodes=nodes,
                        metadata={"mode": result.mode, "model": result.model, "notes": result.notes,
                                  "context_tokens": result.context_tokens, "timings_ms": result.timings_ms})

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        return self._query(query_bundle)

    def _get_prompt_modules(self) -> dict:
        return {}
