"""Imports in harness/ only go down the layers, peers stay apart, and nothing is cyclic.

The layers follow the data flow (docs/ARCHITECTURE.md): a room may use the rooms below it,
never one above, and the domain rooms of one layer (linear, MoE, loading, quantizers) do
not reach into each other. Imports inside functions and under TYPE_CHECKING count too:
hiding an upward import in a function hides the dependency, it does not remove it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"

# Lowest first. Each name is a subpackage or a top-level module of harness/.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "version", "process"}),  # process: signals, time limits (stdlib only)
    frozenset({"core", "registry"}),  # registry: named plugins from entry points
    frozenset({"ops"}),  # thin torch glue: argument layouts, shared by probes and paths
    frozenset({"platform"}),  # detection, and probes that run the ops
    frozenset({"store"}),
    frozenset({"paths"}),
    frozenset({"linear", "moe", "loading", "quantizers"}),
    frozenset({"memory", "catalog", "models"}),
    frozenset({"report"}),
    frozenset({"pytest_plugin"}),  # the plugin's parts: recorder, pinning, verdicts
    frozenset({"plugin", "cli", "quantize"}),
    frozenset({"__init__"}),  # the front door re-exports names from every layer below
    frozenset({"__main__"}),
)
LAYER_OF = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}

# Floors inside a room, lowest first: the report reads runs, models them, then renders the
# model. A module directly in the room (its ``__init__``, the kept import paths) stands
# above every floor.
FLOORS: dict[str, tuple[str, ...]] = {"report": ("reading", "model", "outputs")}
TOP_FLOOR = "(room)"


def module_name(path: Path) -> str:
    parts = path.relative_to(HARNESS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def floor(module: str) -> str:
    """The floor of ``module`` inside its room (`FLOORS`), or `TOP_FLOOR`."""
    parts = module.split(".")
    if len(parts) > 3 or (len(parts) == 3 and parts[2] in FLOORS.get(parts[1], ())):
        return parts[2]  # a module on a floor, or the floor's package
    return TOP_FLOOR


def imports_of(path: Path, module: str) -> set[str]:
    """Every harness module ``path`` imports (absolute or relative, at any depth)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "harness"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "harness":
                continue
            found.add(target)
            # `from harness.x import y` may import the submodule harness.x.y
            found |= {f"{target}.{a.name}" for a in node.names}
    return found


MODULES = {module_name(p): p for p in sorted(HARNESS.rglob("*.py"))}
GRAPH = {
    name: {m for m in imports_of(path, name) if m in MODULES and m != name}
    for name, path in MODULES.items()
}


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for src, targets in sorted(graph.items()):
        for dst in sorted(targets):
            a, b = room(src), room(dst)
            if a not in LAYER_OF or b not in LAYER_OF:
                problems.append(
                    f"{src} -> {dst}: room {a if a not in LAYER_OF else b!r} has no layer"
                )
            elif LAYER_OF[b] > LAYER_OF[a]:
                problems.append(f"{src} -> {dst}: {a} (layer {LAYER_OF[a]}) imports the higher {b}")
            elif LAYER_OF[b] == LAYER_OF[a] and a != b:
                problems.append(f"{src} -> {dst}: peers {a} and {b} must not import each other")
            elif a == b and a in FLOORS:
                order = (*FLOORS[a], TOP_FLOOR)
                fa, fb = floor(src), floor(dst)
                if fa not in order or fb not in order:
                    problems.append(
                        f"{src} -> {dst}: {a} has no floor {fa if fa not in order else fb!r}"
                    )
                elif order.index(fb) > order.index(fa):
                    problems.append(f"{src} -> {dst}: {a}.{fa} imports the higher {a}.{fb}")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_room_has_a_layer() -> None:
    assert {room(m) for m in MODULES} <= set(LAYER_OF)


def test_every_module_of_a_room_with_floors_has_one() -> None:
    for name in MODULES:
        if room(name) in FLOORS:
            assert floor(name) in (*FLOORS[room(name)], TOP_FLOOR), name


def test_imports_only_go_down() -> None:
    assert layer_violations(GRAPH) == []


def test_no_import_cycles() -> None:
    assert cycles(GRAPH) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"harness.core.a": {"harness.paths.b"}}, "core (layer 1) imports the higher paths"),
        ({"harness.ops.a": {"harness.platform.b"}}, "ops (layer 2) imports the higher platform"),
        ({"harness.moe.a": {"harness.linear.b"}}, "peers moe and linear"),
        ({"harness.core.a": {"harness.cli"}}, "imports the higher cli"),
        (
            {"harness.report.reading.a": {"harness.report.model.b"}},
            "report.reading imports the higher report.model",
        ),
        (
            {"harness.report.model.a": {"harness.report.render"}},
            "report.model imports the higher report.(room)",
        ),
    ],
)
def test_the_layer_check_finds_violations(graph: dict[str, set[str]], expected: str) -> None:
    assert expected in "\n".join(layer_violations(graph))


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
