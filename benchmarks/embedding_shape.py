"""How real chunk embeddings are shaped, against the synthetic ones the FAISS benchmark indexes.

Embeds real chunks with the packaged all-MiniLM-L6-v2 (distinct SQuAD dev passages, then WikiText-2
paragraphs cut to 1,200 characters) and draws the same number of synthetic embeddings
(`synthetic_embeddings.py`), and writes both sets' statistics (`ShapeStats`: mean direction,
random-pair cosines, nearest-neighbour cosines, spectrum) side by side. Usage:
    python benchmarks/embedding_shape.py [--squad 2000] [--wiki 1300] [--out runs/benchmarks/embedding_shape.json]
"""

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's packages, whatever is installed

from indexes.embedder import Embedder  # noqa: E402
from synthetic_embeddings import EmbeddingShape, shape_stats, synthetic_embeddings  # noqa: E402

EMBEDDER = "all-MiniLM-L6-v2"


def real_texts(n_squad: int, n_wiki: int) -> list[str]:
    texts, seen = [], set()
    with open(ROOT / "data" / "squad_v1.1" / "dev.jsonl") as lines:
        for line in lines:
            context = json.loads(line)["context"]
            if context not in seen and len(texts) < n_squad:
                seen.add(context)
                texts.append(context)
    wiki = 0
    with open(ROOT / "data" / "corpus" / "wikitext2" / "train_raw_part.jsonl") as lines:
        for line in lines:
            text = json.loads(line)["text"]
            if len(text) > 200 and wiki < n_wiki:
                texts.append(text[:1200])
                wiki += 1
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad", type=int, default=2000, help="distinct SQuAD dev passages")
    parser.add_argument("--wiki", type=int, default=1300, help="WikiText-2 paragraphs (over 200 characters)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "benchmarks" / "embedding_shape.json")
    args = parser.parse_args()
    texts = real_texts(args.squad, args.wiki)
    start = time.perf_counter()
    real = Embedder(EMBEDDER).encode(texts, batch_size=64)
    print(f"embedded {len(texts)} real chunks in {time.perf_counter() - start:.0f} s", flush=True)
    synthetic = synthetic_embeddings(len(real), real.shape[1])
    rows = {"real": asdict(shape_stats(real)), "synthetic": asdict(shape_stats(synthetic))}
    record = {"embedder": EMBEDDER, "real_texts": {"squad_passages": min(args.squad, len(texts)),
                                                   "wikitext2_paragraphs": len(texts) - min(args.squad, len(texts))},
              "synthetic_shape": asdict(EmbeddingShape()), "date": time.strftime("%Y-%m-%d"), "stats": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(f"{'statistic':24} {'real':>8} {'synthetic':>10}")
    for key in rows["real"]:
        print(f"{key:24} {rows['real'][key]:>8.3f} {rows['synthetic'][key]:>10.3f}")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
