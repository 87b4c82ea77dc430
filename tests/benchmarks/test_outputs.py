"""Benchmarks, probes and scripts write where the user says (--out, by default under runs/), never
into records/ unless given a path there: only the scripts that keep a record on purpose name it."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# they keep a record on purpose: an eval run, the extra translators, training runs, a translator's QA
KEEPERS = {"scripts/keep_record.py", "scripts/translators_extra.py", "experiments/collect_training.py",
           "scripts/record_translator_qa.py"}


def _names_records(node: ast.AST) -> bool:
    """A string that builds a path into records/: `X / "records"`, `"records/..."`, f"records/..."."""
    if isinstance(node, ast.JoinedStr) and node.values:
        node = node.values[0]
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and \
        (node.value == "records" or node.value.startswith("records/"))


def paths_into_records(source: str) -> list[int]:
    """Lines where code (not a docstring or a help text) builds a path into records/."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        operands = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            operands = [node.left, node.right]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Path":
            operands = node.args
        elif isinstance(node, ast.BoolOp):  # `args.out or "records/..."`
            operands = node.values
        lines += [node.lineno for o in operands if _names_records(o)]
    return sorted(lines)


def test_the_check_finds_paths_into_records():
    found = paths_into_records('out = ROOT / "records" / "a.json"\nb = Path(f"records/{x}.json")\n'
                               'c = args.out or "records/c.json"\nd = "records/ in a message"\n')
    assert found == [1, 2, 3]


def test_no_benchmark_probe_or_script_writes_into_records_by_default():
    files = [p for folder in ("benchmarks", "experiments", "scripts") for p in (ROOT / folder).rglob("*.py")]
    offenders = [f"{p.relative_to(ROOT)}:{line}" for p in sorted(files) if str(p.relative_to(ROOT)) not in KEEPERS
                 for line in paths_into_records(p.read_text(encoding="utf-8"))]
    assert not offenders, "default outputs into records/ (use runs/, --out):\n" + "\n".join(offenders)
