"""The code's shape: package imports form a tree, parallel code stays in one package, small modules.

The import graph is read from the source (every ``import``, also those inside functions), so
a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "landcover"
LARGEST = 400
ENGINE_TEST = re.compile(
    r"""engine\s*(?:==|!=)|(?:==|!=)\s*["'](?:torch|horovod)["']|["'](?:torch|horovod)["']\s*(?:==|!=)"""
)


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that a module imports (``from landcover import x`` counts x)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _group(module: str) -> str:
    """The package (or top-level module) a module belongs to: ``training``, ``config``..."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _graph(of: callable) -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        for target in _imports(name, path, modules):
            a, b = of(name), of(target)
            if a != b:
                graph.setdefault(a, set()).add(b)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle in a directed graph, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_import_of_the_package_names_a_module_that_exists() -> None:
    # lazy imports inside functions are not run by an import of the module: read them
    modules = _modules()
    missing = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if node.module.startswith("landcover") and node.module not in modules:
                    missing.append(f"{name}: from {node.module} import ...")
                for alias in node.names if node.module in modules else ():
                    full = f"{node.module}.{alias.name}"
                    if (PACKAGE / alias.name).is_dir() and full not in modules:
                        missing.append(f"{name}: {full}")
            elif isinstance(node, ast.Import):
                missing += [
                    f"{name}: import {a.name}"
                    for a in node.names
                    if a.name.startswith("landcover") and a.name not in modules
                ]
    assert missing == []


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}}) is None


def test_packages_import_each_other_as_a_tree() -> None:
    graph = _graph(_group)
    assert _cycle(graph) is None, f"package import cycle: {' -> '.join(_cycle(graph))}"
    # the layering the README shows: parallel and checkpoint below training and inference
    assert "training" not in graph["inference"]
    assert not graph["parallel"] & {"training", "inference", "storage", "data", "cluster"}


def test_modules_import_each_other_without_cycles() -> None:
    graph = _graph(lambda module: module)
    assert _cycle(graph) is None, f"module import cycle: {' -> '.join(_cycle(graph))}"


def test_training_and_parallel_modules_stay_small() -> None:
    sizes = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text().splitlines())
        for folder in ("training", "parallel")
        for path in (PACKAGE / folder).glob("*.py")
    }
    assert len(sizes) > 10
    assert {name: n for name, n in sizes.items() if n >= LARGEST} == {}


def test_only_the_parallel_package_asks_which_engine_runs() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "parallel" in path.relative_to(PACKAGE).parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if ENGINE_TEST.search(line) and "DEFAULT_ENGINE" not in line:
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert offenders == []
    # the pattern does find such tests
    assert ENGINE_TEST.search('if config.run.engine == "horovod":')
    assert ENGINE_TEST.search('"pytorch" if engine == "torch" else "mpi"')
