"""The working tree a GPU run sends, slim: a lent machine takes at most 64 MiB per call, the working
tree included, so the checkout travels with only what the run reads (git sparse-checkout) and the
run reads its translator, SQuAD and the training corpus as ordinary files of it.

    python benchmarks/gpu/slim.py             the bytes each part would send (changes nothing)
    python benchmarks/gpu/slim.py --apply     the working tree holds the run's files alone
    python benchmarks/gpu/slim.py --code --apply
                                              the code alone: the calls that bring one carried
                                              chunk of pack.py (60 MB) beside it
    python benchmarks/gpu/slim.py --restore   the whole working tree back

The run's files: the product and benchmarks code, the sample corpus, the top-level files
(pyproject.toml, README.md: run.sh installs cag from them), and the data it reads: the pair's MoT
translator (`--encoder`, `--generator`), data/squad_v1.1/ (the eval) and data/corpus/ (the
training). Untracked files that git does not ignore travel too and are counted.
"""

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 64 * 2 ** 20  # bytes a call may send, working tree and carried paths together
CODE = ("cag", "mot", "indexes", "eval", "cli", "benchmarks", "samples")
DATA = ("data/squad_v1.1", "data/corpus")


TOP = "top-level files"  # always in: pyproject.toml, README.md, Makefile, ...


def selection(encoder: str, generator: str, code_only: bool) -> dict[str, tuple[str, ...]]:
    """part -> its folders (ending in /) and files, relative to the repository root."""
    # the tiny models built in code (tests/tiny_models.py) serve the smoke run
    parts = {"code": tuple(f"{d}/" for d in CODE) + ("tests/__init__.py", "tests/tiny_models.py")}
    if not code_only:
        stem = f"translators/{encoder}__{generator}__mot"
        parts["translator"] = (f"{stem}.json", f"{stem}.safetensors")
        parts["data"] = tuple(f"{d}/" for d in DATA)
    return parts


def part_of(path: str, parts: dict[str, tuple[str, ...]]) -> str | None:
    """The part a tracked path belongs to, or None where the slim tree leaves it out."""
    if "/" not in path:
        return TOP
    for part, entries in parts.items():
        if any(path.startswith(e) if e.endswith("/") else path == e for e in entries):
            return part
    return None


def sparse_patterns(parts: dict[str, tuple[str, ...]]) -> list[str]:
    """The selection as non-cone sparse-checkout patterns: every top-level file, no top-level
    folder, then the selected folders and files."""
    return ["/*", "!/*/"] + [f"/{entry}" for entries in parts.values() for entry in entries]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def tracked_sizes(root: Path = ROOT) -> dict[str, int]:
    """Every tracked path with its size as committed (HEAD), whatever the working tree holds now."""
    sizes = {}
    for line in _git(root, "ls-tree", "-r", "-l", "-z", "HEAD").split("\0"):
        if line:
            meta, path = line.split("\t", 1)
            size = meta.split()[3]
            sizes[path] = int(size) if size.isdigit() else 0  # "-" for a submodule
    return sizes


def untracked_sizes(root: Path = ROOT) -> dict[str, int]:
    """Untracked files git does not ignore: they travel whatever the sparse patterns say."""
    paths = [p for p in _git(root, "ls-files", "-z", "--others", "--exclude-standard").split("\0") if p]
    return {p: (root / p).stat().st_size for p in paths if (root / p).is_file()}


def travelling(parts: dict[str, tuple[str, ...]], root: Path = ROOT) -> dict[str, int]:
    """part -> bytes it sends, and "left out" -> bytes of the tracked files the slim tree drops."""
    sent = {TOP: 0} | {part: 0 for part in parts} | {"untracked, not ignored": 0, "left out": 0}
    for path, size in tracked_sizes(root).items():
        sent[part_of(path, parts) or "left out"] += size
    sent["untracked, not ignored"] = sum(untracked_sizes(root).values())
    return sent


def apply(parts: dict[str, tuple[str, ...]], root: Path = ROOT) -> None:
    """Leave every tracked file outside the selection out of the working tree (it stays tracked:
    `git sparse-checkout disable` brings it back)."""
    _git(root, "sparse-checkout", "set", "--no-cone", *sparse_patterns(parts))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--code", action="store_true", help="the code alone (for the calls carrying a chunk)")
    parser.add_argument("--apply", action="store_true", help="make the working tree this slim (sparse-checkout)")
    parser.add_argument("--restore", action="store_true", help="the whole working tree back")
    args = parser.parse_args(argv)
    if args.restore:
        _git(ROOT, "sparse-checkout", "disable")
        print("the whole working tree is back")
        return
    parts = selection(args.encoder, args.generator, args.code)
    missing = [e for e in parts.get("translator", ()) if e not in tracked_sizes()]
    if missing:
        raise SystemExit(f"no shipped MoT translator {args.encoder} -> {args.generator}: {', '.join(missing)}")
    sent = travelling(parts)
    total = sum(v for k, v in sent.items() if k != "left out")
    for part, size in sent.items():
        print(f"{part:24} {size / 1e6:8.1f} MB")
    print(f"{'would travel':24} {total / 1e6:8.1f} MB ({total / 2 ** 20:.1f} MiB of the {LIMIT / 2 ** 20:.0f} MiB "
          f"a call takes; {(LIMIT - total) / 1e6:.1f} MB left for carried paths)")
    if total > LIMIT:
        sys.exit("slim: over the limit of one call")
    if args.apply:
        apply(parts)
        print("the working tree now holds these alone (`--restore` brings the rest back)")


if __name__ == "__main__":
    main()
