"""What a deployment is made of: one store or a store split by player, which rank index over
how many shards, which change log.

``bootstrap.topology(settings)`` decides it once, from the settings' URLs (bootstrap is the one
place that reads them); every other module that must know (the command line, the start of the
in-process index, which rank source the reads use) asks this value instead of reading a URL
again. It holds kinds and counts only, never an adapter, so it imports nothing of podium.

It also reads the one index URL that names more than a server, ``redis+sentinel://``
(``sentinel_address``), for the settings' check (config/settings.py) and for bootstrap, which hands
the parts to the Sentinel adapter (``index/redis/sentinel.py``); and, for the settings' check, the
hosts and ports of every other store, index and log URL (``address_problem``), as each
adapter will read them, so that a bad one stops the start naming the setting rather than
failing inside a driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

StoreKind = Literal["sqlite", "postgres", "split"]  # split: Postgres databases by player
# memory: this process's own; sentinel: one Redis primary that Sentinel names, its replicas
IndexKind = Literal["memory", "redis", "cluster", "sentinel"]
LogKind = Literal["outbox", "nats", "kafka"]


@dataclass(frozen=True, slots=True)
class Topology:
    store: StoreKind
    index: IndexKind
    shards: int  # index shards a board is split across by player (1: one sorted set)
    log: LogKind

    @property
    def split_store(self) -> bool:
        """The store is split by player across Postgres databases (``store.shards``)."""
        return self.store == "split"

    @property
    def in_process_index(self) -> bool:
        """The index lives in this process alone: no other process shares it, and it is
        rebuilt from the store at every start (invariant 1: the index is a copy)."""
        return self.index == "memory"

    @property
    def events_published(self) -> bool:
        """The log publishes the store's events (NATS: on its stream; Kafka: on the events
        topic): an event is done with only once it is there too (the event pruner)."""
        return self.log in ("nats", "kafka")

    @property
    def aggregated(self) -> bool:
        """Boards are split across more than one index shard: the aggregator merges their
        tops, and reads answer from its snapshot. One shard is the whole board, every rank
        on it exact, as on an index that is not split."""
        return self.shards > 1


SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379  # Sentinel's own port, where a host names none
SENTINEL_FORM = "redis+sentinel://[user:password@]HOST:PORT[,HOST:PORT...]/SERVICE[?db=N]"
_SENTINEL_OPTIONS = ("db", "sentinel_password")


@dataclass(frozen=True, slots=True)
class SentinelAddress:
    """What ``redis+sentinel://`` names: the Sentinels to ask, the service (Sentinel's name
    for the primary it watches, ``sentinel monitor <SERVICE> ...``), the database, and the
    credentials of the Redis nodes (the URL's user and password) and of the Sentinels
    themselves (``?sentinel_password=``; none by default: Sentinels often have none)."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.startswith(f"{SENTINEL_SCHEME}://")


def sentinel_address(url: str) -> SentinelAddress:
    """The parts of a ``redis+sentinel://`` URL; ValueError saying what is wrong (never
    echoing the URL, which may hold a password)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # a "[" without its "]"
        raise ValueError(f"expected {SENTINEL_FORM}: not a URL") from None
    if parts.scheme != SENTINEL_SCHEME:
        raise ValueError(f"expected {SENTINEL_FORM}: not a Sentinel URL")
    auth, _, hosts = parts.netloc.rpartition("@")
    user, _, password = auth.partition(":")
    sentinels = tuple(_host_port(h) for h in hosts.split(","))
    service = parts.path.removeprefix("/")
    if not service or "/" in service:
        raise ValueError(f"expected {SENTINEL_FORM}: the path must be the service's name alone")
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ValueError(f"expected {SENTINEL_FORM}: the query is not name=value&...") from None
    unknown = sorted(set(query) - set(_SENTINEL_OPTIONS))
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} (known: {', '.join(_SENTINEL_OPTIONS)})")
    if any(len(v) > 1 for v in query.values()):
        raise ValueError("an option is given twice in the query")
    db = query.get("db", ["0"])[0]
    if not db.isdigit():
        raise ValueError(f"?db=: expected a database number (0 or more), got {db!r}")
    return SentinelAddress(
        sentinels,
        unquote(service),
        int(db),
        unquote(user) or None,
        unquote(password) or None,
        query.get("sentinel_password", [""])[0] or None,
    )


def _host_port(text: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[::1]:port``; Sentinel's own port where none is given."""
    text = text.strip()
    if text.startswith("["):  # an IPv6 address, bracketed
        host, _, rest = text[1:].partition("]")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
        rest = f":{port}"
    else:
        host, rest = text, ""
    port = rest.removeprefix(":")
    fine = rest == "" or (rest.startswith(":") and port.isdigit() and 0 < int(port) < 65536)
    if not host or not fine:
        raise ValueError(f"expected {SENTINEL_FORM}: {text!r} is not a Sentinel's HOST:PORT")
    return host, int(port) if rest else SENTINEL_PORT


def address_problem(url: str) -> str | None:
    """What is wrong with the servers ``url`` names, as its adapter would read them (every
    ``HOST[:PORT]`` with a port of 1 to 65535; one server for a single Redis, whose path is
    its database number; a port for each node of a cluster), or None. The words name the
    bad part, never the URL's user or password."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme in ("sqlite", "memory", "outbox", SENTINEL_SCHEME):
        return None  # no server, or read whole by sentinel_address
    netloc, path = rest, ""
    for i, c in enumerate(rest):
        if c in "/?#":
            netloc, path = rest[:i], rest[i:]
            break
    if "@" not in netloc and "@" in path.partition("?")[0]:
        # A password with a / ? or # in it, unencoded: what looks like the host would be
        # part of it, so none of it is named.
        return "the user or password holds a / ? or #: percent-encode it (%2F %3F %23)"
    if scheme == "nats":  # each server of the list may carry its own user (log/nats/log.py)
        hosts = [h.rpartition("@")[2] for h in netloc.split(",")]
    else:
        hosts = netloc.rpartition("@")[2].split(",")
    cluster = scheme.endswith("+cluster")
    if scheme in ("redis", "rediss") and len(hosts) > 1:
        return f"one Redis is one HOST:PORT, not {len(hosts)} (redis+cluster:// names several)"
    for host in hosts:
        if problem := _address(host.strip(), port_needed=cluster):
            return problem
    if scheme in ("redis", "rediss"):
        db = path.partition("?")[0].removeprefix("/")
        if db and not db.isdigit():
            return f"the path is the database number, got {db!r}"
    if cluster and path not in ("", "/", "/0"):  # index/redis/cluster.py reads neither
        return f"Redis Cluster has only database 0, and no options: got {path!r}"
    return None


def _address(text: str, *, port_needed: bool) -> str | None:
    if text.startswith("["):  # an IPv6 address, bracketed
        _, close, rest = text[1:].partition("]")
        if not close:
            return f"{text!r} opens a [ it never closes"
        if rest and not rest.startswith(":"):
            return f"{text!r} is not [ADDRESS]:PORT"
        port = rest.removeprefix(":") if rest else None
    else:
        _, colon, port_text = text.partition(":")
        port = port_text if colon else None
    if port is None or port == "":
        return f"{text!r} names no port" if port_needed else None
    if not (port.isdigit() and 0 < int(port) < 65536):
        return f"port {port!r} of {text!r} is not a number from 1 to 65535"
    return None
