"""Every name a lab script or benchmark takes from the product still exists there (the product
changes under the lab; a renamed or removed name shows here, not in the middle of a long run)."""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("cag", "mot", "eval", "cli", "indexes")
SCRIPTS = sorted(p for folder in ("experiments", "benchmarks") for p in (ROOT / folder).rglob("*.py")
                 if "tests" not in p.parts)


def product_imports(path: Path) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] in PRODUCT:
            found += [(node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_names_a_script_imports_from_the_product_exist(path):
    missing = []
    for module, name in product_imports(path):
        loaded = importlib.import_module(module)
        if not hasattr(loaded, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{module}.{name}")
    assert not missing, missing
