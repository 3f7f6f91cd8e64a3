"""The server-side scripts of the Redis adapters (``lua/``), read from the package."""

from __future__ import annotations

from importlib import resources


def lua(name: str) -> str:
    return (resources.files("podium.index") / "lua" / f"{name}.lua").read_text()
