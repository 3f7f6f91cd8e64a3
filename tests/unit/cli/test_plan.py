"""The capacity planner: the seed's table reproduced, the limit that sets each count, the
measured file, and ``podium plan`` as people and machines read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from podium.cli.main import app
from podium.domain.capacity import (
    DEFAULTS,
    SOURCES,
    Capacities,
    CapacityError,
    Load,
    capacities,
    measured,
    plan,
)


def test_the_seeds_table() -> None:
    """25 million daily players, 10 matches each, peak 10x: about 2,900 results/s on
    average and 29,000 at peak, 87,000 board writes/s at peak, about 18 GB of boards."""
    p = plan(Load(daily_players=25_000_000, matches_per_player=10, peak=10))
    assert round(p.results_per_s, -2) == 2_900
    assert round(p.results_per_s_peak, -3) == 29_000
    assert round(p.board_writes_per_s_peak, -3) == 87_000
    assert round(p.board_bytes / 1e9) == 18
    assert p.board_members == 75_000_000
    assert p.reads_per_s_peak == pytest.approx(p.results_per_s_peak * 3.5)


def test_the_defaults_plan_and_what_forces_each_count() -> None:
    p = plan(Load())
    # Redis: 86,806 writes/s over 80,000 and 101,273 reads/s over 10,000 share a core.
    assert p.redis.needs["cpu"]["writes"] == pytest.approx(86_806 / 80_000, rel=1e-4)
    assert p.redis.needs["cpu"]["reads"] == pytest.approx(101_273 / 10_000, rel=1e-4)
    assert p.redis.needs["memory"]["boards"] == pytest.approx(18 / 8)
    assert (p.redis.nodes, p.redis.forced_by) == (12, "cpu (reads)")
    assert (p.postgres.nodes, p.postgres.forced_by) == (6, "cpu")
    assert p.store_bytes == pytest.approx(250e6 * 90 * 380)
    assert (p.api.nodes, p.api.forced_by) == (121, "cpu (reads)")


def test_memory_forces_the_split_of_a_board_of_many_idle_players() -> None:
    """Few matches, many players on the boards: the shards are set by memory."""
    p = plan(Load(daily_players=1_000_000, players_per_board=200_000_000, reads_per_match=1))
    assert p.redis.forced_by == "memory"
    assert p.redis.nodes == 18  # 600 million members x 240 B = 144 GB over 8 GB a shard


def test_storage_forces_the_databases_when_results_stay_long() -> None:
    p = plan(Load(keep_days=365))
    assert p.postgres.forced_by == "storage"
    assert p.postgres.nodes == 18  # 250 million a day x 365 x 380 B = 34.7 TB over 2 TB


def test_a_small_game_needs_one_of_each() -> None:
    p = plan(Load(daily_players=1_000, matches_per_player=5))
    assert (p.redis.nodes, p.postgres.nodes, p.api.nodes) == (1, 1, 1)


def test_every_default_says_where_it_comes_from() -> None:
    assert set(SOURCES) == set(Capacities.__dataclass_fields__)
    assert all(SOURCES.values())


def test_a_measured_file_replaces_what_it_names() -> None:
    caps = measured({"format": 1, "capacities": {"redis_writes_per_shard": 20_000}})
    assert caps.redis_writes_per_shard == 20_000
    assert caps.api_reads_per_process == DEFAULTS.api_reads_per_process


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"format": 2, "capacities": {}}, "format: expected 1"),
        ({"format": 1, "capacities": {"redis_shards": 3}}, "unknown capacity 'redis_shards'"),
        ({"format": 1, "capacities": {"redis_writes_per_shard": 0}}, "above 0"),
        ({"format": 1, "capacities": {"redis_writes_per_shard": "fast"}}, "above 0"),
        ({"format": 1, "capacities": {"redis_writes_per_shard": True}}, "above 0"),
        ({"format": 1, "capacities": []}, "capacities: expected an object"),
        ({"format": 1, "capacities": {}, "machine": "x"}, "unknown key 'machine'"),
        ([], "expected a JSON object"),
    ],
)
def test_a_bad_measured_file_is_refused_saying_why(document: object, says: str) -> None:
    with pytest.raises(CapacityError, match=says):
        measured(document)


def test_a_bad_load_is_refused() -> None:
    with pytest.raises(CapacityError, match="daily_players"):
        plan(Load(daily_players=0))
    with pytest.raises(CapacityError, match="above 0"):
        capacities({"bytes_per_member": -1})


runner = CliRunner()


def test_podium_plan_prints_the_table() -> None:
    out = runner.invoke(app, ["plan"])
    assert out.exit_code == 0, out.output
    text = out.output
    assert "results/s" in text and "2,894" in text and "28,935" in text
    assert "86,806" in text and "18.0 GB" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "cpu *" in rows["Redis"] and "12" in rows["Redis"].split()
    assert "121" in rows["API"].split()


def test_podium_plan_json() -> None:
    out = runner.invoke(app, ["plan", "--json", "--peak", "5", "--players-per-board", "10000000"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["load"]["peak"] == 5
    assert doc["results_per_s"]["peak"] == pytest.approx(25e7 / 86_400 * 5)
    assert doc["board_bytes"] == 3 * 10_000_000 * 240
    assert doc["redis_shards"]["forced_by"] == "cpu (reads)"
    assert doc["capacity_sources"]["bytes_per_member"].startswith("the seed's sizing")


def test_podium_plan_measured(tmp_path: Path) -> None:
    file = tmp_path / "capacities.json"
    file.write_text(
        json.dumps(
            {
                "format": 1,
                "source": "a benchmark run",
                "capacities": {"redis_reads_per_shard": 50_000, "api_reads_per_process": 2_000},
            }
        )
    )
    out = runner.invoke(
        app, ["plan", "--json", "--measured", str(file), "--capacity", "redis_gb_per_shard=1"]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["capacities"]["redis_reads_per_shard"] == 50_000
    assert doc["capacity_sources"]["redis_reads_per_shard"] == "capacities.json"
    assert doc["capacity_sources"]["redis_gb_per_shard"] == "--capacity"
    assert doc["redis_shards"]["forced_by"] == "memory"  # 18 GB over 1 GB a shard
    assert doc["redis_shards"]["nodes"] == 18
    table = runner.invoke(app, ["plan", "--measured", str(file)])
    assert table.exit_code == 0 and "capacities.json" in table.output


def test_podium_plan_refuses_a_bad_file(tmp_path: Path) -> None:
    file = tmp_path / "capacities.json"
    file.write_text('{"format": 1, "capacities": {"redis_iops": 5}}')
    out = runner.invoke(app, ["plan", "--measured", str(file)])
    assert out.exit_code == 2
    assert "unknown capacity 'redis_iops'" in out.output
    out = runner.invoke(app, ["plan", "--capacity", "redis_gb_per_shard"])
    assert out.exit_code == 2 and "NAME=NUMBER" in out.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--peak", "inf"], "--peak"),
        (["--peak", "1e308"], "--peak"),
        (["--peak", "nan"], "--peak"),
        (["--matches-per-player", "1e300"], "--matches-per-player"),
        (["--reads-per-match", "-inf"], "--reads-per-match"),
        (["--keep-days", "inf"], "--keep-days"),
        (["--keep-days", "nan"], "--keep-days"),
        (["--daily-players", "99999999999999999999999"], "--daily-players"),
        (["--windows-per-result", "100000"], "--windows-per-result"),
        (["--players-per-board", "99999999999999999999999"], "--players-per-board"),
        (["--capacity", "redis_gb_per_shard=1e-320"], "Redis shards"),
    ],
)
def test_podium_plan_refuses_non_finite_and_absurd_values_in_one_line(
    args: list[str], named: str
) -> None:
    """Issue 33: ``--peak inf`` was an OverflowError's traceback; now, as a bad parameter,
    exit 2 and one line that names the option (or the tier whose count could not be)."""
    out = runner.invoke(app, ["plan", *args])
    assert out.exit_code == 2, out.output
    assert not isinstance(out.exception, ArithmeticError | ValueError), out.exception
    lines = out.output.strip().splitlines()
    assert len(lines) == 1, out.output
    assert lines[0].startswith("podium plan: ") and named in lines[0], lines[0]


def test_plan_bounds_every_load_value() -> None:
    with pytest.raises(CapacityError, match=r"peak: expected a number above 0 and at most"):
        plan(Load(peak=float("inf")))
    with pytest.raises(CapacityError, match=r"keep_days: expected a number from 0 to"):
        plan(Load(keep_days=float("nan")))
    plan(Load(daily_players=10**10, peak=10_000, keep_days=36_500))  # the largest: a plan
