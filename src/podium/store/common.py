"""Migrations on disk, shared by both store adapters."""

from __future__ import annotations

from importlib import resources


def migrations(dialect: str) -> list[tuple[int, str]]:
    """``(version, sql)`` for every file in ``sql/<dialect>/``, in order."""
    folder = resources.files("podium.store") / "sql" / dialect
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.read_text()))
    return sorted(out)
