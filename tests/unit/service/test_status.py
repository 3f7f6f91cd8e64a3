"""What ``podium status`` makes of what it read: a replica's lag from INFO replication, a
role's freshness from its heartbeats, and the one line that says what is down."""

from __future__ import annotations

from podium.index.redis.nodes import replication
from podium.ports.status import Heartbeat, IndexNode, Reachable, Replica
from podium.service.status import STALE_AFTER_S, Report, roles


def test_a_replica_lags_by_the_bytes_it_has_not_received() -> None:
    info = {
        "role": "master",
        "connected_slaves": 2,
        "master_repl_offset": 5000,
        "slave1": {"ip": "10.0.0.3", "port": 6379, "state": "wait_bgsave", "offset": 0},
        "slave0": {"ip": "10.0.0.2", "port": 6379, "state": "online", "offset": 4200, "lag": 0},
        "repl_backlog_active": 1,
    }
    node = replication(3, "10.0.0.1:6379", info)
    assert node == IndexNode(
        3,
        "10.0.0.1:6379",
        up=True,
        role="master",
        offset=5000,
        replicas=(
            Replica("10.0.0.2:6379", "online", 800),
            Replica("10.0.0.3:6379", "wait_bgsave", 5000),
        ),
    )


def test_a_replica_node_has_its_role_and_no_replicas() -> None:
    info = {"role": "slave", "master_host": "10.0.0.1", "master_repl_offset": "77"}
    assert replication(None, "10.0.0.2:6379", info) == IndexNode(
        None, "10.0.0.2:6379", up=True, role="slave", offset=77
    )


def test_a_role_is_stale_once_every_process_is_silent_past_its_own_sleep() -> None:
    now = 10_000.0
    beats = [
        Heartbeat("updater", "a:1", now - 2, 0.05),
        Heartbeat("updater", "b:2", now - 500, 0.05),  # a process that stopped
        Heartbeat("freezer", "a:1", now - 5 - STALE_AFTER_S - 1, 5.0),
        Heartbeat("pruner", "a:1", now - 299, 300.0),  # sleeps 5 minutes between looks
    ]
    found = {r.role: r for r in roles(beats, now)}
    assert [r for r in found] == ["freezer", "pruner", "updater"]
    assert (found["updater"].holder, found["updater"].processes) == ("a:1", 1)
    assert not found["updater"].stale and not found["pruner"].stale
    assert found["freezer"].stale and found["freezer"].processes == 0
    assert found["freezer"].age_s == 5 + STALE_AFTER_S + 1


def test_down_names_each_part_that_is_out() -> None:
    report = Report(
        0.0,
        [Reachable("db0:5432/podium (home)", True), Reachable("db1:5432/podium", False, "gone")],
        [IndexNode(0, "r1:6379", up=True), IndexNode(1, "r2:6379", up=False, why="refused")],
        roles([Heartbeat("relay", "w:9", -1000.0, 0.05)], 0.0),
    )
    assert report.down() == [
        "store database db1:5432/podium: gone",
        "index shard 1 at r2:6379: refused",
        "role relay: last heartbeat 1000 s ago (w:9)",
    ]
    assert (
        Report(0.0, [Reachable("podium.db", True)], [IndexNode(None, "x", True)], []).down() == []
    )
