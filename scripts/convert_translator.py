"""Re-save a translator checkpoint with other weight storage (e.g. int8, half of fp16's size), its
spec, training record and metrics unchanged; the new file gets its own sha256 and fingerprint.

Usage: python scripts/convert_translator.py SRC DST --dtype int8
SRC / DST: NAME, NAME.safetensors or NAME.json (written as DST.safetensors + DST.json).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cag.records import checkpoint_paths  # noqa: E402
from mot.checkpoint import load_translator, save_translator  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--dtype", default="int8", choices=("fp32", "fp16", "bf16", "int8"))
    args = parser.parse_args()
    translator = load_translator(args.src)
    out = save_translator(translator, args.dst, args.dtype)
    before, after = checkpoint_paths(args.src)[0].stat().st_size, out.stat().st_size
    print(f"{out}: {after / 2 ** 20:.1f} MiB ({args.dtype}; was {before / 2 ** 20:.1f} MiB)")


if __name__ == "__main__":
    main()
