"""Estimated ranks below the exact top: accuracy of podium's histogram beside DataSketches.

Builds synthetic season boards in numpy, splits the players over shards by the very hash
podium uses (``domain.sharding.shard_of``, vectorised here and checked against it), and feeds
the estimator exactly what the aggregator gets from the shards: each shard's scores at its
``sample_ranks`` (``scores_at``), then each shard's counts between the planned boundaries
(``count_between``). Then, for players below the exact top, it compares the estimated rank
with the true one (board order, ties by member bytes):

- ``smooth``: lognormal season totals, 15 % of players at 0 points, times spread over the
  window;
- ``steps``: the same totals rounded down to multiples of 25, as games that score in steps.

Two samples of players per board: ``players`` (uniform over the players below the exact top,
what players see) and ``log-ranks`` (ranks spread evenly in log(rank), so the ranks just
below the exact top weigh as much as the bulk). Beside podium's histogram, Apache
DataSketches at the same memory (the histogram's boundaries and counts as 8-byte integers):
KLL (additive error in rank, its 99 % bound as the interval) and REQ (relative error in rank,
high-rank accuracy for a descending board, its 2-sigma bounds as the interval).

    python benchmarks/estimate.py [--players 10000000] [--shards 16] [--sample 10000]
                                  [--boards smooth,steps] [--order desc] [--times uniform]
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import datasketches as ds  # type: ignore[import-untyped]
import numpy as np
import numpy.typing as npt

from podium.domain.codec import ScoreCodec, time_bits_for
from podium.domain.histogram import Estimate, Histogram, plan_bounds, sample_ranks
from podium.domain.sharding import BUCKETS, shard_of

I64 = npt.NDArray[np.int64]
SEASON_S = 13 * 7 * 86_400
EXACT_TOP = 10_000
STEP = 25

_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", flush=True)


# --- the board ---------------------------------------------------------------------------


def _crc_table() -> npt.NDArray[np.uint32]:
    table = np.zeros(256, dtype=np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (0xEDB88320 ^ (c >> 1)) if c & 1 else (c >> 1)
        table[n] = c
    return table


def member(i: int) -> str:
    """Player ids are zero-padded, so their byte order is their number's order."""
    return f"p_{i:09d}"


def shards_of(n: int, shards: int) -> npt.NDArray[np.uint8]:
    """``shard_of(member(i), shards)`` for every i < n: CRC-32 of the id's bytes, vectorised."""
    table = _crc_table()
    out = np.empty(n, dtype=np.uint8)
    chunk = 10_000_000
    for start in range(0, n, chunk):
        ids = np.arange(start, min(n, start + chunk), dtype=np.int64)
        crc = np.full(ids.shape, 0xFFFFFFFF, dtype=np.uint32)
        digits = [ord("p"), ord("_")]
        for b in digits:
            crc = table[(crc ^ np.uint32(b)) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        for k in range(8, -1, -1):
            d = ((ids // 10**k) % 10 + ord("0")).astype(np.uint32)
            crc = table[(crc ^ d) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        crc ^= np.uint32(0xFFFFFFFF)
        out[start : start + len(ids)] = (crc % np.uint32(BUCKETS)) % np.uint32(shards)
        del ids, crc
    for i in (0, 1, 12345, n - 1):  # the vectorised hash is podium's hash
        assert (
            zlib.crc32(member(i).encode()) % BUCKETS % shards
            == out[i]
            == shard_of(member(i), shards)
        )
    return out


def make_scores(kind: str, n: int, codec: ScoreCodec, times: str, rng: np.random.Generator) -> I64:
    """Season totals: lognormal (median 2,000 points), 15 % at 0; ``steps`` rounds them
    down to multiples of 25. The second each total was reached: uniform over the window,
    or ``late`` (density rising through the season, as totals reached by active players)."""
    points = np.floor(rng.lognormal(mean=math.log(2000), sigma=1.0, size=n)).astype(np.int64)
    points[rng.random(n) < 0.15] = 0
    if kind == "steps":
        points -= points % STEP
    np.minimum(points, codec.points_limit - 1, out=points)
    u = rng.random(n)
    if times == "late":
        np.sqrt(u, out=u)
    seconds = np.minimum((u * SEASON_S).astype(np.int64), SEASON_S - 1)
    del u
    t = (codec.time_limit - 1 - seconds) if codec.descending else seconds
    del seconds
    points <<= codec.time_bits
    points += t
    return points


# --- what the aggregator sees --------------------------------------------------------------


@dataclass
class Shards:
    ascending: list[I64]  # each shard's scores, ascending

    @property
    def sizes(self) -> list[int]:
        return [len(a) for a in self.ascending]

    def scores_at(self, j: int, ranks: list[int], descending: bool) -> list[int | None]:
        a = self.ascending[j]
        n = len(a)
        return [None if r >= n else int(a[n - 1 - r] if descending else a[r]) for r in ranks]

    def count_between(self, j: int, bounds: I64) -> list[int]:
        pos = np.searchsorted(self.ascending[j], bounds, side="left")
        return [int(c) for c in np.diff(pos)]


def split(scores: I64, shard: npt.NDArray[np.uint8], shards: int) -> Shards:
    order = np.argsort(shard, kind="stable")
    counts = np.bincount(shard, minlength=shards)
    parts = []
    start = 0
    for c in counts:
        part = scores[order[start : start + c]]
        part.sort()
        parts.append(part)
        start += c
    return Shards(parts)


# --- the truth -----------------------------------------------------------------------------


class Truth:
    """Every player's true rank: board order is (score, member bytes), both the same way."""

    def __init__(self, scores: I64, descending: bool) -> None:
        self.n = len(scores)
        self.descending = descending
        self.order = np.argsort(scores, kind="stable")  # ascending (score, id)

    def rank_of_position(self, pos: I64) -> I64:
        return (self.n - pos) if self.descending else (pos + 1)

    def players_at_ranks(self, ranks: I64) -> I64:
        pos = (self.n - ranks) if self.descending else (ranks - 1)
        return np.asarray(self.order[pos], dtype=np.int64)


# --- the methods ---------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    size: str
    nbytes: int
    errors: list[float]
    covered: int
    micros: float
    width: float  # the median of (high - low + 1) / true rank


def measure(
    name: str,
    size: str,
    nbytes: int,
    estimate: Callable[[int], tuple[int, int, int]],
    scores: list[int],
    truth: list[int],
) -> Result:
    errors = []
    covered = 0
    laps = []
    widths = []
    for s, true in zip(scores, truth, strict=True):
        t0 = time.perf_counter_ns()
        rank, low, high = estimate(s)
        laps.append(time.perf_counter_ns() - t0)
        errors.append(abs(rank - true) / true)
        covered += low <= true <= high
        widths.append((high - low + 1) / true)
    errors.sort()
    return Result(
        name,
        size,
        nbytes,
        errors,
        covered,
        statistics.median(laps) / 1000,
        statistics.median(widths),
    )


def kll_for(scores: I64, nbytes: int) -> Any:
    """The KLL sketch of the largest k whose serialized size is at most nbytes."""
    lo, hi, best = 8, 4000, None
    as_float = scores.astype(np.float64)
    while lo <= hi:
        k = (lo + hi) // 2
        sk = ds.kll_doubles_sketch(k)
        sk.update(as_float)
        if len(sk.serialize()) <= nbytes:
            best, lo = sk, k + 1
        else:
            hi = k - 1
    del as_float
    return best


def req_for(scores: I64, nbytes: int, hra: bool) -> Any:
    """An REQ sketch of Python ints (its float and int flavours are 32-bit: too narrow for a
    53-bit score); k is chosen on a 1 % subsample, then the whole board goes in."""
    serde = ds.PyLongsSerDe()
    sub = scores[:: max(1, len(scores) // 1_000_000)]
    k = 4
    for cand in (4, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256):
        sk = ds.req_items_sketch(cand, hra)
        for v in sub.tolist():
            sk.update(v)
        # Retained items grow with log(n): leave room for the whole board's extra levels.
        grow = math.log2(max(2, len(scores))) / math.log2(max(2, len(sub)))
        if len(sk.serialize(serde)) * grow > nbytes:
            break
        k = cand
    sk = ds.req_items_sketch(k, hra)
    for start in range(0, len(scores), 1_000_000):
        for v in scores[start : start + 1_000_000].tolist():
            sk.update(v)
    return sk


# --- one board -----------------------------------------------------------------------------


def run_board(kind: str, args: argparse.Namespace, shard: npt.NDArray[np.uint8]) -> None:
    descending = args.order == "desc"
    codec = ScoreCodec(time_bits_for(SEASON_S), descending)
    rng = np.random.default_rng(args.seed)
    n = args.players
    log(f"{kind}: {n:,} players, scores")
    scores = make_scores(kind, n, codec, args.times, rng)
    shards = split(scores, shard, args.shards)
    sizes = shards.sizes

    t0 = time.perf_counter()
    ranks = [sample_ranks(n, size, exact_top=EXACT_TOP) for size in sizes]
    samples = [shards.scores_at(j, r, descending) for j, r in enumerate(ranks)]
    bounds = plan_bounds(samples, sizes, exact_top=EXACT_TOP, descending=descending, codec=codec)
    plan_s = time.perf_counter() - t0
    b = np.array(bounds, dtype=np.int64)
    hist = Histogram.summed(
        bounds, [shards.count_between(j, b) for j in range(args.shards)], descending=descending
    )
    assert hist.total == n
    encoded = hist.encode()
    assert Histogram.decode(encoded) == hist
    nbytes = 16 * len(bounds)  # boundaries and counts as 8-byte integers: the sketches' budget
    log(
        f"{kind}: {len(bounds)} boundaries planned in {plan_s:.2f}s from "
        f"{sum(len(r) for r in ranks):,} samples; {len(encoded):,} bytes encoded"
    )

    log(f"{kind}: true ranks")
    truth = Truth(scores, descending)
    pick = np.random.default_rng(args.seed + 1)
    below = np.arange(EXACT_TOP + 1, n + 1)
    sets = {
        "players": pick.choice(below, size=args.sample, replace=False),
        "log-ranks": np.unique(
            np.exp(pick.uniform(math.log(EXACT_TOP + 1), math.log(n), size=args.sample)).astype(
                np.int64
            )
        ),
    }
    del below
    log(f"{kind}: sketches at {nbytes:,} bytes")
    kll = kll_for(scores, nbytes)
    req = req_for(scores, nbytes, hra=descending)
    kll_eps = kll.normalized_rank_error(False)

    def ours(s: int) -> tuple[int, int, int]:
        e: Estimate = hist.estimate(s, codec)
        return e.rank, e.low, e.high

    def from_fraction(ahead: float, width: float) -> tuple[int, int, int]:
        rank = round(ahead) + 1
        return rank, math.floor(ahead - width) + 1, math.ceil(ahead + width) + 1

    def kll_est(s: int) -> tuple[int, int, int]:
        # Members ahead: above the score on a descending board, below it on an ascending one.
        frac = 1 - kll.get_rank(float(s), True) if descending else kll.get_rank(float(s), False)
        return from_fraction(frac * n, kll_eps * n)

    def req_est(s: int) -> tuple[int, int, int]:
        if descending:
            r = req.get_rank(s, True)
            lo, hi = req.get_rank_lower_bound(r, 2), req.get_rank_upper_bound(r, 2)
            ahead, lo_a, hi_a = (1 - r) * n, (1 - hi) * n, (1 - lo) * n
        else:
            r = req.get_rank(s, False)
            lo, hi = req.get_rank_lower_bound(r, 2), req.get_rank_upper_bound(r, 2)
            ahead, lo_a, hi_a = r * n, lo * n, hi * n
        return round(ahead) + 1, math.floor(lo_a) + 1, math.ceil(hi_a) + 1

    req_bytes = len(req.serialize(ds.PyLongsSerDe()))
    for label, true_ranks in sets.items():
        players = truth.players_at_ranks(true_ranks)
        probe = [int(x) for x in scores[players]]
        tr = [int(x) for x in true_ranks]
        results = [
            measure("podium histogram", f"{len(bounds)} bounds", len(encoded), ours, probe, tr),
            measure(
                f"KLL k={kll.k}",
                f"{kll.num_retained} items",
                len(kll.serialize()),
                kll_est,
                probe,
                tr,
            ),
            measure(
                f"REQ k={req.k} hra={req.is_hra()}",
                f"{req.num_retained} items",
                req_bytes,
                req_est,
                probe,
                tr,
            ),
        ]
        print()
        print(
            f"{kind} board, {n:,} players, {args.shards} shards, {args.order}, times "
            f"{args.times}; {len(tr):,} {label} below the exact top ({EXACT_TOP:,})"
        )
        print(
            "| method | size | bytes | p50 | p99 | max | true rank in [low, high] | µs/estimate |"
        )
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in results:
            e = r.errors
            print(
                f"| {r.name} | {r.size} | {r.nbytes:,} | {pct(e[len(e) // 2])} | "
                f"{pct(e[min(len(e) - 1, int(len(e) * 0.99))])} | {pct(e[-1])} | "
                f"{r.covered:,}/{len(e):,} | {pct(r.width)} | {r.micros:.1f} |"
            )
        print(flush=True)


def pct(x: float) -> str:
    return f"{100 * x:.4f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--players", type=int, default=10_000_000)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--sample", type=int, default=10_000)
    ap.add_argument("--boards", default="smooth,steps")
    ap.add_argument("--order", choices=["desc", "asc"], default="desc")
    ap.add_argument("--times", choices=["uniform", "late"], default="uniform")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    log(f"hashing {args.players:,} player ids over {args.shards} shards")
    shard = shards_of(args.players, args.shards)
    for kind in args.boards.split(","):
        run_board(kind, args, shard)
        gc.collect()  # the board's arrays go before the next board's are built
    log("done")


if __name__ == "__main__":
    main()
