"""The llama-index retriever and query engine over a cag store."""

import runpy
import sys

from llama_index.core.schema import NodeWithScore

from cag.ingest.pipeline import IngestOptions, ingest
from cag.llamaindex import CagQueryEngine, CagRetriever


def test_retriever_and_query_engine(tiny_models, corpus, tmp_path):
    store = tmp_path / "store"
    ingest([corpus], store, IngestOptions(encoder=tiny_models["encoder"], chunk_tokens=32,
                                          also_for=(tiny_models["generator"],)))
    nodes = CagRetriever(store, top_k=2).retrieve("How long can the European lobster grow?")
    assert len(nodes) == 2 and all(isinstance(n, NodeWithScore) for n in nodes)
    assert nodes[0].score >= nodes[1].score and "lobster" in nodes[0].node.metadata["doc"]
    engine = CagQueryEngine(store, model=tiny_models["generator"], top_k=2, max_new_tokens=4)
    response = engine.query("How long can the European lobster grow?")
    assert response.metadata["mode"] == "native" and isinstance(response.response, str)
    assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in nodes]


def test_documented_example_runs(tiny_models, corpus, tmp_path, monkeypatch, capsys):
    store = tmp_path / "store"
    ingest([corpus], store, IngestOptions(encoder=tiny_models["encoder"], chunk_tokens=32))
    monkeypatch.setattr(sys, "argv", ["example", "--store", str(store), "--model", tiny_models["generator"]])
    runpy.run_path("examples/llamaindex_example.py", run_name="__main__")
    out = capsys.readouterr().out
    assert "lobster.md" in out and "answer:" in out and "mode: direct" in out
