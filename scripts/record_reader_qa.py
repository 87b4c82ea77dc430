"""Record a finished eval run's reader-mode retentions in a reader adapter's JSON (`spec.metrics.qa`
from native+reader or translated+reader, `spec.metrics.qa_blend` from translated-blend+reader, each
with its base mode's retention on the same questions): what `ask --mode auto` reads. Weights and
fingerprint stay unchanged.

Usage: python scripts/record_reader_qa.py RUN --reader readers/NAME.safetensors
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cag.readers import NATIVE, read_record, record_qa  # noqa: E402
from eval.reader_qa import reader_qa_results  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished eval run folder, e.g. under records/eval/")
    parser.add_argument("--reader", type=Path, required=True, help="the reader adapter to record into")
    args = parser.parse_args()
    spec = read_record(args.reader)["spec"]
    reads = "native" if spec["reads"] == NATIVE else "encoder"
    name = str(args.run.resolve().relative_to(ROOT)) if args.run.resolve().is_relative_to(ROOT) else str(args.run)
    results = reader_qa_results(args.run, reads, name, spec.get("kind", "lora"))
    if not results:
        sys.exit(f"{args.run} holds no reader mode reading {reads} caches beside its base mode.")
    for key, result in results.items():
        record_qa(args.reader, result, key)
        print(f"{args.reader.name} {key}: {result['mode']} retention {result['retention']} "
              f"{result['retention_ci95']} (base {result['base_mode']} {result['base_retention']})")


if __name__ == "__main__":
    main()
