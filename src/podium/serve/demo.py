"""``podium serve --demo``: simulated game servers and players, so that a newcomer's first
page shows a live, moving board.

Everything goes through the service like a real deployment's traffic: the simulator
creates a game-server key for itself, names its players and gives them avatars and friends
with ``set_profile``/``set_friends``, then records matches with ``matches.record`` a few
times a second. Its results are real results in the configured store; point ``--config`` at
a scratch file to keep them out of one that matters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from podium.domain.models import Mode, PlayerResult, Profile
from podium.errors import PodiumError, Unavailable
from podium.service.wiring import Service

log = logging.getLogger("podium.demo")

_FIRST = ["Ash", "Bolt", "Cinder", "Dusk", "Ember", "Frost", "Gale", "Jade", "Nova", "Onyx"]
_FIRST += ["Quill", "Rune", "Sable", "Tide", "Umber", "Vex", "Wisp", "Yarrow", "Zephyr", "Kite"]
_SECOND = ["fox", "wolf", "hawk", "lynx", "otter", "raven", "viper", "crane", "moth", "bear"]
AVATARS = 12  # static/avatars/0.svg .. 11.svg, served by the app itself


@dataclass(frozen=True, slots=True)
class DemoPlayer:
    player_id: str
    name: str
    skill: float  # scales the points of every match they play
    activity: float  # how often they are picked for a match


def make_players(n: int, rng: random.Random) -> list[DemoPlayer]:
    out = []
    for i in range(n):
        name = f"{rng.choice(_FIRST)}{rng.choice(_SECOND).capitalize()}{rng.randint(1, 99)}"
        out.append(
            DemoPlayer(f"demo_{i:04d}", name, rng.lognormvariate(0, 0.35), rng.uniform(0.2, 1))
        )
    return out


class Simulator:
    def __init__(
        self,
        podium: Service,
        *,
        players: int = 300,
        matches_per_s: float = 4.0,
        seed: int | None = None,
    ) -> None:
        self._podium = podium
        self._rng = random.Random(seed)
        self._players = make_players(players, self._rng)
        self._interval = 1.0 / matches_per_s
        self._mode = self._pick_mode()

    def _pick_mode(self) -> Mode:
        s = self._podium.settings
        fed = [m for m in s.modes if any(b.counts(m.name) for b in s.boards)]
        return (fed or list(s.modes))[0]

    async def setup(self) -> str:
        """Names, avatars and friends for every simulated player; returns the key."""
        ids = [p.player_id for p in self._players]
        for k, p in enumerate(self._players):
            # A relative URL to an avatar the app serves itself, so the demo needs no network.
            avatar = f"/static/avatars/{k % AVATARS}.svg"
            await self._podium.player_admin.set_profile(Profile(p.player_id, p.name, avatar))
            await self._podium.player_admin.set_friends(p.player_id, self._rng.sample(ids, 8))
        _, secret = await self._podium.keys.create("demo-game-server", [self._mode.name], False)
        return secret

    def match(self) -> tuple[int, int, list[PlayerResult]]:
        """(endedAt, duration, results) of one match, within the mode's limits."""
        m, rng = self._mode, self._rng
        size = rng.randint(2, min(8, len(self._players)))
        weights = [p.activity for p in self._players]
        picked: dict[str, DemoPlayer] = {}
        while len(picked) < size:
            p = rng.choices(self._players, weights)[0]
            picked[p.player_id] = p
        results = [
            PlayerResult(
                pid, _clamp(round(p.skill * rng.uniform(5, 120)), m.min_points, m.max_points)
            )
            for pid, p in picked.items()
        ]
        duration = _clamp(rng.randint(240, 900), m.min_duration_s, m.max_duration_s)
        return int(self._podium.clock.now()), duration, results

    async def run(self) -> None:
        key_secret = await self.setup()
        key = await self._podium.keys.authenticate(key_secret)
        server = self._podium.settings.server
        log.info(
            "demo: %d simulated players, a match every %.2fs in mode %s; watch them at "
            "http://%s:%d/",
            len(self._players),
            self._interval,
            self._mode.name,
            server.host,
            server.port,
        )
        burst = 40  # a first burst fills the board before the first frame reaches a page
        while True:
            ended_at, duration, results = self.match()
            try:
                match_id = f"demo-{secrets.token_hex(8)}"
                await self._podium.matches.record(
                    key, match_id, self._mode.name, ended_at, duration, results
                )
            except Unavailable as e:
                log.warning("demo: %s; pausing", e)
                await asyncio.sleep(2)
            except PodiumError as e:
                # An hourly cap or a tight mode: the simulator is a guest, so it skips the match.
                log.debug("demo: match refused: %s", e)
            if burst:
                burst -= 1
            else:
                await asyncio.sleep(self._rng.expovariate(1 / self._interval))


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


@asynccontextmanager
async def running(podium: Service, *, enabled: bool = True) -> AsyncIterator[None]:
    """The simulator for the app's lifetime (nothing when not ``enabled``)."""
    if not enabled:
        yield
        return

    async def main() -> None:
        try:
            await Simulator(podium).run()
        except Exception:
            # Logged when it happens, not at shutdown: the server keeps serving without it.
            log.exception("demo: the simulator stopped")

    task = asyncio.create_task(main(), name="demo")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
