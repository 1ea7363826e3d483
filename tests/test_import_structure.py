"""The package's import structure: dependencies run one way.

An import cycle is how a change to one kernel came to select the XLA
baselines as changed (docs/gate.md): the providers imported the model lane,
which imports the providers, so every file of the circle read as a
dependency of every other. Imports are read as they run: every `import`
statement in a module, at any depth, except those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

from pathlib import Path

from flybench.imports import imported_files

ROOT = Path(__file__).resolve().parents[1]


def _graph() -> dict[str, set[str]]:
    """flybench's modules (repository-relative files) and the flybench modules each imports.

    A module naming its own package (`from flybench.counters import x` in
    flybench/counters/collect.py) is left out: the package's `__init__.py`
    runs before any of its modules anyway, and a package that re-exports its
    modules would otherwise read as a cycle with each of them.
    """
    graph = {}
    for path in sorted((ROOT / "flybench").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        own = {parent.as_posix() + "/__init__.py" for parent in path.relative_to(ROOT).parents}
        graph[name] = {found.relative_to(ROOT).as_posix()
                       for found in imported_files(ROOT, path, "flybench", runtime_only=True)} - own - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_flybench_module_imports_itself_through_others() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    """The check above can fail: a circle of three modules beside a chain is found, and only it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_provider_imports_the_model_lane() -> None:
    """The model lane takes its MoE layers from the providers (flybench.model.mixtral.MOE_LAYERS); the other way
    round would put every provider in the lane's circle again."""
    graph = _graph()
    providers = {name: deps for name, deps in graph.items() if name.startswith("flybench/providers/")}
    assert len(providers) > 10
    assert {name: sorted(d for d in deps if d.startswith("flybench/model/"))
            for name, deps in providers.items() if any(d.startswith("flybench/model/") for d in deps)} == {}
    assert {"flybench/providers/xla.py", "flybench/providers/jax_custom_call.py"} <= graph["flybench/model/mixtral.py"]
