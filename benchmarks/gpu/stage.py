"""Collect one chunk of pack.py's payload on the GPU machine and join the items now complete.

An item is joined once all its pieces have arrived, and its sha256 is checked before it appears
under its name. Standard library only.

Usage: python3 benchmarks/gpu/stage.py CHUNK_FOLDER [--into /tmp/cag-carry]
Items land in INTO/files/; run.sh reads them from there.
"""

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path


def join(item: dict, pieces: Path, files: Path) -> None:
    target, partial = files / item["name"], files / (item["name"] + ".partial")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for piece in item["pieces"]:
            with (pieces / piece["name"]).open("rb") as f:
                while block := f.read(1 << 24):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != item["sha256"] or partial.stat().st_size != item["size"]:
        partial.unlink()
        sys.exit(f"stage: {item['name']} does not match its sha256: pack it again")
    partial.rename(target)
    for piece in item["pieces"]:
        (pieces / piece["name"]).unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chunk", type=Path)
    parser.add_argument("--into", type=Path, default=Path("/tmp/cag-carry"))
    args = parser.parse_args()
    pieces, files = args.into / "pieces", args.into / "files"
    pieces.mkdir(parents=True, exist_ok=True)
    files.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((args.chunk / "manifest.json").read_text())
    for path in args.chunk.iterdir():
        if path.name != "manifest.json":
            shutil.copyfile(path, pieces / path.name)
    ready = []
    for item in manifest["items"]:
        if not (files / item["name"]).is_file() and all((pieces / p["name"]).is_file() for p in item["pieces"]):
            join(item, pieces, files)
            print(f"stage {args.chunk.name}: {item['name']} joined, sha256 ok")
        if (files / item["name"]).is_file():
            ready.append(item["name"])
    print(f"stage {args.chunk.name}: {len(ready)}/{len(manifest['items'])} items ready in {files}")


if __name__ == "__main__":
    main()
