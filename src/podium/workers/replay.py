"""The log's last seconds applied once more, by an updater of its own: ``podium worker
--replay-since`` before the roles start, and the mender after an index shard lost writes
(``mender.py``). With some shards only, the changes written to them (``on_shards``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

from podium.domain import cohorts
from podium.domain.models import Change, Message
from podium.domain.sharding import shard_of
from podium.errors import Unavailable
from podium.service.tournaments import Specs
from podium.workers.runner import Needs
from podium.workers.updater import Updater

log = logging.getLogger("podium.updater")


def on_shards(shards: Collection[int], count: int) -> Callable[[Message], bool]:
    """Whether a change is written to one of the index shards ``shards`` (of ``count``):
    a player's by the player (``domain.sharding.shard_of``), a league cohort's by the
    cohort's own shard (``domain.cohorts.cohort_shard``), as the split index routes them."""
    wanted = frozenset(shards)

    def keep(m: Message) -> bool:
        if isinstance(m, Change) and cohorts.parse(m.window) is not None:
            return cohorts.cohort_shard(m.board, m.window, count) in wanted
        return shard_of(m.player_id, count) in wanted

    return keep


async def replay(n: Needs, since_s: float, shards: Collection[int] | None = None) -> int:
    """Apply once more everything the log committed in the last ``since_s`` seconds
    (``podium worker --roles updater --replay-since``), before the roles start: what
    mends a board whose index lost writes. With ``shards``, only the changes written to
    those index shards, where the log can leave the others out (``ChangeLog.replay``).
    Returns how many changes were applied."""
    count = len(n.shards)
    keep = None if shards is None or count <= 1 else on_shards(shards, count)
    view = await n.log.replay(n.clock.now() - since_s, keep)
    specs = Specs(n.store, n.clock)
    # Fetching only when it holds nothing, as a replay's one consumer must (ChangeLog.replay)
    up = Updater(n.settings, n.store, n.index, n.copy, view, n.clock, specs, ahead=False)
    applied, backoff = 0, 0.05
    try:
        while True:
            try:
                done = await up.step()
            except Unavailable as e:
                log.warning("replay: %s; retrying in %.2fs", e, backoff)
                await asyncio.sleep(backoff)
                backoff = min(5.0, backoff * 2)
                continue
            applied += done
            if done < max(1, n.settings.workers.batch):
                break
    finally:
        await up.close()
        await view.close()
    log.info("replayed %d changes of the last %.0fs", applied, since_s)
    return applied
