"""A player's messages deleted from the JetStream stream (``ports/erasure.py``).

A player's changes share one subject (their partition's, ``<stream>.changes.<p>``), beside
everyone else's of that partition, so the stream cannot be purged by subject without losing
others' changes. Instead every message of that subject, and of the events' subjects, is read
by sequence (``STREAM.MSG.GET`` with ``next_by_subj``) and each one that names the player is
deleted by its sequence (``STREAM.MSG.DELETE``, which overwrites the message on the server's
disk unless asked not to). Messages past ``[log] retention_s`` are gone by themselves; this
reaches the rest at once. Every copy of a clustered stream deletes the same sequence.
"""

from __future__ import annotations

import nats.js.errors
from nats.js import JetStreamContext

from podium.log.events import partition_of
from podium.log.nats.errors import translated


async def erase_messages(
    js: JetStreamContext, stream: str, subjects: list[str], player_id: str
) -> int:
    """Delete every message on ``subjects`` whose body names ``player_id``; how many."""
    # The event's member (a change's, compact JSON; an event's webhook body, as its store
    # wrote it: compact, or with Postgres's spaces), never any other value equal to the id.
    needles = [f'"playerId":{sep}"{player_id}"'.encode() for sep in ("", " ")]
    needles.append(f'"playerId" : "{player_id}"'.encode())
    gone = 0
    for subject in subjects:
        seq = 1
        while True:
            with translated(f"read stream {stream}"):
                try:
                    msg = await js.get_msg(stream, seq=seq, subject=subject, next=True)
                except nats.js.errors.NotFoundError:
                    break  # none past ``seq`` on this subject
            assert msg.seq is not None
            if any(n in (msg.data or b"") for n in needles):
                with translated(f"delete from stream {stream}"):
                    await js.delete_msg(stream, msg.seq)
                gone += 1
            seq = msg.seq + 1
    return gone


def player_subjects(stream: str, partitions: int, player_id: str) -> list[str]:
    """Where a player's messages are: their partition's changes, and the events."""
    return [f"{stream}.changes.{partition_of(player_id, partitions)}", f"{stream}.events.>"]
