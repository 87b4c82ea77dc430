"""Fork a `cag eval` run folder to evaluate another translator (or injection window) on the same
examples without recomputing the modes that do not change.

Copies the run's passages, store and config and keeps the predictions of `--keep` modes (the fork's
first eval points the store's catalog at the fork's own passages file). Then run `cag eval` with the same
dataset options, `--out DST` and the modes to add (e.g. with another $CAG_HOME whose translators/
holds the other translator).

SRC may also be a recorded run in benchmarks/results/eval/ (config and predictions, no store): the
fork's first eval then writes the passages and ingests its store again, for the modes it runs.

Usage: python benchmarks/fork_eval_run.py SRC DST [--keep direct,native,none]
"""

import argparse
import json
import shutil
from pathlib import Path


def fork(src: Path, dst: Path, keep: list[str]) -> None:
    if dst.exists():
        raise SystemExit(f"{dst} exists; remove it first.")
    dst.mkdir(parents=True)
    if (src / "store").is_dir():
        shutil.copytree(src / "contexts", dst / "contexts")
        shutil.copytree(src / "store", dst / "store", ignore=shutil.ignore_patterns("write.lock"))
    config = json.loads((src / "config.json").read_text())
    config.update(modes=keep, out=str(dst), window=None)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    kept = [line for line in (src / "predictions.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line)["mode"] in keep]
    (dst / "predictions.jsonl").write_text("".join(line + "\n" for line in kept))
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
