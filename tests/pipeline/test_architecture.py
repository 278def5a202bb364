"""The library's layering (docs/architecture.md), checked over the source with :mod:`ast`.

Every ``import`` and ``from … import`` counts, at module level or inside a function (a lazy
import is still a dependency: it is what ``mimesis deps`` gives DVC), and so does a literal
``importlib.import_module("…")``. A "package" is a first-level name under ``mimesis``
(``mimesis.eval``, ``mimesis.rl``, …); a top-level module (``mimesis.traces``) is its own unit.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "mimesis"
# The layers of docs/architecture.md, bottom first. A package imports only from lower layers;
# within the leaves and within the entry points, any acyclic import is fine.
LAYERS = (
    {"format", "prompts", "text", "schemas", "io", "params", "stats", "tracking", "traces",
     "runtime_env", "openai_chat"},
    {"models"}, {"data"}, {"behaviors"}, {"simulator", "envs"}, {"users"}, {"rollout"},
    {"train"}, {"rl", "eval"}, {"serve"}, {"integrations"}, {"stages"},
    {"cli", "cli_simulator", "deps", "pipeline", "run_summary"},
)
FREE_WITHIN = (0, len(LAYERS) - 1)
# What may import mimesis.stages: the entry points that run stages by name (pipeline does so
# with a computed name, which no literal import shows).
STAGE_CALLERS = {"mimesis.cli", "mimesis.cli_simulator", "mimesis.pipeline"}
FORBIDDEN = {  # importer package -> packages it must never import
    "eval": {"rl", "train"},
    "rl": {"eval"},
}


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path, name: str) -> Iterator[str]:
    """Absolute names ``path`` (module ``name``) imports, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            yield node.args[0].value


def unit(name: str, root: Path = ROOT) -> str | None:
    """The package (or top-level module) of ``mimesis.<x>…``; ``None`` outside the library or
    for a name that is not a module of it (an attribute such as ``mimesis.__version__``)."""
    parts = name.split(".")
    if parts[0] != "mimesis" or len(parts) < 2:
        return None
    first = root / "mimesis" / parts[1]
    return parts[1] if first.is_dir() or first.with_suffix(".py").is_file() else None


def package_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[tuple[str, str], set]]:
    """Package -> packages it imports, and (importer, imported) -> the module pairs behind it."""
    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], set] = {}
    for path in sorted((root / "mimesis").rglob("*.py")):
        name = module_name(path, root)
        src = unit(name, root)
        if src is None:  # mimesis/__init__.py: the root imports nothing that layers care about
            continue
        graph.setdefault(src, set())
        for target in imports(path, name):
            dst = unit(target, root)
            if dst and dst != src:
                graph[src].add(dst)
                why.setdefault((src, dst), set()).add((name, target))
    return graph, why


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle :class:`graphlib.TopologicalSorter` finds, one at a time, with its edges cut
    until none is left (so a test names them all)."""
    graph = {k: set(v) for k, v in graph.items()}
    found = []
    while True:
        try:
            TopologicalSorter(graph).prepare()
            return found
        except CycleError as err:
            cycle = err.args[1]  # [a, b, …, a]: a depends on … on a
            found.append(cycle)
            graph[cycle[1]].discard(cycle[0])


def test_no_package_level_import_cycle():
    graph, why = package_graph()
    found = cycles(graph)
    detail = [f"{' -> '.join(reversed(c))}: " + "; ".join(
        f"{a} imports {b}" for a, b in sorted(why[(c[i + 1], c[i])])[:2])
        for c in found for i in range(len(c) - 1)]
    assert not found, "package cycles:\n" + "\n".join(detail)


def test_every_package_has_a_layer_and_imports_only_below_it():
    graph, why = package_graph()
    rank = {p: i for i, layer in enumerate(LAYERS) for p in layer}
    assert not set(graph) - set(rank), f"place these in LAYERS: {sorted(set(graph) - set(rank))}"
    upward = [f"{a} imports {b}" for src, dsts in graph.items() for dst in dsts
              if rank[dst] > rank[src] or (rank[dst] == rank[src] and rank[src] not in FREE_WITHIN)
              for a, b in sorted(why[(src, dst)])[:2]]
    assert not upward, "imports that point up (or across) a layer:\n" + "\n".join(upward)


@pytest.mark.parametrize("importer", sorted(FORBIDDEN))
def test_forbidden_layer_imports(importer):
    graph, why = package_graph()
    bad = graph.get(importer, set()) & FORBIDDEN[importer]
    assert not bad, "\n".join(f"{a} imports {b}" for dst in sorted(bad)
                              for a, b in sorted(why[(importer, dst)]))


def test_only_the_entry_points_import_the_stages():
    offenders = []
    for path in sorted(LIBRARY.rglob("*.py")):
        name = module_name(path)
        if name.startswith("mimesis.stages") or name in STAGE_CALLERS:
            continue
        offenders += [f"{name} imports {t}" for t in imports(path, name)
                      if t == "mimesis.stages" or t.startswith("mimesis.stages.")]
    assert not offenders, "\n".join(offenders)


def test_the_library_imports_no_orchestration():
    offenders = [f"{module_name(p)} imports {t}" for p in sorted(LIBRARY.rglob("*.py"))
                 for t in imports(p, module_name(p))
                 if t.split(".")[0] in ("prefect", "flows", "tasks")]
    assert not offenders, "\n".join(offenders)


def test_the_checks_see_lazy_imports_and_cycles(tmp_path):
    """The checks above must fail on the cases they exist for: an import inside a function, a
    relative import, and a two-package cycle."""
    pkg = tmp_path / "mimesis"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from mimesis.b.y import g\n")
    (pkg / "b" / "y.py").write_text("from ..a import x\n")
    graph, why = package_graph(tmp_path)
    assert graph == {"a": {"b"}, "b": {"a"}}
    assert why[("a", "b")] == {("mimesis.a.x", "mimesis.b.y"), ("mimesis.a.x", "mimesis.b.y.g")}
    assert cycles(graph) and set(cycles(graph)[0]) == {"a", "b"}
