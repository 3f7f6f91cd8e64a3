"""A frozen window's standings file read back, as the routes of past windows read it.

Writes one archive file of ``--rows`` players (as the freezer does), then, ``--rounds`` times:

- checksum: the file's sha256 (what a process checks once before serving it);
- find:     one player's line, the last of the file and one absent (a history read of a
            player below the kept top: the whole file searched);
- raw:      the file's bytes streamed (the CSV to a client that takes gzip);
- csv:      the CSV decompressed and streamed (to one that does not);
- jsonl:    every row as a JSON line, streamed.

Prints seconds and rows/s per figure, the median of the rounds, and the file's size.

    python benchmarks/standings.py [--rows 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from podium.archive.standings import FileArchive
from podium.domain.models import FinalEntry


async def _drain(chunks: AsyncIterator[bytes]) -> int:
    n = 0
    async for c in chunks:
        n += len(c)
    return n


async def _timed(fn: Callable[[], Awaitable[object]]) -> float:
    t = time.perf_counter()
    await fn()
    return time.perf_counter() - t


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.rows
    with tempfile.TemporaryDirectory() as d:
        a = FileArchive(d)
        entries = [
            FinalEntry(i + 1, i + 1, f"player-{i:08d}", n - i, 1_790_000_000 + i % 86_400)
            for i in range(n)
        ]
        t = time.perf_counter()
        name, _ = await a.write("day", "2026-12-01", entries, 1_790_000_000.0)
        wrote = time.perf_counter() - t
        del entries
        size = (Path(d) / name).stat().st_size
        print(f"rows {n}  file {size / 1e6:.1f} MB  written in {wrote:.2f} s")
        last = f"player-{n - 1:08d}"
        figures: dict[str, Callable[[], Awaitable[object]]] = {
            "checksum": lambda: a.checksum(name),
            "find last": lambda: a.find(name, last),
            "find absent": lambda: a.find(name, "nobody"),
            "raw": lambda: _drain(a.raw(name)),
            "csv": lambda: _drain(a.text(name)),
            "jsonl": lambda: _drain(a.jsonl(name)),
        }
        runs: dict[str, list[float]] = {k: [] for k in figures}
        for r in range(args.rounds):
            for k, fn in figures.items():
                s = await _timed(fn)
                runs[k].append(s)
                print(f"round {r + 1}  {k:12s} {s:7.3f} s  {n / s / 1e6:6.2f} M rows/s")
        print("medians:")
        for k, xs in runs.items():
            m = statistics.median(xs)
            print(f"  {k:12s} {m:7.3f} s  {n / m / 1e6:6.2f} M rows/s")


if __name__ == "__main__":
    asyncio.run(main())
