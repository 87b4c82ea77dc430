"""Fork a `cag eval` run folder to evaluate another translator (or injection window) on the same
examples without recomputing the modes that do not change.

Copies the run's passages, store and config and keeps the predictions of `--keep` modes (the fork's
first eval points the store's catalog at the fork's own passages file). Then run `cag eval` with the same
dataset options, `--out DST` and the modes to add (e.g. with another $CAG_HOME whose translators/
holds the other translator).

SRC may also be a recorded run in records/eval/ (config and compressed predictions, no store): the
fork's first eval then writes the passages and ingests its store again, for the modes it runs.

`--limit N` forks the first N examples of the run's sample (the examples `cag eval --limit N` with the
same seed draws): a cheaper experiment on a subset that still reuses the kept predictions. A larger N
than the run's extends it: eval's sample with a seed is prefix-stable (its first examples are the
run's), so `cag eval --limit N` then answers only the examples the run did not hold.

`--encoder NAME` forks for another encoder: only modes that do not read the encoder's caches may be
kept (direct, native, none; only none where a multi-document budget counts encoder tokens), and the
store is not copied (its encoder caches are the old encoder's).

Usage: python experiments/fork_eval_run.py SRC DST [--keep direct,native,none] [--limit N] [--encoder NAME]
"""

import argparse
import json
import shutil
from pathlib import Path

from eval.jsonl import read_text


def subset_ids(config: dict, limit: int) -> set:
    """Ids of the first `limit` examples of the run's sample (eval's own sampling)."""
    from eval.datasets import load_examples, sample
    examples = load_examples(Path(config["dataset_path"]), config["task"])
    return {ex["id"] for ex in sample(examples, config["task"], limit, config["seed"])}


ENCODER_FREE = {"direct", "native", "none"}  # modes whose answers do not depend on the encoder


def fork(src: Path, dst: Path, keep: list[str], limit: int | None = None, encoder: str | None = None) -> None:
    if dst.exists():
        raise SystemExit(f"{dst} exists; remove it first.")
    config = json.loads((src / "config.json").read_text())
    new_encoder = encoder is not None and encoder != config["encoder"]
    # a multi-document budget counts encoder tokens: another encoder may put other paragraphs in the
    # context, so only the question-alone mode is free of it there
    free = {"none"} if config.get("context_budget") else ENCODER_FREE
    if new_encoder and not set(keep) <= free:
        raise SystemExit(f"--encoder: only {', '.join(sorted(free))} can be kept, not "
                         f"{', '.join(sorted(set(keep) - free))}")
    if limit is not None and config.get("limit") is None:
        raise SystemExit(f"{src} holds every example of its dataset; --limit cannot extend it.")
    ids = subset_ids(config, limit) if limit is not None and limit < config["limit"] else None
    dst.mkdir(parents=True)
    if (src / "store").is_dir() and not new_encoder:
        shutil.copytree(src / "contexts", dst / "contexts")
        shutil.copytree(src / "store", dst / "store", ignore=shutil.ignore_patterns("write.lock"))
    config.update(modes=keep, out=str(dst), window=None)
    if new_encoder:
        config["encoder"] = encoder
    if limit is not None:
        config["limit"] = limit
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    lines = [line for line in read_text(src / "predictions.jsonl").splitlines() if line.strip()]  # or a record's .gz
    kept = [line for line in lines if json.loads(line)["mode"] in keep
            and (ids is None or json.loads(line)["id"] in ids)]
    (dst / "predictions.jsonl").write_text("".join(line + "\n" for line in kept))
    print(f"forked {src} -> {dst}: {len(kept)} predictions of {', '.join(keep)} kept")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--keep", default="direct,native,none", help="modes whose predictions are kept")
    parser.add_argument("--limit", type=int, help="fork only the first N examples of the run's sample")
    parser.add_argument("--encoder", help="fork for another encoder (keeps only encoder-free modes)")
    args = parser.parse_args()
    fork(args.src, args.dst, args.keep.split(","), args.limit, args.encoder)


if __name__ == "__main__":
    main()
