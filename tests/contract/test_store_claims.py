"""The claim of a match on every store: a claim with no result can be released (a request
refused after it, or one whose request died before its writes, past its lease), and a
record never stores a result under another key's claim."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from podium.domain.models import MatchQuery
from podium.errors import Forbidden
from podium.ports import ScoreStore
from tests.conftest import stored_results
from tests.contract import test_store as contract
from tests.contract.test_store import (  # noqa: F401 - the split fixtures, shared
    NOW,
    T0,
    claim,
    result,
    split2_url,
    split3_url,
    targets,
)


@pytest.fixture(params=["sqlite", "postgres", "split2", "split3"])
def kind_and_url(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param, request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def store(kind_and_url: tuple[str, str]) -> AsyncIterator[ScoreStore]:
    """A fresh, migrated store of every backend, as the store contract's own fixture."""
    s = contract.make(*kind_and_url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def test_open_match_says_when_the_owner_claimed(store: ScoreStore) -> None:
    first = await store.open_match(MatchQuery("m1", "k1", NOW, ["a"], "ranked", 5, None))
    assert (first.owner, first.claimed, first.claimed_at) == ("k1", True, NOW)
    other = await store.open_match(MatchQuery("m1", "k2", NOW + 9, ["a"], "ranked", 5, None))
    assert (other.owner, other.claimed, other.claimed_at) == ("k1", False, NOW)
    bare = await store.open_match(MatchQuery("m2", "k2", NOW + 1, [], "ranked", 5, None))
    assert bare.claimed_at == NOW + 1


async def test_a_record_refuses_a_match_another_key_claimed(store: ScoreStore) -> None:
    # k1's request read the match as free (or as its own), and k2's claim came before its
    # write: k1's result is refused, whichever database its player is on.
    t = targets(T0 + 100)
    for p in ("a", "b", "c", "d"):
        assert await claim(store, f"m-{p}", "k2", NOW) == "k2"
        with pytest.raises(Forbidden, match="another game server"):
            await store.record(result(f"m-{p}", 10, player=p), t, NOW, None)
        assert await stored_results(store, f"m-{p}", [p]) == {}
    # k2 itself records there as usual
    await store.record(result("m-a", 10, player="a", key="k2"), t, NOW, None)
    assert set(await stored_results(store, "m-a", ["a"])) == {"a"}


async def test_a_dead_claim_released_is_claimed_by_another_key(store: ScoreStore) -> None:
    # A request claimed m1 and died before its writes: the claim is all that is left.
    t = targets(T0 + 100)
    dead = await store.open_match(MatchQuery("m1", "k1", NOW, ["a"], "ranked", 5, None, t))
    assert dead.claimed
    later = await store.open_match(MatchQuery("m1", "k2", NOW + 99, ["a"], "ranked", 5, None))
    assert later.owner == "k1" and later.claimed_at == NOW
    assert await store.release_match("m1", "k1", NOW)
    again = await store.open_match(MatchQuery("m1", "k2", NOW + 99, ["a"], "ranked", 5, None, t))
    assert (again.owner, again.claimed) == ("k2", True)
    await store.record(result("m1", 7, player="a", key="k2"), t, NOW + 99, None, again.handle("a"))
    # the dead request's record, had it come after all, is refused: the match is k2's
    with pytest.raises(Forbidden):
        await store.record(result("m1", 10, player="b"), t, NOW + 99, None)
    assert set(await stored_results(store, "m1", ["a", "b"])) == {"a"}


async def test_a_release_racing_records_never_strands_a_result(store: ScoreStore) -> None:
    # Releases of a claim race its own key's records: each record either commits before the
    # release looks (and the claim stays), or claims the match again; no result is ever left
    # without its key's claim, so another key never gets the match.
    t = targets(T0 + 100)
    for m in range(6):
        mid = f"m{m}"
        opened = await store.open_match(
            MatchQuery(mid, "k1", NOW, ["a", "b", "c"], "ranked", 5, None, t)
        )
        await asyncio.gather(
            store.release_match(mid, "k1", NOW),
            *(
                store.record(result(mid, 5, player=p), t, NOW, None, opened.handle(p))
                for p in ("a", "b", "c")
            ),
            store.release_match(mid, "k1", NOW),
        )
        assert set(await stored_results(store, mid, ["a", "b", "c"])) == {"a", "b", "c"}
        assert await claim(store, mid, "k2", NOW + 1) == "k1"
