"""Fork a `cag eval` run folder to evaluate another translator (or injection window) on the same
examples without recomputing the modes that do not change.

Copies the run's passages, store and config, keeps the predictions of `--keep` modes, and repoints
the store's documents at the fork's own passages file (the catalog records absolute paths; without
this the fork's first eval would ingest every passage again). Then run `cag eval` with the same
dataset options, `--out DST` and the modes to add (e.g. with another $CAG_HOME whose translators/
holds the other translator).

Usage: python benchmarks/fork_eval_run.py SRC DST [--keep direct,native,none]
"""

import argparse
import json
import shutil
import sqlite3
from pathlib import Path


def fork(src: Path, dst: Path, keep: list[str]) -> None:
    if dst.exists():
        raise SystemExit(f"{dst} exists; remove it first.")
    dst.mkdir(parents=True)
    shutil.copytree(src / "contexts", dst / "contexts")
    shutil.copytree(src / "store", dst / "store", ignore=shutil.ignore_patterns("write.lock"))
    config = json.loads((src / "config.json").read_text())
    config.update(modes=keep, out=str(dst), window=None)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    kept = [line for line in (src / "predictions.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line)["mode"] in keep]
    (dst / "predictions.jsonl").write_text("".join(line + "\n" for line in kept))
    old, new = str((src / "contexts").resolve()), str((dst / "contexts").resolve())
    with sqlite3.connect(dst / "store" / "catalog.sqlite") as conn:
        conn.execute("UPDATE documents SET path = ? || substr(path, ?) WHERE path LIKE ? || '%'",
                     (new, len(old) + 1, old))
    print(f"forked {src} -> {dst}: {len(kept)} predictions of {', '.join(keep)} kept")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--keep", default="direct,native,none", help="modes whose predictions are kept")
    args = parser.parse_args()
    fork(args.src, args.dst, args.keep.split(","))


if __name__ == "__main__":
    main()
