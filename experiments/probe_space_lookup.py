"""What finding a store's cache spaces costs an ask as the store grows: one run, side by side.

Every ask looks up its cache spaces (the generator's own, the encoder's, stored translations). Until
2026-12-07 `Store.spaces()` walked every cache file under `STORE/caches/` to find the spaces'
model.json; now it reads only the space folders. This probe lays out a synthetic `caches/` folder
(two spaces, N empty cache files spread over the 256 shards, as `cag ingest` names them) for each
size and times both lookups, alternating, medians of --repeats.

Usage: python experiments/probe_space_lookup.py [--sizes 1000,10000,100000] [--repeats 5]
Writes runs/probes/space_lookup.json (or --out).
"""

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path

from cag.store.spaces import space_descriptions, walk_caches

ROOT = Path(__file__).resolve().parents[1]


def lay_out(caches: Path, files: int) -> None:
    for space in ("00000000000000aa", "00000000000000bb"):
        (caches / space).mkdir(parents=True)
        (caches / space / "model.json").write_text("{}")
    for i in range(files):
        key = hashlib.sha256(str(i).encode()).hexdigest()
        shard = caches / ("00000000000000aa" if i % 2 else "00000000000000bb") / key[:2]
        shard.mkdir(exist_ok=True)
        (shard / f"{key}.safetensors").touch()


def walking_every_file(caches: Path) -> list:
    """The lookup as it was."""
    return [e.path for e in walk_caches(caches) if e.kind == "model"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="result file (default runs/probes/)")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as scratch:
            caches = Path(scratch) / "caches"
            lay_out(caches, size)
            times = {"space_folders": [], "every_file": []}
            for _ in range(args.repeats):
                for way, lookup in (("space_folders", lambda: list(space_descriptions(caches))),
                                    ("every_file", lambda: walking_every_file(caches))):
                    t0 = time.perf_counter()
                    found = lookup()
                    times[way].append((time.perf_counter() - t0) * 1e3)
                    assert len(found) == 2, found
            medians = {way: round(statistics.median(t), 2) for way, t in times.items()}
            rows.append({"cache_files": size, "median_ms": medians,
                         "every_file_over_space_folders": round(medians["every_file"] / medians["space_folders"], 1)})
            print(f"{size:>8} cache files: space folders {medians['space_folders']} ms, every file "
                  f"{medians['every_file']} ms", flush=True)
    path = args.out or ROOT / "runs" / "probes" / "space_lookup.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"repeats": args.repeats, "rows": rows}, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
