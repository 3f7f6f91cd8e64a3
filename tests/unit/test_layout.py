"""Which way imports run (docs/architecture.md §4), checked on the source itself.

- ``domain/`` imports nothing else of podium;
- ``store/``, ``index/`` and ``log/`` never import each other;
- only ``bootstrap.py`` (and the command line, which builds nothing itself) may import a
  backend package; the service, the reads, the workers and the API know only the ports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "podium"
BACKENDS = ("store", "index", "log")


def _modules() -> list[tuple[str, set[str]]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        name = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
        out.append((name, {m for m in imported if m.startswith("podium")}))
    return out


MODULES = _modules()


def _part(module: str) -> str:
    """The top-level part of podium a module belongs to (``store``, ``service``, ...)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize(("module", "imported"), MODULES, ids=[m for m, _ in MODULES])
def test_imports_run_one_way(module: str, imported: set[str]) -> None:
    part = _part(module)
    parts = {_part(m) for m in imported} - {part, ""}
    if part == "domain":
        assert not parts, f"{module} (domain) imports {parts}"
    elif part in BACKENDS:
        assert not parts & set(BACKENDS), f"{module} imports another backend: {parts}"
    elif module != "podium.bootstrap":
        assert not parts & set(BACKENDS), f"{module} imports a backend: {parts & set(BACKENDS)}"


def test_the_check_sees_the_tree() -> None:
    names = {m for m, _ in MODULES}
    assert {"podium.bootstrap", "podium.service", "podium.domain.boards"} <= names
    assert any(m.startswith("podium.store.postgres.") for m in names)


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
