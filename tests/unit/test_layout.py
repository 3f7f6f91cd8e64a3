"""Which way imports run (CONTRIBUTING.md, "Layout"), checked on the source itself.

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
