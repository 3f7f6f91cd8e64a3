"""What a load run counts, and its summary as plain data (the ``--json`` document and what
the display prints). Pure: the driver tells it what happened and when."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from podium.loadgen.latency import Rate, Recorder
from podium.loadgen.mix import READS

SUBMIT = "submit"
ROUTES = (SUBMIT, *READS)
NO_ANSWER = "no answer"  # a transport failure: a timeout, a connection refused or lost
PERCENTILES = (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9))
SUMMARY_FORMAT = 1


@dataclass
class Verified:
    """The read-back of ``--verify``: every submitted player's total on each board checked
    against the total their submissions answered."""

    players: int = 0
    checked: int = 0
    skipped: list[str] = field(default_factory=list)  # boards it could not judge, and why
    mismatches: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Tally:
    """Counts, latencies and errors of a run, by route."""

    matches_sent: int = 0
    matches_acknowledged: int = 0
    matches_failed: int = 0
    results_acknowledged: int = 0
    retries: int = 0
    rank_not_yet: int = 0  # a rank read before the updater brought the player in: a 404
    commit_sampled: int = 0
    commit_not_seen: int = 0
    commit_skipped: int = 0  # samples passed over while too many pollers were out
    poll_reads: int = 0
    latency: dict[str, Recorder] = field(default_factory=lambda: {r: Recorder() for r in ROUTES})
    commit: Recorder = field(default_factory=Recorder)
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)
    results_rate: Rate = field(default_factory=Rate)
    reads_rate: Rate = field(default_factory=Rate)

    def answered(self, route: str, at: float, latency: float) -> None:
        """A request of ``route`` answered with a 2xx at ``at`` (seconds into the run), due
        ``latency`` seconds before."""
        self.latency[route].record(latency)
        if route != SUBMIT:
            self.reads_rate.add(at)

    def failed(self, route: str, status: int | str) -> None:
        self.errors[(route, str(status))] += 1

    def acknowledged(self, at: float, results: int) -> None:
        self.matches_acknowledged += 1
        self.results_acknowledged += results
        self.results_rate.add(at, results)

    def reads(self) -> int:
        return sum(self.latency[r].count for r in READS)

    def errors_by_route(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (route, status), n in sorted(self.errors.items()):
            out.setdefault(route, {})[status] = n
        return out


def failures(t: Tally, v: Verified) -> list[str]:
    """Why ``--verify`` did not pass (nothing: it passed). It passes only when it could
    vouch for every match of the run: each one acknowledged (a refused match, one without
    an answer, or one cut off at the end leaves its results unknown or unrecorded), at
    least one total read back, and every total read back equal to what was answered."""
    out = []
    missing = t.matches_sent - t.matches_acknowledged
    if missing:
        out.append(
            f"{missing:,} of {t.matches_sent:,} matches were not acknowledged "
            "(refused, unanswered or cut off: see errors)"
        )
    if v.checked == 0:
        out.append("no total could be read back (no result acknowledged, or no board judged)")
    if v.mismatches:
        out.append(f"{len(v.mismatches):,} totals read back differ from what was answered")
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def percentiles(r: Recorder) -> dict[str, Any]:
    out: dict[str, Any] = {"count": r.count}
    for name, q in PERCENTILES:
        out[f"{name}_ms"] = _ms(r.percentile(q))
    out["max_ms"] = _ms(r.high if r.count else None)
    return out


def summary(
    t: Tally,
    *,
    elapsed_s: float,
    offered_s: float,
    settings: dict[str, Any],
    notes: list[str],
    verified: Verified | None,
) -> dict[str, Any]:
    """The run as JSON, latencies in milliseconds. ``elapsed_s``: from the first match due
    to the last answer of the load (its ``offered_s`` of new matches, then the drain of
    those still in flight); the rates are over all of it, so a server that falls behind
    shows a lower rate, never the one it was offered."""
    span = max(elapsed_s, 1e-9)
    reads = t.reads()
    commit = percentiles(t.commit)
    return {
        "format": SUMMARY_FORMAT,
        "settings": settings,
        "elapsed_s": round(elapsed_s, 3),
        "offered_s": round(offered_s, 3),
        "matches": {
            "sent": t.matches_sent,
            "acknowledged": t.matches_acknowledged,
            "failed": t.matches_failed,
            "retries": t.retries,
        },
        "results": {
            "acknowledged": t.results_acknowledged,
            "per_s": round(t.results_acknowledged / span, 2),
        },
        "reads": {
            "answered": reads,
            "per_s": round(reads / span, 2),
            "by_route": {r: t.latency[r].count for r in READS},
            "rank_not_on_board_yet": t.rank_not_yet,
        },
        "routes": {r: percentiles(t.latency[r]) for r in ROUTES},
        "commit_to_board": {
            "sampled": t.commit_sampled,
            "seen": t.commit.count,
            "not_seen": t.commit_not_seen,
            "skipped": t.commit_skipped,
            "poll_reads": t.poll_reads,
            "p50_ms": commit["p50_ms"],
            "p99_ms": commit["p99_ms"],
            "max_ms": commit["max_ms"],
        },
        "errors": t.errors_by_route(),
        "verify": None
        if verified is None
        else {
            "passed": not failures(t, verified),
            "failures": failures(t, verified),
            "players": verified.players,
            "checked": verified.checked,
            "mismatch_count": len(verified.mismatches),
            "mismatches": verified.mismatches[:100],
            "skipped": verified.skipped,
        },
        "notes": notes,
    }
