"""The layers of DESIGN.md and the absence of import cycles, read from the sources with `ast`.

What counts as an import (every depth: module level, inside functions, under TYPE_CHECKING):
- `import a.b.c` and `from a.b.c import x`: the module a.b.c (or a.b.c.x when x is a module);
- a string that is exactly the dotted name of one of our modules, or of something in one
  (`"actors.remoting.actor.RemotingServer"`, what Thespian is asked to create), counts as a
  deferred import: the module is imported when the string is used.

The rules:
1. Layers: deploy -> actors -> store -> protocol, downward only. protocol imports nothing of
   ours but protocol, store only protocol, actors only store and protocol, deploy anything.
2. Thespian only in actor adapters and deploy. An actor adapter is a module that defines an
   actor class: a class deriving from thespian's Actor (or ActorTypeDispatcher), directly or
   through classes of ours. Besides those and deploy/, only actors.runtime.loopback imports
   thespian: it patches Thespian's TCP transport and starts the local actor system for
   deploy.launch and the client runtime. Nothing else (a pure core, a config, a message
   module) depends on Thespian.
3. No import cycle in any package, deferred and type-only imports included (a module that
   names another's type for the type checker knows it as surely as one that calls it). The
   graph has a node per module, and two per package: its __init__'s module-level code, and
   its names (what its functions, e.g. a lazy facade's `__getattr__`, and its `if
   TYPE_CHECKING:` block import). `import a.b.c` runs the module-level code of the packages a
   and a.b first, so it is an edge to them too, even from a module inside them: a package
   __init__ that imports its own submodules at module level (an eager facade) is on a cycle
   with each of them that imports a sibling. Taking names from a package (`from a.b import
   Name`, `import a.b`) is an edge to both its nodes. A strongly connected component of more
   than one node is a cycle.
   store/ is checked by its own test function (the store's redesign by ownership, issue 21
   part 1, breaks its cycle).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "store", "actors", "deploy")
RANK = {"protocol": 0, "store": 1, "actors": 2, "deploy": 3}
ACTOR_BASES = {("thespian.actors", "Actor"), ("thespian.actors", "ActorTypeDispatcher")}
THESPIAN_ALSO = {"actors.runtime.loopback"}  # rule 2's one module that is no adapter
NAMES = " (names)"  # suffix of a package's second node


@dataclass(frozen=True)
class Import:
    """One import of module `target` by a module."""

    target: str
    deferred: bool  # inside a function (or a string naming a module)
    type_only: bool  # under `if TYPE_CHECKING:`
    names_from_package: bool  # takes names (or the module object) from a package


@dataclass
class Module:
    name: str
    is_package: bool
    tree: ast.Module
    imports: list[Import] = field(default_factory=list)
    thespian: bool = False
    tests: list[str] = field(default_factory=list)  # what it names of tests/ (never anything)


@cache
def modules() -> dict[str, Module]:
    out: dict[str, Module] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join(parts)
            out[name] = Module(name, is_package, ast.parse(path.read_text(), str(path)))
    for mod in out.values():
        _collect(mod, out)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, deferred: bool, type_only: bool) -> Iterator[tuple[ast.AST, bool, bool]]:
    """Every node below `node`, with whether it runs in a function / only for type checkers."""
    for child in ast.iter_child_nodes(node):
        yield child, deferred, type_only
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, True, type_only)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, deferred, True
                yield from _walk(stmt, deferred, True)
            for stmt in child.orelse:
                yield stmt, deferred, type_only
                yield from _walk(stmt, deferred, type_only)
        else:
            yield from _walk(child, deferred, type_only)


def _known(name: str, mods: dict[str, Module]) -> str | None:
    """The longest prefix of dotted `name` that is one of our modules."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in mods:
            return cand
        parts.pop()
    return None


def _collect(mod: Module, mods: dict[str, Module]) -> None:
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(mod.tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    for node, deferred, type_only in _walk(mod.tree, False, False):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "thespian":
                    mod.thespian = True
                if alias.name.split(".")[0] == "tests":
                    mod.tests.append(alias.name)
                target = _known(alias.name, mods)
                if target is not None:
                    pkg = mods[target].is_package and target == alias.name
                    mod.imports.append(Import(target, deferred, type_only, pkg))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.name.split(".")
                if not mod.is_package:
                    base.pop()
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] == "thespian":
                mod.thespian = True
            if source.split(".")[0] == "tests":
                mod.tests.append(source)
            if _known(source, mods) is None:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in mods:
                    mod.imports.append(Import(sub, deferred, type_only, False))
                else:
                    target = _known(source, mods)
                    assert target is not None
                    pkg = mods[target].is_package
                    mod.imports.append(Import(target, deferred, type_only, pkg))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and node.value.split(".")[0] in (*RANK, "tests")
            and all(p.isidentifier() for p in node.value.split("."))
        ):
            if node.value.split(".")[0] == "tests":
                mod.tests.append(node.value)
                continue
            target = _known(node.value, mods)
            if target is not None and target != mod.name:
                pkg = mods[target].is_package and target == node.value
                mod.imports.append(Import(target, True, type_only, pkg))


def _layer(name: str) -> str:
    return name.split(".")[0]


# -- rule 1 -------------------------------------------------------------------------------------
def test_imports_point_down_the_layers() -> None:
    wrong = sorted(
        f"{m.name} -> {imp.target}"
        for m in modules().values()
        for imp in m.imports
        if RANK[_layer(imp.target)] > RANK[_layer(m.name)]
    )
    assert wrong == []


def test_the_rules_see_deferred_string_and_type_only_imports() -> None:
    """The collector itself: the kinds of import the rules depend on are found."""
    known = {n: Module(n, n == "protocol", ast.parse("")) for n in
             ("protocol", "protocol.codes", "protocol.command", "protocol.errors",
              "protocol.framing")}  # fmt: skip
    mod = Module("protocol.sample", False, ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import thespian.actors\n"
        "from protocol import codes\n"  # a module taken from its package
        "if TYPE_CHECKING:\n    from protocol.command import RemotingCommand\n"
        "def f():\n    from protocol.errors import ProtocolError\n"
        "    import tests.bench\n"
        "CLASS = 'protocol.framing.FrameDecoder'\n"))
    _collect(mod, {**known, mod.name: mod})
    got = {i.target: (i.deferred, i.type_only) for i in mod.imports}
    assert got == {"protocol.codes": (False, False), "protocol.command": (False, True),
                   "protocol.errors": (True, False), "protocol.framing": (True, False)}
    assert mod.thespian and mod.tests == ["tests.bench"]
    launch = {i.target: i for i in modules()["deploy.launch"].imports}
    assert launch["actors.broker.actor"].deferred  # BROKER_CONTROLLER, a dotted class path


def test_the_package_never_imports_tests() -> None:
    """Nothing of the package reaches into tests/ (which no installed package has)."""
    assert {m.name: m.tests for m in modules().values() if m.tests} == {}


def _lazy_facade(mod: Module) -> tuple[dict[str, str], dict[str, str]] | None:
    """(name -> module in its `if TYPE_CHECKING:` block, name -> module in its lazy_exports
    table) of a lazy facade; None for any other module."""
    typed: dict[str, str] = {}
    table: dict[str, str] = {}
    for node in mod.tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    typed.update((a.asname or a.name, imp.module) for a in imp.names)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Name) and call.func.id == "lazy_exports":
                homes = ast.literal_eval(call.args[1])
                table.update((n, home) for home, names in homes.items() for n in names)
    return (typed, table) if table else None


def test_lazy_facades_tell_the_type_checker_what_they_export() -> None:
    """A lazy facade's names are typed only through its TYPE_CHECKING imports: both lists
    name the same things in the same modules."""
    facades = {m.name: f for m in modules().values() if (f := _lazy_facade(m)) is not None}
    assert {"actors.client", "actors.client.consumer", "protocol.bodies",
            "protocol.headers"} <= set(facades)  # fmt: skip
    for name, (typed, table) in facades.items():
        assert typed == table, name


# -- rule 2 -------------------------------------------------------------------------------------
def _actor_class_modules() -> set[str]:
    """Modules defining a class derived from thespian's Actor, through our classes too."""
    mods = modules()
    actor_classes = set(ACTOR_BASES)
    changed = True
    while changed:
        changed = False
        for mod in mods.values():
            names: dict[str, tuple[str, str]] = {}
            for node in ast.walk(mod.tree):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    for alias in node.names:
                        names[alias.asname or alias.name] = (node.module, alias.name)
            for node in ast.walk(mod.tree):
                if not isinstance(node, ast.ClassDef) or (mod.name, node.name) in actor_classes:
                    continue
                for base in node.bases:
                    if not isinstance(base, ast.Name):
                        continue
                    origin = names.get(base.id, (mod.name, base.id))
                    if origin in actor_classes:
                        actor_classes.add((mod.name, node.name))
                        changed = True
                        break
    return {m for m, _ in actor_classes if m in mods}


def test_thespian_only_in_actor_adapters_and_deploy() -> None:
    adapters = _actor_class_modules()
    assert {"actors.broker.actor", "actors.broker.processor_actor", "actors.runtime.watch",
            "actors.client.consumer.pull_message_service_actor"} <= adapters  # fmt: skip
    wrong = sorted(
        m.name
        for m in modules().values()
        if m.thespian
        and _layer(m.name) != "deploy"
        and m.name not in adapters
        and m.name not in THESPIAN_ALSO
    )
    assert wrong == []
    assert not any(m.thespian for m in modules().values() if _layer(m.name) in ("protocol",
                                                                                 "store"))


# -- rule 3 -------------------------------------------------------------------------------------
def _graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for mod in mods.values():
        for imp in mod.imports:
            lazy = imp.deferred or imp.type_only
            src = mod.name + NAMES if (mod.is_package and lazy) else mod.name
            parts = imp.target.split(".")
            for i in range(1, len(parts)):  # the packages whose __init__ runs first
                edges[src].add(".".join(parts[:i]))
            edges[src].add(imp.target)
            if imp.names_from_package:
                edges[src].add(imp.target + NAMES)
    for name, mod in mods.items():  # every node present, and self edges gone
        edges[name].discard(name)
        if mod.is_package:
            edges[name + NAMES].discard(name + NAMES)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _cycles_in(layers: tuple[str, ...]) -> list[list[str]]:
    return [c for c in _cycles(_graph()) if any(_layer(n) in layers for n in c)]


def test_cycle_finder_sees_an_eager_facade_and_a_deferred_cycle() -> None:
    """The graph's rules on a made-up tree: an eager facade over modules that import each
    other is a cycle, a lazy one is not; a deferred import closes a cycle like any other."""
    edges = {
        "p": {"p.a"},  # eager facade: p/__init__ imports p.a at module level
        "p.a": {"p", "p.b"},  # p.a imports p.b: runs p first
        "p.b": {"p"},
        "q": set(),  # lazy facade: q/__init__ imports nothing at module level
        "q" + NAMES: {"q.a"},
        "q.a": {"q", "q.b"},
        "q.b": {"q"},
        "x": {"y"},
        "y": {"x"},  # e.g. inside a function
    }
    assert _cycles(edges) == [["p", "p.a", "p.b"], ["x", "y"]]


def test_no_import_cycle_outside_the_store() -> None:
    assert _cycles_in(("protocol", "actors", "deploy")) == []


def test_no_import_cycle_in_the_store() -> None:
    assert _cycles_in(("store",)) == []
