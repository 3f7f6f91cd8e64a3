"""A JetStream message's handle, as the NATS log and its replay deliver it."""

from __future__ import annotations

from dataclasses import dataclass

from podium.domain.models import Message


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message's handle: where to settle it, and when its lease ends at the latest as
    this process can tell (measured from before the request that brought it)."""

    reply: str
    stream_seq: int
    lease_ends: float  # time.monotonic()


def delivery(m: Message) -> Delivery:
    """A message's handle, checked to be one of the NATS log's."""
    if not isinstance(m.handle, Delivery):
        raise TypeError(f"not a message of the NATS log: handle {m.handle!r}")
    return m.handle
