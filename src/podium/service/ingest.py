"""Finished matches read from a topic (``[[ingest]]``), recorded as the HTTP route records
them: the record's key is the match id, its value the body of
``POST /v1/matches/{matchId}/results``, read by the route's own models
(``service/reports.py``) and recorded by the route's own use case (``Matches.record_all``:
the same checks, caps, claim of the match and one transaction per player) under the
game-server key the table names.

A record refused as the route would refuse it (a 4xx) is answered with the problem+json the
route would answer; an outage or a bug (a 5xx) is raised, so that the record is tried again
rather than set aside: nothing is lost, and the topic's lag says it is stuck.

Knows the ports, never an adapter.
"""

from __future__ import annotations

from typing import Any

from podium.domain.models import ApiKey, PlayerResult, Scope
from podium.domain.windows import to_epoch
from podium.errors import ConfigError, InvalidInput, PodiumError
from podium.ports import Clock
from podium.service.credentials import Keys
from podium.service.matches import Matches
from podium.service.reports import problem_of, read_report


class KeyMissing(ConfigError):
    """The table's key is not a live game-server key: the topic waits (nothing is refused
    for it, since no record is at fault) until the key is made or the setting mended."""


class Ingest:
    def __init__(self, matches: Matches, keys: Keys, clock: Clock, key_cache_s: float) -> None:
        self._matches = matches
        self._keys = keys
        self._clock = clock
        self._cache_s = key_cache_s
        self._held: dict[str, tuple[float, ApiKey]] = {}

    async def key(self, name: str) -> ApiKey:
        """The live game-server key whose id or name is ``name``: looked up again every
        ``server.key_cache_s``, so that a revocation stops the topic as it stops the route."""
        now = self._clock.now()
        held = self._held.get(name)
        if held is not None and now - held[0] < self._cache_s:
            return held[1]
        keys = [
            k
            for k in await self._keys.all()
            if (k.id == name or k.name == name) and not k.revoked and k.scope is Scope.GAME
        ]
        by_id = [k for k in keys if k.id == name]
        if by_id:
            keys = by_id
        if not keys:
            raise KeyMissing(
                f"ingest.key: no live game-server key named {name!r} (podium keys create "
                f"--name {name} --modes ...; podium keys list)"
            )
        if len(keys) > 1:
            raise KeyMissing(
                f"ingest.key: {len(keys)} live game-server keys are named {name!r} (ids "
                f"{', '.join(k.id for k in keys)}): name one by its id"
            )
        self._held[name] = (now, keys[0])
        return keys[0]

    async def take(
        self, key: ApiKey, match_id: bytes | None, value: bytes | None
    ) -> dict[str, Any] | None:
        """Record one record's match for ``key``: None when it is recorded (or was before:
        a record seen again changes nothing), else the problem+json it is refused with."""
        try:
            report = read_report(value)
            await self._matches.record_all(
                key,
                _match_id(match_id),
                report.mode,
                to_epoch(report.endedAt),
                report.durationSeconds,
                [PlayerResult(r.playerId, r.points, r.metadata) for r in report.results],
            )
        except PodiumError as e:
            if 400 <= e.status < 500:
                return problem_of(e)
            raise
        return None


def _match_id(key: bytes | None) -> str:
    """The record's key as the match id (the service checks its shape, as the route's path)."""
    if key is None:
        raise InvalidInput("matchId: the record has no key (the match id)")
    try:
        return key.decode()
    except UnicodeDecodeError:
        raise InvalidInput("matchId: the record's key is not UTF-8 text") from None
