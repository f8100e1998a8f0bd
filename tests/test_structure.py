"""The code's shape: package imports form a tree, parallel code stays in one package, small modules.

The import graph is read from the source (every ``import``, also those inside functions), so
a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "landcover"
LARGEST = 350
"""A module longer than this is a prompt to find its seam (issue 46: no module over 350 lines)."""
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
    # the layering docs/architecture.md shows: parallel and checkpoint below training and inference,
    # the region job (mapping) above tile prediction (inference), which knows nothing of it
    assert "training" not in graph["inference"]
    assert "mapping" not in graph["inference"] | graph["training"]
    assert "inference" in graph["mapping"]
    # the training feed (tiles in memory to the batch on the device) stands below the loop
    assert "feed" in graph["training"]
    assert not graph["feed"] & {"training", "inference", "mapping", "parallel"}
    assert "feed" not in graph["data"]
    # the synthetic worlds stand beside the data: they write tiles that data/ reads as any others
    assert "synthetic" not in graph["data"] | graph["feed"]
    assert not graph["synthetic"] & {
        "data",
        "feed",
        "training",
        "inference",
        "mapping",
        "parallel",
        "storage",
        "cluster",
        "commands",
        "cli",
    }
    # the viewer reads a job's files: nothing of the job's code, nor torch by way of it
    assert not graph["viewer"] & {"mapping", "inference", "training", "parallel", "feed"}
    assert not graph["parallel"] & {
        "training",
        "inference",
        "mapping",
        "storage",
        "data",
        "feed",
        "synthetic",
        "cluster",
    }


def test_modules_import_each_other_without_cycles() -> None:
    graph = _graph(lambda module: module)
    assert _cycle(graph) is None, f"module import cycle: {' -> '.join(_cycle(graph))}"


OVERSIZE = {}
"""Modules that stay above :data:`LARGEST` lines for now, and why (the list only shrinks)."""


def _sizes() -> dict[str, int]:
    return {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
    }


def test_training_and_parallel_modules_stay_small() -> None:
    sizes = {
        name: n for name, n in _sizes().items() if name.split("/")[1] in ("training", "parallel")
    }
    assert len(sizes) > 10
    assert {name: n for name, n in sizes.items() if n >= LARGEST} == {}


def test_no_module_is_over_350_lines_but_those_listed_with_a_reason() -> None:
    large = {name for name, n in _sizes().items() if n > LARGEST}
    assert large - set(OVERSIZE) == set(), "split it, or list it in OVERSIZE with a reason"
    assert set(OVERSIZE) - large == set(), "it is small now: take it off OVERSIZE"


def test_no_engine_is_found_through_sys_modules() -> None:
    found = [
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if "sys.modules" in path.read_text()
    ]
    assert found == []


PRIVATE_OF = ("torch", "segmentation_models_pytorch", "timm", "horovod")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(source: str) -> list[str]:
    """Private names a module reaches for: ``x._y`` (not of ``self``), ``getattr(x, "_y")``,
    and imports of private modules or names of torch, smp, timm or Horovod."""
    uses = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            names = [alias.name for alias in node.names]
            if parts[0] in PRIVATE_OF and any(_private(p) for p in [*parts, *names]):
                uses.append(f"from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("getattr", "hasattr"):
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and _private(str(name.value)):
                uses.append(ast.unparse(node))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id not in ("self", "cls"):
                uses.append(ast.unparse(node))
    return uses


def test_no_private_torch_or_smp_name_is_used() -> None:
    found = {
        str(path.relative_to(PACKAGE.parent)): uses
        for path in PACKAGE.rglob("*.py")
        if (uses := _private_uses(path.read_text()))
    }
    assert found == {}
    # the scan does find them
    assert _private_uses("from torch.distributed.distributed_c10d import _get_default_store")
    assert _private_uses("from segmentation_models_pytorch.encoders._utils import patch_first_conv")
    assert _private_uses("torch._foreach_lerp_(a, b, 0.1)")
    assert _private_uses('getattr(model, "_orig_mod", model)')


def _engine_names_in(source: str, names: set[str]) -> list[int]:
    """Lines where a string constant names an engine (dict keys and subscripts aside)."""
    tree = ast.parse(source)
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript):
            keys.add(id(node.slice))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in names
        and id(node) not in keys
    ]


def test_engines_are_named_only_in_the_parallel_package_and_the_registry() -> None:
    from landcover.registry import ENGINES

    names = set(ENGINES)
    found = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in PACKAGE.rglob("*.py")
        if "parallel" not in path.relative_to(PACKAGE).parts and path.name != "registry.py"
        if (lines := _engine_names_in(path.read_text(), names))
    }
    assert found == {}
    # the scan does find a name (and leaves an RNG state's "torch" key alone)
    assert _engine_names_in('engine: Literal["torch", "horovod"] = "torch"', names) == [1, 1, 1]
    assert _engine_names_in('state = {"torch": 1}; state["torch"]', names) == []


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
