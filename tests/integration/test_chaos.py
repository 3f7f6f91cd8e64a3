"""The chaos run in CI, short (``tests/integration/chaos.py``; at length,
``benchmarks/chaos.py``): a fleet on private servers under load, each part broken in turn;
nothing acknowledged is lost, nothing is counted twice, every board ends equal to the store."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration import chaos
from tests.redis_cluster import REDIS_CLI, REDIS_SERVER


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_chaos_run_loses_nothing() -> None:
    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip("redis-server and redis-cli are needed for a Redis Cluster")
    f = asyncio.run(chaos.run(seconds=60, players=200, rate=6.0, senders=3, readers=2))
    print("\n".join(f"chaos: {line}" for line in f.lines()))
    assert f.acknowledged == f.results_sent  # every match sent was acknowledged in the end
    assert f.retried > 0, "the breaks should have cost some tries a retry"
    assert f.lost == 0 and f.doubled == 0, f.lines()
    assert f.boards_equal_store, f.lines()
    assert f.exited == [], f.lines()  # every process killed was started again, and runs
    assert f.reads["200"] > 0
    if f.replica_lacked:  # what mended the promoted replica: a replay, logged
        assert f.mender_lines > 0, f.lines()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_chaos_run_with_kafka_as_the_log_loses_nothing() -> None:
    """The same run with the log on a private Kafka cluster of 3, whose node leading the
    changes' partition 0 is killed with SIGKILL and started again."""
    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip("redis-server and redis-cli are needed for a Redis Cluster")
    f = asyncio.run(chaos.run(seconds=60, players=200, rate=6.0, senders=3, readers=2, log="kafka"))
    print("\n".join(f"chaos on Kafka: {line}" for line in f.lines()))
    assert f.acknowledged == f.results_sent
    assert f.lost == 0 and f.doubled == 0, f.lines()
    assert f.boards_equal_store, f.lines()
    assert f.exited == [], f.lines()
    assert any("Kafka node" in b for b in f.breaks), f.breaks
