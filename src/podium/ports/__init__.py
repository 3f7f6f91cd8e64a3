"""The ports: what the service and the workers need from a backend, and nothing more.

One module per side, each a few small ``typing.Protocol`` classes by scope:

- ``ports.store``: the record (credentials, results, the outbox, players, windows);
- ``ports.index``: the rank index, the index's copy of profiles, and the rank source the
  reads rank through;
- ``ports.log``: the change log between the outbox and the board updaters;
- ``ports.webhooks``: reward and moderation events, delivered to webhooks;
- ``ports.ingest``: a topic of finished matches (``[[ingest]]``), read by the ingest role;
- ``ports.clock``: the time.

Each port has several adapters (``store/``, ``index/``, ``log/``), held to one contract suite
(``tests/contract``); one adapter class may implement several ports. Only ``bootstrap.py``
picks an adapter. Every adapter translates its driver's errors at the boundary: transient
ones into ``podium.errors.Unavailable`` (503, a retry is safe), everything else into
``podium.errors.InternalError`` (500, logged with its traceback).
"""

from podium.ports.clock import Clock, SystemClock
from podium.ports.index import (
    Around,
    BoardKey,
    EntryMetadata,
    Estimated,
    MarkedScore,
    Meta,
    Near,
    Placed,
    ProfileCopy,
    RankIndex,
    RankSource,
    Rebuilding,
    Recounted,
    Resumed,
    ShardIndex,
    Slice,
    Snapshots,
    SplitBoards,
    Spread,
    Top,
)
from podium.ports.log import ChangeLog, Relayed
from podium.ports.marks import AggregatorSlot, BoardMarks, MarkedOutbox
from podium.ports.store import (
    BanRecord,
    Credentials,
    Lifetime,
    Marking,
    MatchFacts,
    MatchRead,
    Moderation,
    Outbox,
    PlayerResult,
    Players,
    RecordHandle,
    Rejected,
    Results,
    Retention,
    ScoreStore,
    TallyRow,
    Windows,
)
from podium.ports.webhooks import Delivery, Due, Event, EventStream, WebhookEvents

__all__ = [
    "AggregatorSlot",
    "Around",
    "BanRecord",
    "BoardKey",
    "BoardMarks",
    "ChangeLog",
    "Clock",
    "Credentials",
    "Delivery",
    "Due",
    "EntryMetadata",
    "Estimated",
    "Event",
    "EventStream",
    "Lifetime",
    "MarkedOutbox",
    "MarkedScore",
    "Marking",
    "MatchFacts",
    "MatchRead",
    "Meta",
    "Moderation",
    "Near",
    "Outbox",
    "Placed",
    "PlayerResult",
    "Players",
    "ProfileCopy",
    "RankIndex",
    "RankSource",
    "Rebuilding",
    "RecordHandle",
    "Recounted",
    "Rejected",
    "Relayed",
    "Results",
    "Resumed",
    "Retention",
    "ScoreStore",
    "ShardIndex",
    "Slice",
    "Snapshots",
    "SplitBoards",
    "Spread",
    "SystemClock",
    "TallyRow",
    "Top",
    "WebhookEvents",
    "Windows",
]
