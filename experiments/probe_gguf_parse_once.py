"""Converting a GGUF file with its metadata parsed once against three times: one run, side by side.

transformers opens a GGUF file three times in one conversion (tokenizer, config, weights), each time
parsing all of its metadata in Python. `cag.models.convert.convert_gguf` now hands the second and
third openings the first one's reader (`parsed_once`). This probe converts each model both ways,
alternating, into scratch folders, and checks that the two give the same files byte for byte
(weights digest, tokenizer files, config). Prints seconds; writes runs/probes/gguf_parse_once.json (or --out).

Usage: python experiments/probe_gguf_parse_once.py [--models smollm2-135m,qwen2.5-coder-0.5b] [--repeats 2]
"""

import argparse
import contextlib
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path

import cag.models.convert as convert
from cag.models.packaged import gguf_path

ROOT = Path(__file__).resolve().parents[1]
PARSED_ONCE = convert.parsed_once


def folder_digests(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
            if p.is_file() and p.name != convert.MANIFEST}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="result file (default runs/probes/)")
    args = parser.parse_args()
    rows = []
    for model in args.models.split(","):
        gguf = gguf_path(model)
        times = {"parsed_once": [], "parsed_three_times": []}
        digests = {}
        for round_ in range(args.repeats):
            ways = ["parsed_once", "parsed_three_times"][:: 1 if round_ % 2 == 0 else -1]
            for way in ways:
                convert.parsed_once = PARSED_ONCE if way == "parsed_once" else contextlib.nullcontext
                with tempfile.TemporaryDirectory() as scratch:
                    t0 = time.perf_counter()
                    folder = convert.convert_gguf(gguf, Path(scratch) / "model")
                    times[way].append(round(time.perf_counter() - t0, 1))
                    digests.setdefault(way, folder_digests(folder))
                    assert digests[way] == folder_digests(folder)
                print(f"{model}: {way} {times[way][-1]} s", flush=True)
        convert.parsed_once = PARSED_ONCE
        same = digests["parsed_once"] == digests["parsed_three_times"]
        medians = {way: statistics.median(t) for way, t in times.items()}
        rows.append({"model": model, "seconds": times, "identical_files": same,
                     "three_times_over_once": round(medians["parsed_three_times"] / medians["parsed_once"], 2)})
        print(f"{model}: identical files {same}, ratio {rows[-1]['three_times_over_once']}", flush=True)
        if not same:
            raise SystemExit(f"{model}: the two ways differ")
    path = args.out or ROOT / "runs" / "probes" / "gguf_parse_once.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"repeats": args.repeats, "rows": rows}, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
