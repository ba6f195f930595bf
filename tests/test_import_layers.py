"""The house's import rules, checked over every module of src/layerperf.

1. Layering goes one way: a module imports only from its own stage or the stages below it
   (``STAGES``, lowest first): model source -> backends -> collectors -> data model <- analysis <-
   renderers <- CLI, as docs/architecture.md draws it. Type-checking-only imports count too.
2. No import circles between modules, none hidden in a function or behind TYPE_CHECKING.
3. layerperf's own modules import each other at the top of the file. A function-local import is
   left only where it keeps an optional or heavy runtime (torch, onnxruntime, tvm, ray...) out of
   an import that does not need it, or keeps start-up fast (the CLI's subcommands, the package's
   lazy attributes); elsewhere it carries a ``# lazy: <reason>`` comment.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "layerperf"

# Stages, lowest first. A module may import from a stage at or below its own.
STAGES: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("util",),
    ("counters",),        # perf_event_open, libpfm4: the mechanism collectors use
    ("data",),            # Profile, Layer, metadata, the event table, derived figures, value types
    ("cost",),            # FLOPs, int ops, bytes of every op namespace
    ("models",),          # where a model comes from: files, external data, inputs, the zoo
    ("readers",),         # trace files -> the event table / a Profile
    ("analysis",),        # pure functions over a Profile or an event table
    ("collectors",),      # timer, perf counters, resident memory at layer boundaries; the pass driver
    ("backends",),        # runtimes: protocol, registry, shared parts, onnxruntime, torch, ...
    ("bench",),           # one operator in isolation
    ("calibration",),     # this machine's peaks
    ("dataset",),         # sweeps of models and configurations into a store (SQLite), on this machine or Ray
    ("renderers",),       # every output: terminal, markdown, csv, json, svg, html, trace.json
    ("api", "torch", "onnxruntime"),  # the public Python API
    ("cli", "__main__"),
)
RANK = {name: i for i, names in enumerate(STAGES) for name in names}
# Heavy or optional runtimes: importing them costs start-up time, or they may be missing.
HEAVY = {"torch", "onnxruntime", "onnx", "tvm", "ray", "pandas", "sklearn", "lightgbm", "duckdb", "pyarrow",
         "polars", "rich", "ml_dtypes"}
# Function-local imports of layerperf's own modules allowed without a comment: start-up cost.
LAZY_PLACES = ("layerperf", "layerperf.cli")

# Known violations still to be removed by the layout work; must end empty.
KNOWN_STAGE: set[tuple[str, str]] = set()
KNOWN_CYCLES: list[set[str]] = []
KNOWN_LOCAL: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported layerperf module (or an outside top-level package name)
    local: bool  # inside a function
    type_only: bool  # under `if TYPE_CHECKING:`
    line: int
    commented: bool  # carries a `# lazy:` reason


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str) -> str | None:
    mods = modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    mods = modules()
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level or not node.module:
        return []
    if not node.module.startswith("layerperf"):
        return [node.module]
    out = []
    for a in node.names:
        full = f"{node.module}.{a.name}"
        out.append(full if full in mods else node.module)
    return out


def _file_imports(name: str, path: Path) -> list[Import]:
    text = path.read_text()
    lines = ["", *text.splitlines()]
    out: list[Import] = []

    def visit(node: ast.AST, local: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for c in child.body:
                    visit_one(c, local, True)
                for c in child.orelse:
                    visit_one(c, local, type_only)
            else:
                visit_one(child, local, type_only)

    def visit_one(child: ast.AST, local: bool, type_only: bool) -> None:
        if isinstance(child, ast.Import | ast.ImportFrom):
            commented = any("# lazy:" in lines[i] for i in (child.lineno - 1, child.lineno))
            for target in _targets(child):
                resolved = _resolve(target) if target.startswith("layerperf") else target.split(".")[0]
                if resolved and resolved != name:
                    out.append(Import(name, resolved, local, type_only, child.lineno, commented))
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            visit(child, True, type_only)
        else:
            visit(child, local, type_only)

    visit(ast.parse(text), False, False)
    return out


@cache
def imports() -> list[Import]:
    return [imp for name, path in modules().items() for imp in _file_imports(name, path)]


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "layerperf"


def _own(imp: Import) -> bool:
    return imp.target.startswith("layerperf")


def _edges() -> dict[str, set[str]]:
    """Module -> layerperf modules it imports (every kind), less the package's lazy attributes and
    ``__version__`` (the root package imports nothing at its top)."""
    adj: dict[str, set[str]] = {m: set() for m in modules()}
    for imp in imports():
        if _own(imp) and imp.source != "layerperf" and imp.target != "layerperf":
            adj[imp.source].add(imp.target)
    return adj


def cycles(adj: dict[str, set[str]]) -> list[set[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[set[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in sorted(adj):
        if v not in index:
            strong(v)
    return found


@cache
def heavy_at_top(module: str) -> bool:
    """Whether importing ``module`` imports a heavy or optional runtime (through its top-level imports)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for imp in imports():
            if imp.source != m or imp.local or imp.type_only:
                continue
            if not _own(imp):
                if imp.target in HEAVY:
                    return True
            elif imp.target != "layerperf":
                todo.append(imp.target)
    return False


def stage_violations(imps: list[Import]) -> set[tuple[str, str]]:
    bad = set()
    for imp in imps:
        if not _own(imp) or imp.target == "layerperf" or imp.source in {"layerperf", "layerperf.__main__"}:
            continue
        a, b = _stage(imp.source), _stage(imp.target)
        if a not in RANK or b not in RANK or RANK[b] > RANK[a]:
            bad.add((imp.source, imp.target))
    return bad


def local_violations() -> set[tuple[str, str]]:
    bad = set()
    for imp in imports():
        if not (imp.local and _own(imp)) or imp.type_only or imp.commented:
            continue
        if imp.source == "layerperf" or imp.source.startswith("layerperf.cli"):
            continue
        if heavy_at_top(imp.target) and not heavy_at_top(imp.source):
            continue
        bad.add((imp.source, imp.target))
    return bad


def test_every_stage_is_ranked() -> None:
    stages = {_stage(m) for m in modules()} - {"layerperf"}
    assert stages <= set(RANK), f"stages with no place in STAGES: {sorted(stages - set(RANK))}"


def test_layering_goes_one_way() -> None:
    bad = stage_violations(imports())
    new = sorted(bad - KNOWN_STAGE)
    assert not new, "imports up the stages:\n" + "\n".join(f"  {a} -> {b}" for a, b in new)
    assert not KNOWN_STAGE - bad, f"fixed, take out of KNOWN_STAGE: {sorted(KNOWN_STAGE - bad)}"


def test_no_import_circles() -> None:
    found = cycles(_edges())
    new = [c for c in found if not any(c <= known for known in KNOWN_CYCLES)]
    assert not new, "import circles:\n" + "\n".join("  " + ", ".join(sorted(c)) for c in new)


def test_own_modules_are_imported_at_the_top() -> None:
    bad = local_violations()
    new = sorted(bad - KNOWN_LOCAL)
    assert not new, ("function-local imports of layerperf modules with no heavy runtime behind them "
                     "(import at the top, or say why with `# lazy: <reason>`):\n"
                     + "\n".join(f"  {a} -> {b}" for a, b in new))
    assert not KNOWN_LOCAL - bad, f"fixed, take out of KNOWN_LOCAL: {sorted(KNOWN_LOCAL - bad)}"


def test_the_checker_sees_a_circle_and_an_upward_import() -> None:
    """The checks can fail: modules importing each other in a ring are a circle, and a data module
    importing a renderer goes up the stages."""
    ring = {"layerperf.a": {"layerperf.b"}, "layerperf.b": {"layerperf.c"}, "layerperf.c": {"layerperf.a"},
            "layerperf.d": {"layerperf.a"}}
    assert cycles(ring) == [{"layerperf.a", "layerperf.b", "layerperf.c"}]
    up = Import("layerperf.data.profile", "layerperf.renderers.files", True, False, 1, False)
    down = Import("layerperf.renderers.files", "layerperf.data.profile", False, False, 1, False)
    assert stage_violations([up, down]) == {("layerperf.data.profile", "layerperf.renderers.files")}
