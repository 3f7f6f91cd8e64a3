"""The house's layout (docs/architecture.md §4), checked on the source itself.

- ``RULES`` is the one table of which folder may import which, from the leaves up: a part
  imports only what its row names (and itself), so nothing runs back up the table, and
  only ``bootstrap`` may import an adapter (``store``, ``index``, ``log``, ``archive``);
- no import cycle crosses two files at run time (imports under ``TYPE_CHECKING`` do not run);
- the top level holds a few modules only, and no module is over 600 lines.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "podium"

LEAVES = {"errors", "metrics", "util"}
ADAPTERS = {"store", "index", "log", "archive"}
BELOW_ADAPTERS = LEAVES | {"domain", "ports"}

# Who may import whom, from the leaves up. A part is a folder of src/podium/ or a top-level
# module; "" is the package itself (its __version__). Each row names every part the part may
# import besides itself; a part missing from the table is an error of the table.
RULES: dict[str, set[str]] = {
    "errors": set(),
    "metrics": set(),
    "util": {"errors", "metrics"},
    "domain": {"errors"},  # pure rules: no I/O, only the errors they raise
    "config": {"errors", "util", "domain"},
    "ports": {"errors", "domain"},
    # the adapters: each knows the ports it implements, never another adapter
    "store": BELOW_ADAPTERS,
    "index": BELOW_ADAPTERS,
    "log": BELOW_ADAPTERS,
    "archive": BELOW_ADAPTERS,
    # the use cases and the roles that drive them: ports only, never an adapter
    "service": BELOW_ADAPTERS | {"config"},
    "workers": BELOW_ADAPTERS | {"config", "service"},
    # the one place that picks adapters
    "bootstrap": BELOW_ADAPTERS | ADAPTERS | {"config", "service", "workers"},
    # HTTP: the API, and the pages that use its helpers (never the other way round)
    "api": BELOW_ADAPTERS | {"config", "service"},
    "web": BELOW_ADAPTERS | {"config", "service", "api"},
    # the process: the app factory, the server, the demo; then the command line
    "serve": BELOW_ADAPTERS | {"", "config", "service", "workers", "bootstrap", "api", "web"},
    "client": set(),  # HTTP only: a user's program imports it without the server
    "loadgen": {"client"},
    "cli": BELOW_ADAPTERS
    | {"config", "service", "workers", "bootstrap", "serve", "client", "loadgen"},
    "__main__": {"cli"},
    "__init__": set(),
}

TOP_LEVEL = {"__init__.py", "__main__.py", "errors.py", "metrics.py", "bootstrap.py"}
MAX_LINES = 600


def _name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under ``if TYPE_CHECKING:``: imports that never run."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


FILES = {_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _imports(path: Path) -> Iterator[tuple[str, bool]]:
    """Each podium module a file imports, and whether the import runs (not TYPE_CHECKING).
    ``from podium.x import y`` names the module ``podium.x.y`` when there is one."""
    tree = ast.parse(path.read_text())
    dormant = _type_checking_only(tree)
    for node in ast.walk(tree):
        runs = id(node) not in dormant
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("podium"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield (sub if sub in FILES else node.module), runs
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("podium"):
                    yield alias.name, runs


IMPORTS = {name: list(_imports(path)) for name, path in FILES.items()}


def _part(module: str) -> str:
    """The part of podium a module belongs to: its folder, or its own name at the top."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1] if len(parts) > 1 else ""


def _part_of_import(module: str) -> str:
    return "" if module == "podium" else _part(module)


@pytest.mark.parametrize("module", sorted(FILES))
def test_imports_run_down_the_table(module: str) -> None:
    part = _part(module)
    assert part in RULES, f"{module}: its part {part!r} has no row in RULES; add one"
    allowed = RULES[part] | {part}
    wrong = sorted({m for m, _ in IMPORTS[module] if _part_of_import(m) not in allowed})
    assert not wrong, f"{module} ({part}) imports {wrong}: not in its row of RULES"


def test_the_table_has_a_row_for_every_part_and_no_other() -> None:
    parts = {_part(m) for m in FILES}
    assert parts == set(RULES)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            step = next(it, None)
            if step is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
            elif step not in index:
                index[step] = low[step] = counter
                counter += 1
                stack.append(step)
                on.add(step)
                work.append((step, iter(sorted(edges[step]))))
            elif step in on:
                low[node] = min(low[node], index[step])
    return out


def _run_time_edges() -> dict[str, set[str]]:
    return {
        name: {m for m, runs in imports if runs and m in FILES and m != name}
        for name, imports in IMPORTS.items()
    }


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]


def test_no_import_cycle_crosses_two_files_at_run_time() -> None:
    cycles = _cycles(_run_time_edges())
    assert not cycles, f"import cycles at run time: {cycles}"


def test_the_top_level_holds_a_few_modules() -> None:
    top = {p.name for p in SRC.glob("*.py")}
    assert top == TOP_LEVEL, f"new at the top level: {top - TOP_LEVEL}; gone: {TOP_LEVEL - top}"


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_the_check_sees_the_tree() -> None:
    names = set(FILES)
    assert {"podium.bootstrap", "podium.service.wiring", "podium.domain.boards"} <= names
    assert any(m.startswith("podium.store.postgres.") for m in names)
    assert ("podium.domain.boards", True) in IMPORTS["podium.domain.recording"]


def test_the_exception_tree_is_drawn_whole() -> None:
    """errors.py's docstring draws every exception class it defines, under its parent."""
    import inspect

    from podium import errors

    doc = errors.__doc__ or ""
    drawn = {line.split("── ")[-1].split()[0] for line in doc.splitlines() if "── " in line}
    defined = {
        name
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, Exception) and cls.__module__ == errors.__name__
    }
    assert drawn | {"PodiumError"} == defined


# --- docs/architecture.md §4 lists every module, and only modules there are -----------------

ARCHITECTURE = SRC.parents[1] / "docs" / "architecture.md"


def _layout() -> dict[str, str]:
    """The paths the layout block names (from ``src/podium/``), each with its line: the first
    ``text`` block under "## 4. Layout", one ``<path>  <what it holds>`` a line."""
    doc = ARCHITECTURE.read_text()
    assert "\n## 4. Layout\n" in doc, 'docs/architecture.md has no section "## 4. Layout"'
    section = doc.split("\n## 4. Layout\n", 1)[1].split("\n## ", 1)[0]
    assert "```text\n" in section, "docs/architecture.md §4 has no ```text block"
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    listed: dict[str, str] = {}
    for line in block.splitlines():
        if not line.strip():
            continue
        path, sep, what = line.partition("  ")
        assert sep and path and not path[0].isspace() and what.strip(), (
            f"docs/architecture.md §4: {line!r} is not '<path>  <what it holds>' "
            "(the path from src/podium/, two spaces or more, then what the module holds)"
        )
        assert path not in listed, f"docs/architecture.md §4 lists {path} twice"
        listed[path] = line
    return listed


def _suggested(path: str, column: int) -> str:
    """The line to add for a module: its path, then its docstring's first line."""
    doc = ast.get_docstring(ast.parse((SRC / path).read_text())) or ""
    what = doc.split("\n\n", 1)[0].replace("\n", " ").strip() or "<what it holds>"
    return f"{path:<{column}}{what}"


def test_the_layout_lists_every_module() -> None:
    listed = _layout()
    modules = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py"))
    missing = [m for m in modules if m not in listed]
    column = max(len(p) for p in listed) + 2
    assert not missing, (
        "docs/architecture.md §4 (Layout) does not list these modules; add a line for each "
        "to its block, in its place by path, saying in a few words what the module holds "
        "(its docstring's first line is below, to shorten):\n"
        + "\n".join(_suggested(m, column) for m in missing)
    )


def test_the_layout_names_nothing_that_is_gone() -> None:
    gone = [
        line
        for path, line in _layout().items()
        if not ((SRC / path).is_dir() if path.endswith("/") else (SRC / path).is_file())
    ]
    assert not gone, (
        "docs/architecture.md §4 (Layout) lists what is not under src/podium any more; "
        "remove or rename these lines:\n" + "\n".join(gone)
    )


# The ports the service holds. A module of the API or the web pages that reads one of these
# attributes (``podium.store``, ``app.state.backends.index``, ``reads._log``, ...) reaches
# data around the service, however it got hold of the object.
BEHIND_THE_SERVICE = {"store", "index", "log", "copy"}


def _around_the_service(source: str) -> list[str]:
    return [
        f"line {node.lineno}: .{node.attr}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr.removeprefix("_") in BEHIND_THE_SERVICE
    ]


def test_the_api_reaches_data_only_through_the_service() -> None:
    """CONTRIBUTING.md: ``api/`` and ``web/`` reach data only through the service. The
    readiness route once pinged ``podium.store`` and ``podium.index`` itself."""
    assert _around_the_service("async def readyz():\n    await podium.store.ping()\n")
    assert _around_the_service("podium.reads._index.count(key)")
    found = {
        str(path.relative_to(SRC)): lines
        for part in ("api", "web")
        for path in sorted((SRC / part).rglob("*.py"))
        if (lines := _around_the_service(path.read_text()))
    }
    assert not found, f"around the service: {found}"
