"""Two erasers at once on one erasure (issue 35's eraser role run by two processes): the
record's lease gives it to one, so the counts are exactly those of one eraser, not doubled;
an eraser that lost its lease mid-step stops, and the new holder finishes from the last
step noted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from podium import bootstrap
from podium.config.settings import Settings
from podium.domain.models import PlayerResult, Profile
from podium.service.erasure import Erasures
from tests.integration.conftest import KINDS_WITH_SPLIT, Backends
from tests.integration.test_erasure import KEY, _settings, _store_hits
from tests.integration.test_freeze import DAY, Clock, _drain, _midweek

CONFIG_KINDS = KINDS_WITH_SPLIT
ONE, TWO = "zq-lease-one", "zq-lease-two"  # erased by one eraser, then by two at once


def _another(b: bootstrap.Backends) -> Erasures:
    """A second eraser on the same backends, as another process running the role has."""
    e = b.podium.erasures
    return Erasures(b.settings, e.store, e.indexes, e.files, e.clock, e.log)


async def _played(b: bootstrap.Backends, day: float) -> None:
    """ONE and TWO alike: three results each (two today, one yesterday), a profile, a
    friend; and a third player beside them."""
    for i, when in enumerate([day + 60, day + 120, day - DAY + 60]):
        for n, p in enumerate((ONE, TWO, "other")):
            await b.podium.matches.record(
                KEY, f"m{i}-{n}", "default", when, 60, [PlayerResult(p, 10 + i)]
            )
    for p in (ONE, TWO):
        await b.podium.player_admin.set_profile(Profile(p, "Name"))
        await b.podium.player_admin.set_friends(p, ["other"])
    await _drain(b)


async def test_two_erasers_at_once_count_what_one_does(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> None:
    settings: Settings = _settings(config_kind, backend_urls, tmp_path, "http://127.0.0.1:9/")
    day = _midweek(30)
    b = bootstrap.build(settings, Clock(day + 3600))
    await b.start()
    try:
        await _played(b, day)
        first, second = b.podium.erasures, _another(b)
        assert first.owner != second.owner
        alone = await first.request(ONE, "k")
        assert await first.erase_due() == 1
        one = await first.status(alone.id)
        assert one is not None and one.done_at is not None

        both = await first.request(TWO, "k")
        # The role's loop in each, and ``--wait`` in the second (it waits for the holder).
        taken = await asyncio.gather(first.erase_due(), second.erase_due(), second.carry_out(both))
        assert sorted(taken[:2]) == [0, 1]
        two = await first.status(both.id)
        assert two is not None and two.done_at is not None
        assert two.counts == one.counts and one.counts["results"] == 3
        assert await _store_hits(settings, TWO) == []
    finally:
        await b.close()


async def test_an_eraser_that_loses_its_lease_mid_step_leaves_the_rest_to_the_holder(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> None:
    """The first eraser's lease runs out during its settle step (its renewals stop: a
    stalled process); the second takes the record over and finishes it; the first, at its
    next renewal, gives the step up and notes nothing."""
    settings = _settings(config_kind, backend_urls, tmp_path, "http://127.0.0.1:9/")
    day = _midweek(30)
    clock = Clock(day + 3600)
    b = bootstrap.build(settings, clock)
    await b.start()
    try:
        await _played(b, day)
        first, second = b.podium.erasures, _another(b)
        first.lease_s = second.lease_s = 0.6
        first.settle_s = 5.0  # long beside the lease, and beside the second eraser's run
        stalled = asyncio.Event()
        renew = first.store.renew_erasure

        async def stalling(*args: object, **kw: object) -> bool:
            if stalled.is_set():
                return True  # as if renewed: the process does not know it stalled
            return await renew(*args, **kw)  # type: ignore[arg-type]

        e = await first.request(TWO, "k")
        running = asyncio.ensure_future(first.erase_due())
        while (await first.status(e.id)).step.value != "settle":  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
        stalled.set()
        first.store.renew_erasure = stalling  # type: ignore[method-assign]
        clock.t += 10  # its lease run out
        second.settle_s = 0.0
        await second.carry_out(e)
        done = await second.status(e.id)
        assert done is not None and done.done_at is not None
        counts = dict(done.counts)
        first.store.renew_erasure = renew  # type: ignore[method-assign]
        assert await running == 1  # given up at its next note: nothing written
        again = await second.status(e.id)
        assert again is not None and again.counts == counts and counts["results"] == 3
    finally:
        await b.close()
