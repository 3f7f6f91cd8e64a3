"""The change event as it travels on JetStream: version 1 of ``schemas/change-event.v1.json``.

Published so that other services (analytics, notifications) can subscribe to the same
stream: one JSON object per message, camelCase like the HTTP API, every event carrying its
schema ``version``. A consumer that meets a version it does not know must skip the event,
not guess; podium's own decoder refuses it (``EventError``) and the log drops it loudly.

Each event names the outbox row it was published from (``source``, ``row``): the message id
that JetStream's duplicate window checks is made of them and of a digest of the event, so a
relay that re-publishes a row after a crash is dropped as a duplicate, while row 17 of two
databases (two sources), or of a database made anew (other content), are two messages.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

from podium.domain.boards import Tally
from podium.domain.metadata import MetadataError, canonical
from podium.domain.models import Change, Message, ProfileChange
from podium.domain.sharding import bucket_of

VERSION = 1
SCHEMA_ID = "urn:podium:schema:change-event:v1"  # the $id of schemas/change-event.v1.json


class EventError(ValueError):
    """A message that is not a change event podium can read (another version, a stranger)."""


class OtherVersion(EventError):
    """A change event of a version this podium does not know (a newer relay's)."""


def source_of(url: str) -> str:
    """A short, stable name of one store database, from its URL without credentials: the
    same database named the same way by every relay that reads it, and never a password
    on the wire."""
    u = urlsplit(url)
    where = f"{u.scheme}://{u.hostname or ''}:{u.port or ''}{u.path}"
    return hashlib.blake2b(where.encode(), digest_size=6).hexdigest()


def partition_of(player_id: str, partitions: int) -> int:
    """The partition of a player's changes: from the same stable hash as every split."""
    return bucket_of(player_id) % partitions


def encode(message: Message, source: str, row: int) -> bytes:
    """The event of one outbox row, as bytes (keys sorted: one row, one byte string)."""
    event: dict[str, Any] = {
        "version": VERSION,
        "playerId": message.player_id,
        "committedAt": message.committed_at,
        "source": source,
        "row": row,
    }
    if isinstance(message, Change):
        event |= {
            "type": "total",
            "board": message.board,
            "window": message.window,
            "total": message.tally.total,
            "reachedAt": message.tally.reached_at,
            "tallyVersion": message.tally.version,
            "scored": message.tally.scored,
            "removed": message.removed,
        }
        if message.replaces:
            # Left out when false, so an event is byte for byte what it was before recounts.
            event["replaces"] = True
        if message.tally.metadata is not None:
            # An object on the wire, for other subscribers; left out when there is none, so
            # an event without it is byte for byte what it was before metadata existed.
            event["metadata"] = json.loads(message.tally.metadata)
    else:
        event |= {"type": "profile", "profileVersion": message.version}
    return json.dumps(event, sort_keys=True, separators=(",", ":")).encode()


def message_id(payload: bytes, source: str, row: int) -> str:
    """The ``Nats-Msg-Id`` of one row's event: its database, its row and its content."""
    digest = hashlib.blake2b(payload, digest_size=8).hexdigest()
    return f"{source}-{row}-{digest}"


def decode(payload: bytes, handle: object) -> Message:
    """The change an event carries, with the log's ``handle``; ``EventError`` if unreadable."""
    try:
        event = json.loads(payload)
        if not isinstance(event, dict):
            raise EventError("not a JSON object")
        if event.get("version") != VERSION:
            raise OtherVersion(f"change event version {event.get('version')!r}, not {VERSION}")
        player, committed = _str(event["playerId"]), _num(event["committedAt"])
        if event["type"] == "profile":
            return ProfileChange(player, _int(event["profileVersion"]), committed, handle)
        if event["type"] != "total":
            raise EventError(f"unknown change event type {event['type']!r}")
        tally = Tally(
            _int(event["total"]),
            _int(event["reachedAt"]),
            _int(event["tallyVersion"]),
            _bool(event["scored"]),
            _metadata(event.get("metadata")),
        )
        return Change(
            _str(event["board"]),
            _str(event["window"]),
            player,
            tally,
            committed,
            _bool(event["removed"]),
            handle,
            _bool(event.get("replaces", False)),
        )
    except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EventError(f"not a change event: {e!r}") from None


def _metadata(v: object) -> str | None:
    """An event's metadata in canonical form; absent (None) on events from before it."""
    if v is None:
        return None
    try:
        return canonical(v)
    except MetadataError as e:
        raise TypeError(f"metadata {e}") from None


def _str(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {v!r}")
    return v


def _int(v: object) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _num(v: object) -> float:
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise TypeError(f"expected a number, got {v!r}")
    return float(v)


def _bool(v: object) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"expected true or false, got {v!r}")
    return v
