"""Reads of a board split across index shards, through the API, in both configurations
(embedded: 4 in-process shards; production: 16 hash-tag shards on Redis), with the aggregator
running in the server as ``podium serve`` runs it.

The exact top is tiny here (5), so that most players fall below it: their ranks are
estimated, labelled ``exact: false`` with an interval that holds the true rank, and have no
neighbors; a board that chose ``ranks_below_top = "exact"`` counts them on every shard.
"""

from __future__ import annotations

from typing import Any

import pytest

from podium.domain.boards import in_board_order
from podium.domain.sharding import shard_tag
from podium.index.redis.cluster import cluster_client
from podium.index.redis.keys import Keys
from podium.ports import BoardKey
from tests.integration.conftest import Api

BOARDS = [
    {"name": "week", "window": "week", "exact_top": 5},
    {"name": "flat", "window": "week", "exact_top": 5, "ranks_below_top": "exact"},
]
PLAYERS = 60


async def split_api(make_api: Any, config_kind: str, **index: Any) -> Api:
    shards = 4 if config_kind == "embedded" else 16
    api: Api = await make_api(index={"shards": shards, **index}, boards=BOARDS)
    # Distinct points, two players a match; some share points (ties broken by time, then id).
    for i in range(0, PLAYERS, 2):
        r = await api.submit(f"m{i}", [(f"p{i:03d}", 10 + i // 2 * 3), (f"p{i + 1:03d}", 7 + i)])
        assert r.status_code == 200, r.text
    await api.settle()
    await counted_whole(api)
    return api


async def counted_whole(api: Api) -> None:
    """Wait for the aggregator's snapshot to count every player. One taken before the last
    results reached the board may still be the newest after ``settle`` (its top then ranks
    the players it held, as of its ``asOf``); the next cycle's counts them all."""

    async def whole() -> bool:
        api.podium.reads.clear_cache()
        r = await api.client.get("/v1/boards/week/distribution", params={"buckets": 4})
        assert r.status_code == 200, r.text
        return bool(r.json()["players"] == PLAYERS)

    assert await api.until(whole, timeout=15), "the snapshot never counted every player"


async def expected_order(api: Api) -> list[str]:
    """The whole board in the one order, from the store (the record)."""
    spec = api.podium.boards.board("week")
    w = api.podium.boards.window(spec, None)
    rows = []
    async for batch in api.backends.store.standings("week", w.id):
        rows += [(s.player_id, spec.score(s.tally, w)) for s in batch]
    return [p for p, _ in in_board_order(rows, True)]


async def estimated(api: Api, player: str) -> dict[str, Any]:
    async def ready() -> dict[str, Any] | None:
        api.podium.reads.clear_cache()
        r = await api.client.get(f"/v1/boards/week/players/{player}")
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body if body["exact"] is False else None

    # The aggregator publishes within about a second of starting.
    body = await api.until(ready, timeout=10)
    assert body, "no estimated rank: the aggregator published no snapshot"
    return body  # type: ignore[no-any-return]


async def test_ranks_on_a_split_board(make_api: Any, config_kind: str) -> None:
    api = await split_api(make_api, config_kind)
    order = await expected_order(api)
    assert len(order) == PLAYERS
    low = order[40]
    body = await estimated(api, low)
    # Estimated: labelled, an interval that holds the true rank, no neighbors, as of a time.
    assert body["rankLow"] <= 41 <= body["rankHigh"], body
    assert body["rankLow"] <= body["rank"] <= body["rankHigh"]
    assert body["rankLow"] > 5  # never shown inside the exact top
    assert body["neighbors"] == [] and "asOf" in body and body["topPercent"] > 0
    # The top page is the exact merged top.
    page = await api.page("week")
    assert [e["playerId"] for e in page["entries"]] == order[:5]
    assert [e["rank"] for e in page["entries"]] == [1, 2, 3, 4, 5]
    # Inside the top: exact, with exact neighbors from every shard.
    r = await api.client.get(f"/v1/boards/week/players/{order[3]}", params={"neighbors": 2})
    mine = r.json()
    assert mine["exact"] is True and mine["rank"] == 4
    assert [n["playerId"] for n in mine["neighbors"]] == order[1:6]
    # Neighbors that stay inside the top come from the snapshot alone, as of its asOf.
    r = await api.client.get(f"/v1/boards/week/players/{order[2]}", params={"neighbors": 1})
    mine = r.json()
    assert mine["exact"] is True and mine["rank"] == 3 and "asOf" in mine
    assert [n["playerId"] for n in mine["neighbors"]] == order[1:4]
    assert [n["rank"] for n in mine["neighbors"]] == [2, 3, 4]
    # A board that counts below the top: exact everywhere, neighbors too.
    r = await api.client.get(f"/v1/boards/flat/players/{low}", params={"neighbors": 1})
    flat = r.json()
    assert flat["exact"] is True and flat["rank"] == 41 and "rankLow" not in flat
    assert [n["playerId"] for n in flat["neighbors"]] == order[39:42]
    # Friends: each one's global rank by the same rules, labelled.
    friends = [order[0], order[30], order[50]]
    r = await api.client.put(
        f"/v1/players/{low}/friends", json={"friends": friends}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204, r.text
    r = await api.client.get(f"/v1/boards/week/players/{low}/friends")
    entries = r.json()["entries"]
    assert [e["playerId"] for e in entries] == [order[0], order[30], low, order[50]]
    assert entries[0]["globalRank"] == 1 and entries[0]["globalExact"] is True
    assert all(e["globalExact"] is False for e in entries[1:])
    # Unknown players are still a 404, split or not.
    r = await api.client.get("/v1/boards/week/players/nobody")
    assert r.status_code == 404


async def test_the_distribution_of_a_split_board_comes_from_the_histogram(
    make_api: Any, config_kind: str
) -> None:
    api = await split_api(make_api, config_kind)
    await estimated(api, (await expected_order(api))[50])  # a snapshot is out
    r = await api.client.get("/v1/boards/week/distribution", params={"buckets": 4})
    body = r.json()
    assert r.status_code == 200 and body["exact"] is False
    assert body["players"] == PLAYERS
    assert sum(b["count"] for b in body["buckets"]) == PLAYERS
    assert all(b["count"] >= 0 for b in body["buckets"])
    # The board that counts exactly below its top has no snapshot histogram: exact counts.
    r = await api.client.get("/v1/boards/flat/distribution", params={"buckets": 4})
    assert r.json()["exact"] is True and r.json()["players"] == PLAYERS


@pytest.mark.parametrize("config_kind", ["production"])
async def test_ranks_on_redis_cluster(
    make_api: Any, config_kind: str, redis_cluster: Any, cluster_prefix: str
) -> None:
    """The same reads with the 16 shards spread over a Redis Cluster's three primaries, and
    rank reads from its replicas."""
    api = await split_api(
        make_api, config_kind, url=redis_cluster.url, prefix=cluster_prefix, read_from_replicas=True
    )
    order = await expected_order(api)
    body = await estimated(api, order[45])
    assert body["rankLow"] <= 46 <= body["rankHigh"], body
    page = await api.page("week")
    assert [e["playerId"] for e in page["entries"]] == order[:5]
    r = await api.client.get(f"/v1/boards/flat/players/{order[45]}", params={"neighbors": 1})
    assert r.json()["rank"] == 46 and r.json()["exact"] is True
    assert [n["playerId"] for n in r.json()["neighbors"]] == order[44:47]
    # A ban reaches the player's shard: gone from the board, and stays gone.
    r = await api.client.post(
        f"/v1/admin/players/{order[0]}/ban",
        json={"reason": "test"},
        headers=api.auth(api.admin_key),
    )
    assert r.status_code in (200, 204), r.text

    async def gone() -> bool:
        r = await api.client.get(f"/v1/boards/flat/players/{order[0]}")
        return r.status_code == 404

    # Off the shards at once; off the top once the aggregator's next snapshot is out (a
    # second or so: the snapshot is what top reads and pages are served from).
    assert await api.until(gone, timeout=5)
    r = await api.client.get(f"/v1/boards/flat/players/{order[1]}")
    assert r.json()["rank"] == 1
    page = await api.page("flat")
    assert order[0] not in [e["playerId"] for e in page["entries"]]
    # A rebuild fills every shard from the store (the banned player stays out), and each
    # shard's part of the window expires as a window's key does.
    spec = api.podium.boards.board("flat")
    w = api.podium.boards.window(spec, None)
    key = BoardKey("flat", w.id)
    client = cluster_client(redis_cluster.url)
    try:
        for n in range(16):
            await client.delete(Keys(cluster_prefix, shard_tag(n)).board(key))
        assert await api.backends.index.count(key) == 0
        assert await api.podium.rebuilds.rebuild("flat", w.id) == PLAYERS - 1
        rows = await api.backends.index.page(key, 0, PLAYERS, descending=True)
        assert [p for p, _ in rows] == order[1:]
        ttls = [await client.ttl(Keys(cluster_prefix, shard_tag(n)).board(key)) for n in range(16)]
        assert all(t > 0 for t in ttls), ttls
    finally:
        await client.aclose()
