"""What 1,000 live league cohorts cost the rank aggregator: nothing it reads. In one
process, on the embedded store and an in-process index split into 4 shards (the aggregator
runs only on a split index), a week board and a league board (cohorts of 30) fed by the
same matches, ``--players`` players with one result each (30,000: 1,000 cohorts). Then,
alternating, the aggregator's step is timed with every cohort on the index, and with every
cohort key emptied (each refilled from the store before the next round), and the board
windows its shards were asked about are counted: a cohort key is never among them (cohorts
are not configured boards, so the aggregator never takes one for a split board).

    python benchmarks/cohort_aggregator.py                  # 30,000 players, 3 rounds
    python benchmarks/cohort_aggregator.py --players 3000   # a quick look

Prints the median and range of the step's time with and without the cohorts, their ratio,
and the keys the shards were asked about.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import med_spread, save_json
from podium.bootstrap import build
from podium.config.settings import parse
from podium.domain.cohorts import is_cohort
from podium.domain.models import PlayerResult
from podium.domain.windows import index_expiry
from podium.ports import BoardKey
from podium.service.tournaments import Specs
from podium.workers.aggregator import Aggregator
from podium.workers.updater import Updater

PER_MATCH = 10


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--players", type=int, default=30_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20, help="aggregator steps timed per round")
    p.add_argument("--json", type=Path, default=None, help="also write every figure here")
    return p.parse_args()


class Counting:
    """A shard that notes every board window it is asked about."""

    def __init__(self, shard: Any, seen: set[BoardKey]) -> None:
        self._shard, self._seen = shard, seen

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self._shard, name)

        def call(*args: Any, **kw: Any) -> Any:
            if args and isinstance(args[0], BoardKey):
                self._seen.add(args[0])
            return fn(*args, **kw)

        return call


async def bench(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    settings = parse(
        {
            "store": {"url": f"sqlite:///{tmp / 'podium.db'}"},
            "index": {"url": "memory://", "shards": 4},
            "server": {"read_rate_per_s": 0},
            "archive": {"dir": str(tmp / "standings")},
            "boards": [
                {"name": "week", "window": "week"},
                {
                    "name": "league",
                    "window": "week",
                    "cohort_size": 30,
                    "tiers": ["bronze", "silver", "gold", "diamond"],
                    "promote": 5,
                    "demote": 5,
                },
            ],
        }
    )
    b = build(settings)
    await b.start()
    try:
        key, _ = await b.podium.keys.create("bench", ["default"], False)
        now = int(time.time())
        started = time.perf_counter()
        matches = args.players // PER_MATCH

        async def one(m: int) -> None:
            results = [
                PlayerResult(f"p{m * PER_MATCH + i:06d}", 1 + (m * 7 + i * 13) % 1000)
                for i in range(PER_MATCH)
            ]
            await b.podium.matches.record(key, f"m{m}", "default", now, 60, results)

        for first in range(0, matches, 50):
            await asyncio.gather(*(one(m) for m in range(first, min(matches, first + 50))))
        up = Updater(settings, b.store, b.index, b.copy, b.log, b.clock, Specs(b.store, b.clock))
        while await up.step():
            pass
        spec = settings.board("league")
        assert spec is not None and b.split is not None
        w = spec.rule.window_at(now)
        assert w is not None
        cohorts = await b.podium.leagues.store.cohorts("league", w.id)
        print(
            f"{args.players} players recorded in {time.perf_counter() - started:.1f} s: "
            f"{len(cohorts)} cohorts of league {w.id}",
            flush=True,
        )
        seen: set[BoardKey] = set()
        agg = Aggregator(
            settings, [Counting(s, seen) for s in b.split.shards], b.snapshots, b.clock
        )

        async def timed() -> list[float]:
            out = []
            for _ in range(args.steps):
                t = time.perf_counter()
                await agg.step()
                out.append(time.perf_counter() - t)
            return out

        with_c: list[float] = []
        without: list[float] = []
        for r in range(args.rounds):
            on = statistics.median(await timed())
            for c in cohorts:  # every cohort key emptied
                await b.index.replace(BoardKey("league", c.id), [], expire_at=index_expiry(w))
            off = statistics.median(await timed())
            refilled = await b.podium.leagues.rebuild_live(b.podium.rebuilds)
            with_c.append(on)
            without.append(off)
            print(
                f"round {r + 1}/{args.rounds}: step {1000 * on:.2f} ms with the cohorts, "
                f"{1000 * off:.2f} ms without ({refilled} cohort entries refilled after)",
                flush=True,
            )
        asked = sorted(f"{k.board}/{k.window}" for k in seen)
        head = f"with {len(cohorts):,} cohorts"
        print(f"\n{'':32}{head:>22}{'cohort keys emptied':>22}")
        print(f"{'aggregator step':32}{med_spread(with_c):>22}{med_spread(without):>22}")
        ratio = statistics.median(with_c) / statistics.median(without)
        print(f"ratio (with / without): {ratio:.2f}")
        print(f"board windows the shards were asked about: {asked}")
        print(f"cohort keys among them: {sum(is_cohort(k.window) for k in seen)}")
        return {
            "players": args.players,
            "cohorts": len(cohorts),
            "step_s_with": with_c,
            "step_s_without": without,
            "asked": asked,
        }
    finally:
        await b.close()


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="podium-bench-") as tmp:
        figures = asyncio.run(bench(args, Path(tmp)))
    save_json(args, **figures)


if __name__ == "__main__":
    main()
