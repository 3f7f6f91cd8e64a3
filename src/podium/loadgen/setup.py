"""Before the load: the settings of a run, the boards it reads (``GET /v1/boards``), and
friends lists for a sample of its players (``PUT /v1/players/{id}/friends``, an admin's
call, so only with ``--admin-key``)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

import httpx

from podium.client import Board
from podium.loadgen.mix import Mix, MixError, player_id

FRIENDS_EACH = 20  # the friends each friended player lists
HIGHER, LOWER = "higher", "lower"


class SetupError(Exception):
    """The run cannot start: a board that is not there, a key refused; the message says."""


@dataclass(frozen=True)
class Settings:
    """Everything a run needs. The keys are kept out of ``public()``, and so out of every
    print and the ``--json`` summary."""

    apis: tuple[str, ...]
    key: str
    players: int
    rate: float  # matches a second
    duration_s: float
    mix: Mix = field(default_factory=Mix)
    players_per_match: int = 2
    admin_key: str | None = None
    boards: tuple[str, ...] | None = None  # None: every board the mode counts for
    mode: str = "default"
    concurrency: int = 256
    game_servers: int = 8
    seed: int | None = None
    friends_players: int = 500
    commit_sample: float = 0.02
    commit_deadline_s: float = 10.0
    verify: bool = False
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.apis:
            raise MixError("--api: at least one address")
        if self.players_per_match < 1 or self.players < self.players_per_match:
            raise MixError(
                f"--players {self.players}: at least --players-per-match "
                f"{self.players_per_match}, which is at least 1"
            )
        for name in ("concurrency", "game_servers"):
            if getattr(self, name) < 1:
                raise MixError(f"--{name.replace('_', '-')}: expected 1 or more")
        if not 0 <= self.commit_sample <= 1:
            raise MixError("--commit-sample: expected a share from 0 to 1")

    def public(self) -> dict[str, Any]:
        return {
            "apis": list(self.apis),
            "players": self.players,
            "rate_matches_per_s": round(self.rate, 3),
            "players_per_match": self.players_per_match,
            "reads_per_match": self.mix.reads_per_match,
            "mix": self.mix.shares(),
            "boards": None if self.boards is None else list(self.boards),
            "mode": self.mode,
            "duration_s": self.duration_s,
            "concurrency": self.concurrency,
            "game_servers": self.game_servers,
            "seed": self.seed,
            "commit_sample": self.commit_sample,
            "commit_deadline_s": self.commit_deadline_s,
            "verify": self.verify,
            "friends": self.admin_key is not None,
        }


def direction(board: Board) -> str | None:
    """Which way a player's total on ``board`` moves as results with points of 0 or more
    come in: summed and descending-best totals only rise, an ascending best only falls; a
    ``last`` board's total goes wherever the last match puts it (None: not judged)."""
    if board.aggregate == "sum" or (board.aggregate == "best" and board.order == "desc"):
        return HIGHER
    if board.aggregate == "best":
        return LOWER
    return None


def reached(points: int, total: int, way: str) -> bool:
    """Whether a board showing ``points`` has taken in a total of ``total`` (or moved on
    past it, by a later result of the same player)."""
    return points >= total if way == HIGHER else points <= total


def choose_boards(
    available: tuple[Board, ...], named: tuple[str, ...] | None, mode: str
) -> tuple[list[Board], list[str]]:
    """The boards to read, and notes on those passed over. Named boards must exist; by
    default every board the mode counts for, but grouped ones (a read needs a group) and
    ones between windows (no current window to read)."""
    by_name = {b.name: b for b in available}
    notes: list[str] = []
    if named is not None:
        unknown = [n for n in named if n not in by_name]
        if unknown:
            raise SetupError(
                f"--boards: no board {', '.join(unknown)} (there are: {', '.join(by_name)})"
            )
        return [by_name[n] for n in named], notes
    chosen = []
    for b in available:
        if b.modes is not None and mode not in b.modes:
            continue
        if b.group_by is not None:
            notes.append(f"board {b.name} is grouped by {b.group_by}: not read")
        elif b.current_window is None:
            notes.append(f"board {b.name} has no open window: not read")
        else:
            chosen.append(b)
    if not chosen:
        raise SetupError(f"no board to read for mode {mode!r}: name some with --boards")
    return chosen, notes


def friend_lists(rng: random.Random, players: int, sample: int) -> dict[int, list[int]]:
    """Friends for ``sample`` players, each listing up to FRIENDS_EACH others."""
    chosen = rng.sample(range(players), min(sample, players))
    lists = {}
    for p in chosen:
        others = rng.sample(range(players), min(FRIENDS_EACH + 1, players))
        lists[p] = [o for o in others if o != p][:FRIENDS_EACH]
    return lists


async def set_friends(
    api: str, admin_key: str, lists: dict[int, list[int]], *, concurrency: int, timeout_s: float
) -> None:
    """Writes the friends lists, a few at a time; a refused key stops the run."""
    gate = asyncio.Semaphore(min(concurrency, 16))
    headers = {"Authorization": f"Bearer {admin_key}"}
    async with httpx.AsyncClient(base_url=api, headers=headers, timeout=timeout_s) as http:

        async def one(p: int, friends: list[int]) -> None:
            body = {"friends": [player_id(f) for f in friends]}
            async with gate:
                try:
                    r = await http.put(f"/v1/players/{player_id(p)}/friends", json=body)
                except httpx.TransportError as e:
                    raise SetupError(f"setting friends: no answer from {api} ({e!r})") from e
            if r.status_code in (401, 403):
                raise SetupError(f"--admin-key: refused ({r.status_code}): not an admin's key")
            if r.status_code >= 300:
                raise SetupError(f"setting friends: {r.status_code} {r.text[:300]}")

        done = await asyncio.gather(*(one(p, f) for p, f in lists.items()), return_exceptions=True)
        for outcome in done:
            if isinstance(outcome, BaseException):
                raise outcome
