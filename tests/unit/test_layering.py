"""kpax's layer map holds in the code: a layer imports only layers below it, the
clients never import each other, and no module imports itself round a cycle.

Read from the source (module-level imports, ``if TYPE_CHECKING:`` blocks left
out), so a change that breaks the map fails here with the import that breaks it.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

KPAX = Path(__file__).resolve().parents[2] / "kpax"

#: Each top-level part of kpax and its layer: a part may import only parts of a
#: lower layer (docs/architecture.md draws the same map).
LAYER = {
    "proto": 0,  # sans-I/O protocol: imports nothing else of kpax
    "_version": 0,
    "metrics": 1,
    "errors": 1,
    "config": 1,
    "machines": 1,  # what the engines' state machines raise for a refused event
    "structs": 1,
    "loop_thread": 1,
    "forks": 1,
    "tasks": 1,
    "event_loops": 1,
    "peer_methods": 0,  # peers' method names, for AttributeError hints
    "user_callbacks": 0,  # calls the application's callbacks (plain or async)
    "lazy_names": 0,  # a package's names imported on first use (PEP 562)
    "broker": 2,
    "sync_face": 2,
    "cluster": 3,
    "producer": 4,
    "consumer": 4,
    "admin": 4,
    "parallel": 5,  # the parallel consumer: above the consumer and the producer (dead letters)
    "aio": 6,  # the asyncio face: exports the parallel consumer's too
    "otel": 6,  # traces the parallel consumer too
    "spark": 5,
    "testing": 5,
    "kpax": 5,  # the package itself: the public API, its attributes loaded lazily
    "cli": 7,  # the kpax command: an application of the public API
}
CLIENTS = {"producer", "consumer", "admin"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(KPAX.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    """The kpax modules ``path`` imports at module level."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
            if name == "TYPE_CHECKING":
                stack.extend(node.orelse)
                continue
            stack.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            stack.extend(node.body + node.orelse + node.finalbody)
            for h in node.handlers:
                stack.extend(h.body)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "kpax")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "kpax":
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p, _module(p)) for p in sorted(KPAX.rglob("*.py"))}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kpax"


def test_every_part_has_a_layer() -> None:
    parts = {_part(m) for m in _graph()}
    assert parts <= set(LAYER), f"give these a layer: {sorted(parts - set(LAYER))}"


def test_layers_import_only_layers_below() -> None:
    problems = []
    for module, targets in _graph().items():
        a = _part(module)
        for target in sorted(targets):
            b = _part(target)
            if a == b:
                continue
            if LAYER[b] >= LAYER[a]:
                problems.append(f"{module} imports {target} ({a} is not above {b})")
            elif a in CLIENTS and b in CLIENTS:
                problems.append(f"{module} imports {target} (clients are independent)")
    assert not problems, "\n".join(problems)


def test_no_import_cycles() -> None:
    graph = _graph()
    modules = set(graph)

    def resolve(target: str) -> str | None:
        # "from kpax.x import name" may name a module kpax.x.name or an attribute of kpax.x
        while target and target not in modules:
            target = target.rsplit(".", 1)[0] if "." in target else ""
        return target or None

    # A module importing its own package (``from kpax.producer import _sendpath``)
    # finds it initialised already (a package runs before its modules): no edge.
    edges = {
        m: {t for t in map(resolve, ts) if t and t != m and not m.startswith(t + ".")}
        for m, ts in graph.items()
    }
    state: dict[str, int] = collections.defaultdict(int)  # 0 new, 1 on stack, 2 done
    cycles: list[list[str]] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(edges[m]):
            if state[t] == 1:
                cycles.append([*path[path.index(t) :], t])
            elif state[t] == 0:
                visit(t, path)
        path.pop()
        state[m] = 2

    for m in sorted(edges):
        if state[m] == 0:
            visit(m, [])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_protocol_layer_imports_nothing_else_of_kpax() -> None:
    for module, targets in _graph().items():
        if _part(module) == "proto":
            assert all(_part(t) in {"proto", "_version"} for t in targets), (module, targets)


def test_the_fake_kafka_is_built_on_the_protocol_layer_only() -> None:
    """kpax.testing.fake serves kpax's own clients in tests: it uses kpax.proto and
    nothing of the client layers (broker, cluster, producer, consumer, admin), so a
    client bug cannot hide behind the same code on both sides of the wire."""
    for module, targets in _graph().items():
        if module.startswith("kpax.testing.fake"):
            others = [
                t for t in targets if _part(t) != "proto" and not t.startswith("kpax.testing.fake")
            ]
            assert not others, (module, others)


#: The parallel consumer's core: a deterministic state machine, tested without I/O.
PARALLEL_CORE = {"codec", "offsets", "schedule", "engine"}


def test_the_parallel_consumer_core_is_sans_io() -> None:
    """kpax.parallel's core (offsets, ordering, the metadata encoding, back-pressure,
    retries) takes time as an input and does no I/O: it imports no asyncio, threads,
    sockets or clock, and of kpax only itself and kpax.structs."""
    banned = {"asyncio", "threading", "socket", "time", "concurrent", "selectors", "signal"}
    for name in sorted(PARALLEL_CORE):
        path = KPAX / "parallel" / f"{name}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        stdlib = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                stdlib.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                stdlib.add(node.module.split(".")[0])
        assert not stdlib & banned, (name, stdlib & banned)
        kpax_imports = _imports(path, f"kpax.parallel.{name}")
        allowed = {f"kpax.parallel.{n}" for n in PARALLEL_CORE} | {"kpax.structs"}
        assert kpax_imports <= allowed, (name, kpax_imports - allowed)
