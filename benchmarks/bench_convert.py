"""First use of packaged models: converting their GGUF files one after the other, then both at once.

On a fresh machine (or a lent GPU machine) the first `cag ingest` spends most of its time converting
the encoder's and the generator's GGUF files into model folders, mostly parsing GGUF metadata in
Python on one core. Each model converts in its own process into a fresh cag home, first in turn,
then both at once (as benchmarks/gpu/run.py does), alternating the order over --repeats rounds;
the converted weights must be byte-identical between the two ways (same weights digest). Prints
seconds and the ratio, writes runs/benchmarks/convert-ENCODER-GENERATOR.json (or --out).

Usage (a timing: serialized with other heavy jobs):
    flock /work/heavy.lock python benchmarks/bench_convert.py [--repeats 2]
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONVERT = "import sys; from cag.models.loading import model_identity; print(model_identity(sys.argv[1]).fingerprint)"


def start(model: str, home: Path) -> subprocess.Popen:
    # the GGUF files are found in (and the split ones joined into) the user's cag home: link them
    env = {**os.environ, "CAG_HOME": str(home), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", CONVERT, model], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def fresh_home(root: Path, source_home: Path) -> Path:
    home = Path(tempfile.mkdtemp(dir=root))
    if (source_home / "gguf").is_dir():
        (home / "gguf").mkdir()
        for gguf in (source_home / "gguf").iterdir():
            (home / "gguf" / gguf.name).symlink_to(gguf)
    return home


def finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"a conversion exited with {proc.returncode}")
    return out.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="smollm2-135m")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None,
                        help="result file (default runs/benchmarks/convert-ENCODER-GENERATOR.json)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from cag.home import cag_home

    models = [args.encoder, args.generator]
    runs = {"in_turn": [], "at_once": []}
    fingerprints = set()
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.repeats):
            order = ["in_turn", "at_once"] if round_ % 2 == 0 else ["at_once", "in_turn"]
            for way in order:
                home = fresh_home(Path(scratch), cag_home())
                t0 = time.perf_counter()
                if way == "in_turn":
                    prints = [finish(start(m, home)) for m in models]
                else:
                    prints = [finish(p) for p in [start(m, home) for m in models]]
                runs[way].append(round(time.perf_counter() - t0, 1))
                fingerprints.add(tuple(prints))
                shutil.rmtree(home)
                print(f"round {round_ + 1}: {way} {runs[way][-1]} s", flush=True)
    if len(fingerprints) != 1:
        raise SystemExit(f"the conversions differ: {fingerprints}")
    ratio = statistics.median(runs["in_turn"]) / statistics.median(runs["at_once"])
    record = {"models": models, "seconds": runs, "in_turn_over_at_once": round(ratio, 2),
              "same_fingerprints": True, "cpus": os.cpu_count(), "python": platform.python_version()}
    print(json.dumps(record, indent=1))
    path = args.out or ROOT / "runs" / "benchmarks" / f"convert-{args.encoder}-{args.generator}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
