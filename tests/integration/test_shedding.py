"""Results before reads, through the app: as the load gate's level rises, reads are shed
class by class (far, friends, the top page unless it has a copy, a player's own rank), each
as 503 problem+json with Retry-After and counted; results, the admin's calls, health and
metrics never are. The gate is made to see saturation through its own seam (``hold``: the
figures pinned), so nothing here depends on how fast the machine is."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from podium import metrics
from podium.api.shedding import LoadGate
from podium.domain.admission import FAR, FRIENDS, PAGE, RANK, TOP
from podium.domain.models import Scope
from tests.integration.conftest import Api

CONFIG_KINDS = ("embedded",)  # the gate is in front of the service: the backends do not matter

READS = {
    FAR: "/v1/boards/week/distribution",
    FRIENDS: "/v1/boards/week/players/p1/friends",
    PAGE: "/v1/boards/week?limit=10",
    RANK: "/v1/boards/week/players/p1?neighbors=2",
}


def gate_of(api: Api) -> LoadGate:
    transport = api.client._transport
    assert isinstance(transport, httpx.ASGITransport)
    gate: LoadGate = transport.app.state.shed_gate  # type: ignore[attr-defined]
    return gate


def shed_count(route_class: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "podium_reads_shed_total", {"route_class": route_class}
    )
    return value or 0.0


async def test_reads_are_shed_class_by_class_and_results_never(make_api: type) -> None:
    api: Api = await make_api()
    gate = gate_of(api)
    _, ops = await api.podium.keys.create("ops", [], scope=Scope.OPS)
    assert (await api.submit("m1", [("p1", 30), ("p2", 20)])).status_code == 200
    friends = await api.client.put(
        "/v1/players/p1/friends", json={"friends": ["p2"]}, headers=api.auth(api.admin_key)
    )
    assert friends.status_code == 204
    await api.settle()
    for path in READS.values():  # served, and the top page's copy kept
        assert (await api.client.get(path)).status_code == 200, path

    before = {c: shed_count(c) for c in READS}
    stale_before = metrics.REGISTRY.get_sample_value("podium_reads_stale_total") or 0.0
    expected_shed = dict.fromkeys(READS, 0)
    try:
        for level, shed in [
            (0, set()),
            (1, {FAR}),
            (2, {FAR, FRIENDS}),
            (3, {FAR, FRIENDS, PAGE}),
            (4, {FAR, FRIENDS, PAGE, RANK}),
        ]:
            assert gate.hold(lag_s=level * gate.limits.lag_s[0]) == level
            for route_class, path in READS.items():
                r = await api.client.get(path)
                if route_class not in shed:
                    assert r.status_code == 200, (level, path, r.text)
                elif route_class == PAGE:
                    # The top page read before is answered from its copy: stale is fine.
                    assert r.status_code == 200, r.text
                    assert "age" in r.headers
                    assert [e["playerId"] for e in r.json()["entries"]] == ["p1", "p2"]
                else:
                    assert r.status_code == 503, (level, path)
                    assert r.headers["content-type"] == "application/problem+json"
                    assert r.headers["retry-after"] == "1"
                    body = r.json()
                    assert body["status"] == 503
                    assert "busy" in body["detail"] and "results come first" in body["detail"]
                    expected_shed[route_class] += 1
            # A top page not read before: no copy to serve (each level a limit of its own).
            uncopied = await api.client.get(f"/v1/boards/week?limit={20 + level}")
            assert uncopied.status_code == (503 if PAGE in shed else 200), level
            expected_shed[PAGE] += PAGE in shed

            # Never shed, at any level: results, the admin's calls, health, metrics.
            r = await api.submit(f"m-{level}", [("p3", 5), ("p4", 1)])
            assert r.status_code == 200, r.text
            review = await api.client.get(
                "/v1/admin/review", params={"board": "week"}, headers=api.auth(api.admin_key)
            )
            assert review.status_code == 200, review.text
            assert (await api.client.get("/healthz")).status_code == 200
            assert (await api.client.get("/readyz")).status_code == 200
            scrape = await api.client.get("/metrics", headers=api.auth(ops))
            assert scrape.status_code == 200
            assert f"podium_shed_level {float(level)}" in scrape.text

        head = await api.client.head(READS[RANK])  # HEAD is a read like its GET
        assert head.status_code == 503 and head.content == b""
        expected_shed[RANK] += 1
    finally:
        gate.release()
    assert gate.level == 0
    assert (await api.client.get(READS[RANK])).status_code == 200
    assert {c: shed_count(c) - before[c] for c in READS} == expected_shed
    stale = (metrics.REGISTRY.get_sample_value("podium_reads_stale_total") or 0.0) - stale_before
    assert stale == 2  # the top page at levels 3 and 4


async def test_matches_in_flight_alone_raise_the_level(make_api: type) -> None:
    api: Api = await make_api(server={"max_pending_matches": 8})
    gate = gate_of(api)
    try:
        assert gate.hold(lag_s=0.0, pending=8) == 4
        assert (await api.client.get(READS[RANK])).status_code == 503
    finally:
        gate.release()


async def test_a_late_result_sheds_every_read_until_it_is_recorded(make_api: type) -> None:
    """The gate's own figures, not pinned: a match held in flight past
    ``server.shed_accept_ms`` takes the level to the top while the process is busy, and a
    player's rank is shed, whatever the loop's lag."""
    api: Api = await make_api(server={"shed_accept_ms": 20})
    gate = gate_of(api)
    opened = asyncio.Event()
    record = api.podium.matches.record_all  # what the route calls

    async def held(*args: Any, **kwargs: Any) -> Any:
        await opened.wait()
        return await record(*args, **kwargs)

    api.podium.matches.record_all = held  # type: ignore[method-assign]
    transport = api.client._transport
    assert isinstance(transport, httpx.ASGITransport)
    pending = transport.app.state.pending_matches  # type: ignore[attr-defined]
    late = asyncio.create_task(api.submit("m1", [("p1", 10)]))
    try:

        async def late_enough() -> bool:
            return pending.oldest_s() >= 0.020

        assert await api.until(late_enough)
        gate.busy += gate.limits.min_busy  # as if that many requests were in flight
        assert gate.update() == TOP
        shed = await api.client.get(READS[RANK])
        assert shed.status_code == 503 and shed.headers["retry-after"] == "1"
    finally:
        opened.set()
        gate.busy -= gate.limits.min_busy
    assert (await late).status_code == 200  # the result itself was never refused
    assert pending.oldest_s() == 0.0  # nothing in flight: the age no longer counts


async def test_with_shedding_off_nothing_is_shed(make_api: type) -> None:
    api: Api = await make_api(server={"shed_reads": False})
    gate = gate_of(api)
    try:
        assert gate.hold(lag_s=1.0, pending=1000) == 0
        assert (await api.client.get(READS[FAR])).status_code == 200
    finally:
        gate.release()


@pytest.mark.parametrize("value", [0, -1, "soon"])
@pytest.mark.parametrize("name", ["shed_lag_ms", "shed_accept_ms"])
def test_the_thresholds_must_be_positive_numbers(name: str, value: object) -> None:
    from podium.config.settings import parse
    from podium.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"server\.{name}"):
        parse({"server": {name: value}})
