"""The import graph of cag's packages, read from the source (function-local imports included):
layers without back-arrows, no import cycles, and answering code that never reaches training code."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("indexes", "cag", "mot", "eval", "cli")
# what each top-level package may import, lowest layer first
ALLOWED = {"indexes": set(), "cag": {"indexes"}, "mot": {"cag", "indexes"},
           "eval": {"cag", "mot", "indexes"}, "cli": {"cag", "mot", "eval", "indexes"}}
# the answering path: `cag ask` and every context mode
ANSWERING = ("cag.ask", "cag.modes", "mot.modes")
TRAINING = "mot.training"  # the package of training code (cag train)


def is_training(module: str) -> bool:
    return module == TRAINING or module.startswith(TRAINING + ".")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (an `import a.b.c` counts a.b.c and its packages)."""
    files = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph = {}
    for name, path in files.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                found |= {m for m in files if target == m or target.startswith(m + ".")} - {name}
        graph[name] = {m for m in found if not name.startswith(m + ".")}  # a module's own package: not an edge
    return graph


def reachable(graph: dict, start: str) -> set[str]:
    seen, todo = set(), [m for m in graph if m == start or m.startswith(start + ".")]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def cycle(graph: dict) -> list | None:
    """One import cycle of `graph`, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_packages_import_only_the_layers_below_them():
    bad = [f"{module} imports {target}" for module, targets in import_graph().items() for target in targets
           if target.split(".")[0] != module.split(".")[0]
           and target.split(".")[0] not in ALLOWED[module.split(".")[0]]]
    assert not bad, "\n".join(bad)


def test_no_import_cycles_between_packages_or_modules():
    graph = import_graph()
    packages = {p: {t.split(".")[0] for m, ts in graph.items() if m.split(".")[0] == p for t in ts} - {p}
                for p in PACKAGES}
    assert cycle(packages) is None, cycle(packages)
    assert cycle(graph) is None, " -> ".join(cycle(graph))


def test_answering_never_imports_training_code():
    graph = import_graph()
    for start in ANSWERING:
        reached = reachable(graph, start)
        training = sorted(m for m in reached if is_training(m))
        assert not training, f"{start} reaches {training}"
        assert not any(m.split(".")[0] in ("eval", "cli") for m in reached), start


def test_using_a_translator_never_imports_training_one():
    """mot/ holds what using a translator needs; mot/training/ what training one needs, on top."""
    graph = import_graph()
    users = [m for m in graph if m.split(".")[0] == "mot" and not is_training(m)]
    assert "mot.translator" in users and "mot.modes" in users
    bad = [f"{m} imports {t}" for m in users for t in graph[m] if is_training(t)]
    assert not bad, "\n".join(bad)


def test_the_checks_see_a_back_arrow_and_a_cycle():
    """The graph reader itself: a cycle and a layering violation are found when present."""
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
    graph = import_graph()
    assert "indexes.faiss_index" in graph["cag.store.store"]  # edges are read at all
    assert "mot.contexts" in reachable(graph, "mot.modes")


def test_the_lab_and_the_benchmarks_import_no_private_name_of_the_product():
    """experiments/ and benchmarks/ use the product through its public names only."""
    private = []
    for folder in ("experiments", "benchmarks", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                        and node.module.split(".")[0] in PACKAGES):
                    private += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                                if a.name.startswith("_")]
    assert not private, "\n".join(private)


def test_no_string_comparison_on_modes_roles_or_kinds():
    """Modes, store roles and translator kinds are compared as objects (cag.modes' classes,
    cag.store.spaces.Role, cag.translations.TranslatorKind), never as string literals."""
    from cag.modes import mode_names
    from cag.store.spaces import Role
    from cag.translations import TranslatorKind

    words = set(mode_names()) | {r.value for r in Role} | {k.value for k in TranslatorKind}

    def literals(node) -> set:
        found = set()
        for part in ast.walk(node):
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                found.add(part.value)
        return found

    bad = []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Compare) and literals(node) & words:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(literals(node) & words)}")
    assert not bad, "\n".join(bad)
