"""``UpkeepRecords`` on Redis: one hash, ``<prefix>:{upkeep}`` (one slot, so a Redis Cluster
holds it on one node), a field per run holding its JSON and the time it runs out. A run
renews its field every second or so; a reader skips a field past its time, and a writer
removes those. The hash itself expires a minute after its last write, so a deployment
with no run holds nothing."""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, fields
from typing import Any

from podium.index.redis.errors import translated
from podium.ports.upkeep import Running, UpkeepRecords

KEEP_S = 60  # the hash outlives its last write by this much
KNOWN = [f.name for f in fields(Running)]


class RedisUpkeep(UpkeepRecords):
    def __init__(self, client: Any, prefix: str) -> None:
        self._r = client
        self.key = f"{prefix}:{{upkeep}}"

    async def publish(self, run: Running, ttl_s: float) -> None:
        until = run.updated_at + ttl_s
        text = json.dumps({"until": until, "run": asdict(run)}, separators=(",", ":"))
        with translated:
            held = await self._r.hgetall(self.key)
            gone = [f for f, v in held.items() if _until(v) < run.updated_at and f != run.id]
            pipe = self._r.pipeline(transaction=False)  # one key: one slot, one node
            if gone:
                pipe.hdel(self.key, *gone)
            pipe.hset(self.key, run.id, text)
            pipe.expire(self.key, int(ttl_s) + KEEP_S)
            await pipe.execute()

    async def running(self, now: float) -> list[Running]:
        with translated:
            held = await self._r.hgetall(self.key)
        out = []
        for v in held.values():
            # A field another version of podium wrote is read for what this one knows of it.
            with contextlib.suppress(ValueError, KeyError, TypeError):
                found = json.loads(v)
                if found["until"] > now:
                    out.append(Running(**{k: found["run"][k] for k in KNOWN if k in found["run"]}))
        return sorted(out, key=lambda r: -r.started_at)


def _until(v: bytes | str) -> float:
    try:
        return float(json.loads(v)["until"])
    except (ValueError, KeyError, TypeError):
        return 0.0
