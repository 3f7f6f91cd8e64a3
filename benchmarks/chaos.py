"""The chaos run at length: a fleet on loopback on private servers (two API processes, two
updaters, two relays, the aggregator and its standby, the freezer; two Postgres servers, a
3+3 Redis Cluster, a NATS cluster of 3) under a steady load of results and reads from game
servers that retry (``podium.client``), while an API process, a relay and an updater are
killed with -9, a Redis primary is killed while its replica lags, a store database is
restarted and a NATS node stopped and started (``--log kafka``: the log on a private Kafka
cluster of 3, and the node leading the changes' partition 0 killed and started). Beside it
(``--reference``), the same fleet and load with nothing broken, in the same run.

Prints results sent, acknowledged, retried, lost (must be 0) and doubled (must be 0), the
longest time from an acknowledgment to the board, reads by status, and whether every board
equals the store; exits 1 if anything was lost or doubled or a board differs.

The scenario and its private servers are the tests' own (``tests/integration/chaos.py``,
which CI runs short): this script runs it from the repository's root.

    python benchmarks/chaos.py [--seconds 300] [--players 2000] [--rate 20] [--reference]
        [--log kafka]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, beside benchmarks/

from tests.integration import chaos


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300.0, help="the load runs this long")
    ap.add_argument("--players", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=20.0, help="matches a second (2 players each)")
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--reference", action="store_true", help="also a run with nothing broken")
    ap.add_argument(
        "--log", choices=("nats", "kafka"), default="nats", help="the change log's cluster"
    )
    args = ap.parse_args()
    load = dict(
        seconds=args.seconds,
        players=args.players,
        rate=args.rate,
        senders=args.senders,
        readers=args.readers,
        log=args.log,
    )
    runs = [("chaos", True)] + ([("reference", False)] if args.reference else [])
    ok = True
    for name, breaks in runs:
        f = asyncio.run(chaos.run(**load, breaks=breaks))
        for line in f.lines():
            print(f"{name}: {line}", flush=True)
        ok = ok and f.ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
