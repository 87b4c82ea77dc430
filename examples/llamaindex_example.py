"""Use a cag store from llama-index: a retriever and a query engine.

    cag ingest samples/corpus --also-for qwen2.5-coder-0.5b     # once
    python examples/llamaindex_example.py [--store DIR] [--model MODEL]
"""

import argparse

from cag.llamaindex import CagQueryEngine, CagRetriever


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="store folder (default: the cag home's)")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--question", default="How long can the European lobster grow?")
    args = parser.parse_args()

    for hit in CagRetriever(args.store, top_k=3).retrieve(args.question):
        print(f"{hit.score:.3f}  {hit.node.metadata['doc']}  chunk {hit.node.metadata['chunk']}")

    engine = CagQueryEngine(args.store, model=args.model, mode="auto", max_new_tokens=32)
    response = engine.query(args.question)
    print("answer:", response.response)
    print("mode:", response.metadata["mode"], "| TTFT ms:", response.metadata["timings_ms"]["ttft"])


if __name__ == "__main__":
    main()
