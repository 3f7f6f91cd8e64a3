"""Estimated ranks on a board that moves: is the true rank at the moment of the answer
inside ``[low, high]``, and how far off is the estimate?

``benchmarks/estimate.py`` measures the histogram on a board that stands still. Here the
board takes results while it is read, and podium's own domain code is fed what the
aggregator feeds it (``workers/aggregator.py``):

- boundaries planned as ``Aggregator._plan`` does: each shard's scores at its
  ``sample_ranks``, then ``plan_bounds``; planned again every ``REPLAN_S`` (60 s);
- counts between them every second (a cycle), summed over the shards (``Histogram.summed``);
- a reader sees counts ``--age`` seconds old (2: a cycle, then the snapshot's hold in each
  API process).

Each second takes ``--rate`` results: 5 % first matches (a new player), the rest players
chosen in proportion to their points, each match worth 0-200 points (``steps``: a multiple
of 25), written as ``ZADD GT`` would (the newest second in the low bits, so a fresh score
stands behind everyone on its points value). Four samples of readers below the exact top,
each read at the end of a second: ``players`` (at random), ``log-ranks`` (ranks even in
log(rank)), ``after-match`` (a player who played this second) and ``first-match`` (of whom
first matches). The true rank is counted from every score at that instant, in board order
(ties by member bytes, as ``ZREVRANGE``).

Two estimators, side by side on the same board and the same readers:

- ``before``: the read as it was before issue 34: boundaries planned with 1,000 of them and
  no split at points values' floors (``plan_bounds(few=False)``), re-planned on the clock
  only, and ``Histogram.estimate`` of the counts as they are (what ``SnapshotRanks.place``
  did before the board's tallies, ``domain/changes.py``);
- ``after``: the read as it is now: ``--after-bounds`` boundaries (``MAX_BOUNDS``) split at
  the floors of buckets of a few values, re-planned too when the board drifts from its plan
  (``Aggregator._due``), the histogram told the time part of its counts (``newest``), the
  reader's own move not taken as counted, and the interval widened by the tallies of every
  write since the counts (``Changes.moves``).

    python benchmarks/estimate_churn.py [--players 10000000] [--rate 1000] [--seconds 180]
        [--boards smooth,steps] [--sample 4000] [--after-bounds 1000]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from estimate import EXACT_TOP, SEASON_S, STEP, shards_of
from podium.domain.bounds import MAX_BOUNDS, plan_bounds, sample_ranks
from podium.domain.changes import SUB, Changes, widened
from podium.domain.codec import ScoreCodec, time_bits_for
from podium.domain.histogram import Estimate, Histogram
from podium.domain.lattice import Bounds
from podium.workers.aggregator import DRIFT_MIN, REPLAN_MIN_S

I64 = npt.NDArray[np.int64]
REPLAN_S = 60
BEFORE_BOUNDS = 1000  # today's MAX_BOUNDS
FIRST_SHARE = 0.05
SAMPLES = ("players", "log-ranks", "after-match", "first-match")
BANDS = 64 * SUB

_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", flush=True)


def bands(scores: I64) -> I64:
    """``domain.changes.band`` of every score, vectorised (``np.frexp`` as ``math.frexp``)."""
    m, e = np.frexp(scores.astype(np.float64))
    out = e.astype(np.int64) * SUB + ((2.0 * m - 1.0) * SUB).astype(np.int64)
    out[scores < 1] = 0
    return out


@dataclass
class Plan:
    """One estimator's boundaries and its counts at them, kept up to date write by write."""

    bounds: Bounds  # as planned: the boundaries with the time quantiles the planner saw
    edges: I64
    counts: I64

    def bucket(self, scores: I64) -> I64:
        return np.searchsorted(self.edges, scores, side="right") - 1

    def move(self, old: I64, new: I64) -> None:
        n = len(self.counts)
        for scores, sign in ((old, -1), (new, 1)):
            b = self.bucket(scores)
            b = b[(b >= 0) & (b < n)]
            self.counts += sign * np.bincount(b, minlength=n)


@dataclass
class Tally:
    """What write.lua tallies (``domain.changes``), as arrays: rises and falls by band,
    entries by octave. Only rises and entries happen on a ``GT`` board."""

    rose: I64 = field(default_factory=lambda: np.zeros(BANDS + 1, dtype=np.int64))
    entered: I64 = field(default_factory=lambda: np.zeros(BANDS // SUB + 1, dtype=np.int64))
    writes: int = 0

    def add(self, old: I64, new: I64, fresh: I64) -> None:
        up = new > old
        lo, hi = bands(old[up]), bands(new[up])
        diff = np.zeros(BANDS + 2, dtype=np.int64)
        np.add.at(diff, lo, 1)
        np.add.at(diff, hi + 1, -1)
        self.rose += np.cumsum(diff)[: BANDS + 1]
        np.add.at(self.entered, bands(fresh) // SUB, 1)
        self.writes += int(up.sum()) + len(fresh)

    def changes(self) -> Changes:
        fields = {f"+{b}": int(v) for b, v in enumerate(self.rose) if v}
        fields.update({f"e{o}": int(v) for o, v in enumerate(self.entered) if v})
        return Changes((self.writes,), fields)


class Board:
    def __init__(self, kind: str, args: argparse.Namespace) -> None:
        self.kind = kind
        self.args = args
        self.rng = np.random.default_rng(args.seed)
        self.codec = ScoreCodec(time_bits_for(SEASON_S), True)
        n = args.players
        self.cap = n + int(args.rate * args.seconds * FIRST_SHARE * 1.5) + 1000
        self.n = n
        self.start = SEASON_S // 2  # the second the run begins, halfway through the season
        self.shard = shards_of(self.cap, args.shards)
        points = np.floor(self.rng.lognormal(math.log(2000), 1.0, size=n)).astype(np.int64)
        points[self.rng.random(n) < 0.15] = 0
        if kind == "steps":
            points -= points % STEP
        seconds = (self.rng.random(n) * self.start).astype(np.int64)
        self.scores = np.zeros(self.cap, dtype=np.int64)
        self.scores[:n] = self.encode(points, seconds)
        self.rebase()

    def encode(self, points: I64, seconds: I64) -> I64:
        c = self.codec
        return (points << c.time_bits) + (c.time_limit - 1 - seconds)

    def rebase(self) -> None:
        """Every score sorted in board order again (the truth's base), and the writes since
        emptied; each player's weight (their points) for choosing who plays."""
        live = self.scores[: self.n]
        order = np.argsort(live, kind="stable")  # ascending (score, id)
        self.base_s = live[order]
        self.base_id = order.astype(np.int64)
        self.added_s: list[I64] = []
        self.added_id: list[I64] = []
        self.gone_s: list[I64] = []
        self.gone_id: list[I64] = []
        w = (live >> self.codec.time_bits).astype(np.float64)
        self.cum = np.cumsum(w)

    def shard_parts(self) -> tuple[list[I64], list[int]]:
        live = self.scores[: self.n]
        sh = self.shard[: self.n]
        parts = [np.sort(live[sh == j]) for j in range(self.args.shards)]
        return parts, [len(p) for p in parts]

    def plan(self, max_bounds: int, few: bool = True) -> Plan:
        """``Aggregator._plan``: each shard's scores at its sample ranks, then the boundaries."""
        parts, sizes = self.shard_parts()
        total = sum(sizes)
        samples = []
        for part, size in zip(parts, sizes, strict=True):
            ranks = sample_ranks(total, size, exact_top=EXACT_TOP, max_bounds=max_bounds)
            samples.append([int(part[size - 1 - r]) if r < size else None for r in ranks])
        bounds = plan_bounds(
            samples,
            sizes,
            exact_top=EXACT_TOP,
            descending=True,
            codec=self.codec,
            max_bounds=max_bounds,
            few=few,
        )
        edges = np.array(bounds, dtype=np.int64)
        live = np.sort(self.scores[: self.n])
        counts = np.diff(np.searchsorted(live, edges, side="left")).astype(np.int64)
        return Plan(bounds, edges, counts)

    def second(self, t: int) -> tuple[I64, I64, I64, I64]:
        """One second of results; returns (players who played, their old scores, their new
        ones, the new players)."""
        rate = self.args.rate
        k_new = int(self.rng.binomial(rate, FIRST_SHARE))
        picks = np.searchsorted(self.cum, self.rng.random(rate - k_new) * self.cum[-1])
        players = np.unique(np.minimum(picks, len(self.cum) - 1))
        fresh = np.arange(self.n, self.n + k_new, dtype=np.int64)
        self.n += k_new
        sec = np.int64(self.start + t)
        old = self.scores[players]
        gain = self.gains(len(players))
        pts = (old >> self.codec.time_bits) + gain
        new = np.maximum(old, self.encode(pts, np.full(len(players), sec)))  # ZADD GT
        self.scores[players] = new
        first = self.encode(self.gains(k_new), np.full(k_new, sec))
        self.scores[fresh] = first
        moved = new != old
        self.gone_s.append(old[moved])
        self.gone_id.append(players[moved])
        self.added_s += [new[moved], first]
        self.added_id += [players[moved], fresh]
        return players, old, new, fresh

    def gains(self, k: int) -> I64:
        if self.kind == "steps":
            return STEP * self.rng.integers(0, 9, size=k)
        return self.rng.integers(0, 201, size=k)

    def true_ranks(self, ids: I64) -> I64:
        """Each player's rank now: 1 + everyone ahead in board order (score, then member)."""
        a_s, a_id = np.concatenate(self.added_s), np.concatenate(self.added_id)
        g_s, g_id = np.concatenate(self.gone_s), np.concatenate(self.gone_id)
        out = np.empty(len(ids), dtype=np.int64)
        for i, p in enumerate(ids.tolist()):
            s = int(self.scores[p])
            lo = int(np.searchsorted(self.base_s, s, side="left"))
            hi = int(np.searchsorted(self.base_s, s, side="right"))
            ahead = len(self.base_s) - hi
            if hi > lo:
                ahead += int(np.count_nonzero(self.base_id[lo:hi] > p))
            ahead += int(np.count_nonzero((a_s > s) | ((a_s == s) & (a_id > p))))
            ahead -= int(np.count_nonzero((g_s > s) | ((g_s == s) & (g_id > p))))
            out[i] = ahead + 1
        return out

    def at_ranks(self, ranks: I64) -> I64:
        """The players at these ranks of the base (their rank now differs a little)."""
        pos = len(self.base_s) - ranks
        return self.base_id[np.clip(pos, 0, len(self.base_s) - 1)]


@dataclass
class Seen:
    errors: list[float] = field(default_factory=list)
    inside: int = 0
    widths: list[float] = field(default_factory=list)
    above: int = 0  # true rank past high
    below: int = 0  # true rank before low

    def add(self, est: Estimate, true: int) -> None:
        self.errors.append(abs(est.rank - true) / true)
        self.inside += est.low <= true <= est.high
        self.above += true > est.high
        self.below += true < est.low
        self.widths.append((est.high - est.low + 1) / true)


def run(kind: str, args: argparse.Namespace) -> dict[tuple[str, str], Seen]:
    log(f"{kind}: {args.players:,} players, {args.rate:,} results/s, {args.seconds} s")
    board = Board(kind, args)
    codec = board.codec
    seen = {(m, s): Seen() for m in ("before", "after") for s in SAMPLES}
    per_second = max(1, args.sample // args.seconds)
    pick = np.random.default_rng(args.seed + 7)
    tally = Tally()
    # (histogram before, histogram after, tallies read before the counts), a second each
    held: deque[tuple[Histogram, Histogram, Changes]] = deque(maxlen=args.age + 1)
    plans: tuple[Plan, Plan] | None = None
    planned_at = 0  # when the after plan was made, and its first counts
    planned: I64 | None = None
    for t in range(args.seconds):
        if t % REPLAN_S == 0:
            if t:
                board.rebase()
            t0 = time.perf_counter()
            plans = (
                board.plan(BEFORE_BOUNDS, few=False),
                board.plan(args.after_bounds),
            )
            planned_at, planned = t, None
            log(
                f"{kind} t={t}s: planned {len(plans[0].bounds)} and {len(plans[1].bounds)} "
                f"boundaries in {time.perf_counter() - t0:.1f}s"
            )
        elif (
            args.drift
            and plans is not None
            and planned is not None
            and t - planned_at >= REPLAN_MIN_S
            and bool(np.any(plans[1].counts > 2 * _widest(planned) + DRIFT_MIN))
        ):
            # Aggregator._due: the board drifted from the after plan, planned again.
            plans = (plans[0], board.plan(args.after_bounds))
            planned_at, planned = t, None
            log(f"{kind} t={t}s: drifted, after planned again")
        assert plans is not None
        players, old, new, fresh = board.second(t)
        tally.add(old, new, board.scores[fresh])
        for p in plans:
            p.move(old, new)
            p.move(np.empty(0, dtype=np.int64), board.scores[fresh])
        # The aggregator's cycle: the tallies first, then the counts (so the tallies it
        # holds never count a write the counts hold that it did not see).
        changes = tally.changes()
        held.append(
            (
                Histogram.summed(plans[0].bounds, [plans[0].counts.tolist()], descending=True),
                Histogram.summed(
                    plans[1].bounds,
                    [plans[1].counts.tolist()],
                    descending=True,
                    newest=int(board.encode(np.zeros(1, np.int64), np.full(1, board.start + t))[0]),
                ),
                changes,
            )
        )
        if planned is None:
            planned = plans[1].counts.copy()
        if len(held) <= args.age:
            continue
        h_before, h_after, then = held[0]  # what a reader holds: counts args.age s old
        moved = changes.since(then)
        assert moved is not None
        readers = {
            "players": pick.integers(0, board.n, size=per_second * 3),
            "log-ranks": board.at_ranks(
                np.exp(
                    pick.uniform(math.log(EXACT_TOP + 1), math.log(board.n), size=per_second * 3)
                ).astype(np.int64)
            ),
            "after-match": pick.choice(np.concatenate([players, fresh]), size=per_second * 3),
            "first-match": pick.choice(fresh, size=per_second) if len(fresh) else fresh,
        }
        for sample, ids in readers.items():
            truth = board.true_ranks(ids)
            keep = truth > EXACT_TOP  # below the exact top: the reads that estimate
            for p, true in zip(ids[keep][:per_second], truth[keep][:per_second], strict=False):
                s = int(board.scores[p])
                floor = EXACT_TOP + 1
                est = h_before.estimate(s, codec)
                est = Estimate(max(est.rank, floor), max(est.low, floor), max(est.high, floor))
                seen["before", sample].add(est, int(true))
                est = h_after.estimate(s, codec, counted=False)
                est = Estimate(max(est.rank, floor), max(est.low, floor), max(est.high, floor))
                fewer, more = moved.moves(s, descending=True)
                seen["after", sample].add(widened(est, fewer, more), int(true))
        if t % 30 == 29:
            log(f"{kind} t={t + 1}s: {board.n:,} players")
    return seen


def _widest(counts: I64) -> I64:
    """Each bucket's count or its neighbours', the larger (``aggregator._drifted``)."""
    out = counts.copy()
    out[1:] = np.maximum(out[1:], counts[:-1])
    out[:-1] = np.maximum(out[:-1], counts[1:])
    return out


def pct(x: float) -> str:
    return f"{100 * x:.4f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--players", type=int, default=10_000_000)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--rate", type=int, default=1000, help="results a second")
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--age", type=int, default=2, help="seconds a reader's counts are old")
    ap.add_argument("--sample", type=int, default=4000, help="readers of each sample")
    ap.add_argument("--boards", default="smooth,steps")
    ap.add_argument("--after-bounds", type=int, default=MAX_BOUNDS)
    ap.add_argument("--drift", type=int, choices=[0, 1], default=1, help="after: re-plan on drift")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for kind in args.boards.split(","):
        seen = run(kind, args)
        print()
        print(
            f"{kind} board, {args.players:,} players, {args.shards} shards, {args.rate:,} "
            f"results/s for {args.seconds} s, counts {args.age} s old; after: "
            f"{args.after_bounds} boundaries"
        )
        print(
            "| read | sample | n | p50 | p99 | max | inside [low, high] | past high | "
            "before low | mean width |"
        )
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for (method, sample), r in seen.items():
            e = sorted(r.errors)
            if not e:
                continue
            n = len(e)
            print(
                f"| {method} | {sample} | {n:,} | {pct(e[n // 2])} | "
                f"{pct(e[min(n - 1, int(n * 0.99))])} | {pct(e[-1])} | "
                f"{100 * r.inside / n:.2f}% | {r.above} | {r.below} | "
                f"{pct(sum(r.widths) / n)} |"
            )
        print(flush=True)
    log("done")


if __name__ == "__main__":
    main()
