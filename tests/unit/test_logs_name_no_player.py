"""Podium's logs name no player (the README's erasure section, "The logs"): no call of a
logger in the source passes a player's id (a name of ``player``, ``player_id``, ``entrant``
or ``member``, or an attribute so named) to be printed. A count of players (``len(...)``)
is fine. The fleet's test (tests/integration/test_erasure_logs.py) checks what is printed."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "podium"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}
NAMES = ("player", "player_id", "pid", "entrant", "member", "friend")


def _names_a_player(arg: ast.expr) -> bool:
    for node in ast.walk(arg):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
            return False  # a count
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else None
        )
        if name in NAMES:
            return True
    return False


def test_no_log_call_is_given_a_players_id() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LEVELS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in {"log", "logger", "logging"}
            ):
                continue
            args = [*node.args[1:], *(k.value for k in node.keywords if k.arg != "exc_info")]
            if any(_names_a_player(a) for a in args):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == [], f"a log call given a player's id: {found}"


def test_the_check_sees_a_player_named() -> None:
    call = ast.parse('log.warning("ban of %s", s.player_id)').body[0]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    assert _names_a_player(call.value.args[1])
    count = ast.parse('log.info("%d players", len(players))').body[0]
    assert isinstance(count, ast.Expr) and isinstance(count.value, ast.Call)
    assert not _names_a_player(count.value.args[1])
