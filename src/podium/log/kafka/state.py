"""One partition's deliveries, kept in the consumer group's committed offset.

Kafka's consumer group keeps, per partition, an offset and a metadata string beside it. The
offset is the group's progress as Kafka's own tools read it (``kafka-consumer-groups
--describe``, lag): the first message not yet applied, all before it applied to the board.
The metadata holds what the port needs beyond an offset, compact JSON:

- ``f``: the frontier, the first offset never delivered: what is past it is new;
- ``a``: offsets at or past the committed one that were acked already (ranges): a message
  acked while an earlier one is still held is never delivered again, and the committed offset
  jumps over it once the earlier one is acked;
- ``l``: leases (ranges, each with its holder's token and its end in epoch milliseconds).

Every offset between the committed one and the frontier that is neither acked nor leased (a
lease ran out: its holder crashed, or is too slow; or it was given back) is delivered again,
before anything new of its partition. So the committed offset never passes a message that
was not applied (nothing is skipped), and whatever is not acked comes back.

A state is read, changed and written back by one process at a time per partition (a lock in
the process); two processes that change one partition's state at the same moment can lose
one of the two writes, which only ever delivers something again: a lease lost (its
messages delivered again at once), an ack lost (delivered again after its lease), a
frontier moved back (delivered again). Never the committed offset moved over a message
that nobody acked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

METADATA_MAX = 4000  # bytes: the broker's offset.metadata.max.bytes is 4096 by default


@dataclass
class Lease:
    holder: str
    until_ms: int


@dataclass
class State:
    committed: int = 0  # the first offset not applied
    frontier: int = 0  # the first offset never delivered
    acked: set[int] = field(default_factory=set)  # applied, at or past ``committed``
    leases: dict[int, Lease] = field(default_factory=dict)

    # -- reading and writing ---------------------------------------------------------------

    @classmethod
    def read(cls, offset: int, metadata: str | None) -> State:
        """From a committed offset (negative: none yet) and its metadata (``None``: none,
        or written by something else than this log, which is taken as no more than an
        offset)."""
        committed = max(0, offset)
        st = cls(committed, committed)
        if not metadata:
            return st
        try:
            raw = json.loads(metadata)
            frontier = int(raw["f"])
            acked = {o for lo, hi in raw.get("a", []) for o in range(int(lo), int(hi))}
            leases = {
                o: Lease(str(holder), int(until))
                for lo, hi, holder, until in raw.get("l", [])
                for o in range(int(lo), int(hi))
            }
        except (ValueError, TypeError, KeyError):
            return st
        st.frontier = max(committed, frontier)
        st.acked = {o for o in acked if committed <= o < st.frontier}
        st.leases = {o: v for o, v in leases.items() if committed <= o < st.frontier}
        return st

    def metadata(self) -> str:
        """The metadata to commit beside ``committed``, within ``METADATA_MAX``: what does
        not fit is left out, the highest acked offsets first (delivered again after all)."""
        acked = _ranges(sorted(self.acked))
        leases: list[list[object]] = []
        for lo, hi in _ranges(sorted(self.leases), key=lambda o: self.leases[o]):
            lease = self.leases[lo]
            leases.append([lo, hi, lease.holder, lease.until_ms])
        while True:
            raw: dict[str, object] = {"f": self.frontier}
            if acked:
                raw["a"] = acked
            if leases:
                raw["l"] = leases
            text = json.dumps(raw, separators=(",", ":"))
            if len(text.encode()) <= METADATA_MAX:
                return text
            # a tenth at a time, the highest first: what is left out is delivered again
            if acked:
                del acked[-max(1, len(acked) // 10) :]
            else:
                del leases[-max(1, len(leases) // 10) :]

    # -- changing --------------------------------------------------------------------------

    def free(self, now_ms: int) -> list[int]:
        """The offsets delivered already, neither acked nor held: to deliver again."""
        return [
            o
            for o in range(self.committed, self.frontier)
            if o not in self.acked and (o not in self.leases or self.leases[o].until_ms <= now_ms)
        ]

    def take(self, offsets: Iterable[int], holder: str, until_ms: int) -> None:
        for o in offsets:
            self.leases[o] = Lease(holder, until_ms)
            self.frontier = max(self.frontier, o + 1)

    def ack(self, offsets: Iterable[int]) -> None:
        for o in offsets:
            if o < self.committed:
                continue  # acked before
            self.acked.add(o)
            self.leases.pop(o, None)
            self.frontier = max(self.frontier, o + 1)
        while self.committed in self.acked:
            self.acked.discard(self.committed)
            self.committed += 1

    def renew(self, offsets: Iterable[int], holder: str, now_ms: int, until_ms: int) -> None:
        """Leases started again: of what this holder holds, or nobody does."""
        for o in offsets:
            if o < self.committed or o in self.acked or o >= self.frontier:
                continue
            lease = self.leases.get(o)
            if lease is None or lease.holder == holder or lease.until_ms <= now_ms:
                self.leases[o] = Lease(holder, until_ms)

    def give_back(self, offsets: Iterable[int] | None, holder: str, now_ms: int) -> int:
        """Leases ended at once (all of this holder's with ``None``): of what this holder
        holds (or nobody does, any more); how many were this holder's."""
        mine = 0
        for o in list(self.leases) if offsets is None else offsets:
            lease = self.leases.get(o)
            if lease is None:
                continue
            if lease.holder == holder:
                mine += lease.until_ms > now_ms
                del self.leases[o]
            elif lease.until_ms <= now_ms:
                del self.leases[o]
        return mine


def _ranges(offsets: list[int], key: Callable[[int], object] | None = None) -> list[list[int]]:
    """Sorted offsets as ``[lo, hi)`` ranges; with ``key``, a range also ends where the key
    of its offsets changes."""
    out: list[list[int]] = []
    for o in offsets:
        if out and out[-1][1] == o and (key is None or key(o) == key(out[-1][0])):
            out[-1][1] = o + 1
        else:
            out.append([o, o + 1])
    return out
