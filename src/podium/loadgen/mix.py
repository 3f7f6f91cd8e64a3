"""The traffic of a load run, as pure functions of a seeded ``random.Random``: when matches
arrive, who plays them, for how many points, and the reads each player makes afterwards.

The figures are the seed's, as ``podium plan`` counts them (domain/capacity.py): a *result*
is one player's part in a match, and each result is followed by ``reads_per_match`` reads by
that player: the top page, their rank with neighbors, their friends.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

# The kinds of read a player makes after a match; also the routes the summary reports.
TOP, RANK, FRIENDS = "top", "rank", "friends"
READS = (TOP, RANK, FRIENDS)
# A match's points and duration: inside the default mode's ranges (0..1,000,000 points,
# 0..86,400 s), and never negative, so that a summed total only rises (verify relies on it).
POINTS = (10, 1000)
DURATION_S = (60, 900)


class MixError(ValueError):
    """A traffic setting that cannot be run; the message names it."""


@dataclass(frozen=True)
class Mix:
    """The reads after each result: ``reads_per_match`` of them on average, each a top page,
    a rank with neighbors or a friends board in proportion to the weights. The default
    splits the seed's 3.5 between the top page and the rank, with a fifth to friends."""

    reads_per_match: float = 3.5
    top: float = 0.4
    rank: float = 0.4
    friends: float = 0.2

    def __post_init__(self) -> None:
        for name in ("reads_per_match", *READS):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise MixError(f"{name}: expected a number of 0 or more, got {value}")
        if self.reads_per_match > 0 and self.top + self.rank + self.friends == 0:
            raise MixError("the mix: at least one of top, rank, friends above 0")

    def shares(self) -> dict[str, float]:
        """Each kind's share of the reads, summing to 1 (all 0 when there are no reads)."""
        total = self.top + self.rank + self.friends
        if total == 0:
            return dict.fromkeys(READS, 0.0)
        return {TOP: self.top / total, RANK: self.rank / total, FRIENDS: self.friends / total}

    def without_friends(self) -> Mix:
        """No friends reads (no admin key to set friends lists): their share goes to the top
        page and the rank in proportion, so that reads a result stay as many."""
        if self.top + self.rank == 0:
            return replace(self, top=1.0, rank=1.0, friends=0.0)
        return replace(self, friends=0.0)

    def draw(self, rng: random.Random) -> list[str]:
        """The reads after one result: ``floor(reads_per_match)`` of them, one more with the
        fraction's probability (3.5: three or four, as often), each of a kind drawn by
        weight; so both the count and the kinds average what was asked."""
        whole = math.floor(self.reads_per_match)
        n = whole + (1 if rng.random() < self.reads_per_match - whole else 0)
        if n == 0:
            return []
        return rng.choices(READS, weights=(self.top, self.rank, self.friends), k=n)


def parse_mix(text: str, reads_per_match: float) -> Mix:
    """``top=0.4,rank=0.4,friends=0.2`` (weights, any scale; a kind left out weighs 0)."""
    weights = dict.fromkeys(READS, 0.0)
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in weights:
            raise MixError(f"--mix {item!r}: expected KIND=WEIGHT with KIND one of {READS}")
        try:
            weights[name] = float(value)
        except ValueError:
            raise MixError(f"--mix {item!r}: the weight is not a number") from None
    return Mix(reads_per_match, weights[TOP], weights[RANK], weights[FRIENDS])


def derived_rate(
    players: int, matches_per_player: float, players_per_match: int, duration_s: float, peak: float
) -> float:
    """Matches a second when no ``--rate`` is given: each player plays
    ``matches_per_player`` matches over the run at the average, times ``peak``."""
    if players < players_per_match:
        raise MixError(f"--players {players}: fewer than --players-per-match {players_per_match}")
    if duration_s <= 0:
        raise MixError("--duration: expected more than 0 s to derive a rate from")
    rate = players * matches_per_player * peak / players_per_match / duration_s
    if rate <= 0:
        raise MixError("--matches-per-player and --peak: expected a rate above 0")
    return rate


def arrivals(rate: float, rng: random.Random) -> Iterator[float]:
    """When each match is due, in seconds from the start: a Poisson process of ``rate`` a
    second (exponential gaps). The load is open loop: a match is due at its time whether or
    not the ones before it were answered, and its latency counts from that time, not from
    when it was sent, so a server that stalls is charged for every match that waited on it
    (no coordinated omission: a closed loop would send less while the server is slow and
    report the few requests that got through as fast)."""
    if not (rate > 0 and math.isfinite(rate)):
        raise MixError(f"rate: expected matches a second above 0, got {rate}")
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        yield t


def draw_match(rng: random.Random, players: int, per_match: int) -> list[tuple[int, int]]:
    """A match: ``per_match`` distinct players (their numbers), each with their points."""
    return [(p, rng.randint(*POINTS)) for p in rng.sample(range(players), per_match)]


def draw_duration(rng: random.Random) -> int:
    return rng.randint(*DURATION_S)


def player_id(n: int) -> str:
    """The same numbers give the same ids in every run, so runs build on one board."""
    return f"lg-p{n:07d}"
