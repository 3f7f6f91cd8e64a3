"""Podium's logs name no player (the README's erasure section, "The logs"): no call of a
logger in the source passes a player's id (a name of ``player``, ``player_id``, ``entrant``
or ``member``, or an attribute so named) to be printed, as an argument or inside the message
itself (an f-string, ``%`` or ``.format``). A count of players (``len(...)``) is fine. The
fleet's test (tests/integration/test_erasure_logs.py) checks what is printed."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "podium"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}
NAMES = ("player", "player_id", "pid", "entrant", "member", "friend")
LOGGERS = {"log", "logger", "logging", "client_log", "httpx_log"}


def _names_a_player(arg: ast.expr) -> bool:
    todo: list[ast.AST] = [arg]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
            continue  # a count: what it counts is not printed
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else None
        )
        if name in NAMES:
            return True
        todo.extend(ast.iter_child_nodes(node))
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
                and node.func.value.id in LOGGERS
            ):
                continue
            # the message too: a constant names nobody, an f-string may
            args = [*node.args, *(k.value for k in node.keywords if k.arg != "exc_info")]
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
    for message in ('f"ban of {s.player_id}"', '"ban of %s" % player', '"{}".format(member)'):
        assert _names_a_player(ast.parse(message, mode="eval").body), message
    both = ast.parse('f"{len(players)} players, first {players[0].player_id}"', mode="eval")
    assert _names_a_player(both.body)  # a count beside an id does not hide the id
    assert not _names_a_player(ast.parse('"no one named"', mode="eval").body)
