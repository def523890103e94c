"""The house's walls, read from the source with ast (nothing imported): one package whose own
imports all say detect_caches; the measuring code imports neither the analysis nor the reports;
the analysis and the reports import the ground floor, never the measuring code; no import
circle; no module over 300 lines; torch and triton only in the GPU room."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("measure", "detector", "reports", "pipeline")   # folders mapped into detect_caches
MAX_LINES = 300


def _modules() -> dict[str, Path]:
    """Module name -> file, as an install lays them out (pyproject.toml's package-dir)."""
    found = {}
    for folder, prefix in [("detect_caches", "detect_caches")] + [(s, f"detect_caches.{s}") for s in SUBPACKAGES]:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((prefix, *parts))
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(path: Path, *, deferred: bool) -> dict[str, int]:
    """Modules ``path`` imports (absolute names) -> line; ``deferred``: also those inside
    functions (the import-time graph leaves them out)."""
    tree = ast.parse(path.read_text(), str(path))
    name = next(n for n, p in MODULES.items() if p == path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = ast.walk(tree) if deferred else _module_level(tree.body)
    out: dict[str, int] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.setdefault(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                out.setdefault(target if target in MODULES else base, node.lineno)
    return out


def _module_level(body):
    """Statements run when the module is imported: the top level and its if/try blocks (an
    `if TYPE_CHECKING:` import counts: it is a circle to a reader and to a type checker)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(node, (ast.If, ast.Try, ast.ExceptHandler)) and inner:
                yield from _module_level(inner)


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "detect_caches":
        return "outside"
    if len(parts) > 1 and parts[1] in SUBPACKAGES:
        return parts[1]
    return "cli" if module in ("detect_caches", "detect_caches.cli", "detect_caches.__main__") else "ground"


def _own(imported: dict[str, int]) -> dict[str, int]:
    return {m: line for m, line in imported.items() if m.split(".")[0] == "detect_caches"}


def test_the_package_imports_its_own_code_by_the_package_name_only():
    """A bare `import reports` would find a user's reports.py first, or load a module twice."""
    files = list(MODULES.values()) + sorted((ROOT / "tests").glob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
    bare = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bare += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n and n.split(".")[0] in SUBPACKAGES]
    assert not bare


# which layers each layer may import (besides itself): the ground floor is everyone's
ALLOWED = {
    "ground": {"ground"},
    "measure": {"ground"},
    "detector": {"ground"},
    "reports": {"ground", "detector"},
    "pipeline": {"ground", "measure", "detector", "reports"},
    "cli": {"ground", "pipeline", "cli"},
}


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layers_import_only_downwards(layer):
    wrong = []
    for module, path in MODULES.items():
        if _layer(module) != layer:
            continue
        for target, line in _own(_imports(path, deferred=True)).items():
            if _layer(target) not in ALLOWED[layer] | {layer}:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong


def test_no_import_circle():
    graph = {m: set(_own(_imports(p, deferred=False))) & set(MODULES) for m, p in MODULES.items()}
    for deps in graph.values():
        deps.discard("detect_caches")   # a parent package is imported before any of its modules
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:   # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles


def test_no_module_over_300_lines():
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long


def test_torch_and_triton_only_in_the_gpu_room():
    """`pip install detect-caches` has neither: analyze, compare, history, fleet and the
    simulator must never need them (torch.distributed in the torchrun fleet excepted)."""
    outside = []
    for module, path in MODULES.items():
        if module.startswith("detect_caches.measure.gpu") or module == "detect_caches.pipeline.ranks":
            continue
        for target, line in _imports(path, deferred=True).items():
            if target.split(".")[0] in ("torch", "triton"):
                outside.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not outside


def test_every_subpackage_is_installed():
    """pyproject.toml lists the packages by hand (package-dir maps folders that are not where
    setuptools would look): a new folder with an __init__.py must be listed too."""
    tomllib = pytest.importorskip("tomllib")
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert folders == set(setup["packages"])
    assert setup["package-dir"] == {"detect_caches": "detect_caches", **{f"detect_caches.{s}": s for s in SUBPACKAGES}}
