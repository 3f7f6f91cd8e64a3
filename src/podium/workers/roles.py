"""The background roles, each registered once: its name, the runners it starts (each made
by its own module from the ``Needs`` it is given), and why it would not start in this
process. ``podium serve`` runs every role in this order; ``podium worker --roles`` the ones
it names, and refuses a name not registered here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from podium.errors import ConfigError
from podium.workers import (
    aggregator,
    eraser,
    freezer,
    heartbeats,
    ingest,
    mender,
    pruner,
    reconciler,
    relay,
    updater,
    webhooks,
)
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium")


def _started_everywhere(n: Needs) -> str | None:
    return None


def _updating(n: Needs) -> list[Runner]:
    """The updater's runners, and the mender beside them where the index has markers."""
    return updater.runners(n) + mender.runners(n)


@dataclass(frozen=True)
class Role:
    name: str
    runners: Callable[[Needs], list[Runner]]
    not_needed: Callable[[Needs], str | None] = _started_everywhere  # a reason to skip it, logged


REGISTRY: tuple[Role, ...] = (
    Role("relay", relay.runners),  # outbox rows into the change log
    Role("updater", _updating),  # the log onto the index (and its two checks)
    Role("aggregator", aggregator.runners, aggregator.not_needed),  # a split board's top
    Role("freezer", freezer.runners),  # windows that are due into final standings
    Role("reconciler", reconciler.runners),  # the index checked against the store
    Role("pruner", pruner.runners, pruner.not_needed),  # results past retention into files
    Role("webhooks", webhooks.runners, webhooks.not_needed),  # reward events to endpoints
    Role("ingest", ingest.runners, ingest.not_needed),  # [[ingest]] topics of matches
    Role("eraser", eraser.runners),  # players' erasures carried out, step by step
)
NAMES = tuple(r.name for r in REGISTRY)
_BY_NAME = {r.name: r for r in REGISTRY}


def chosen(names: Iterable[str]) -> list[Role]:
    """The roles named, in the order given; a name not registered is a ``ConfigError``."""
    out = []
    for name in names:
        role = _BY_NAME.get(name)
        if role is None:
            raise ConfigError(f"unknown role {name!r} (available: {', '.join(NAMES)})")
        out.append(role)
    return out


def runners(names: Iterable[str], needs: Needs) -> list[Runner]:
    """The runners of the roles named, every name checked before any runner is made."""
    out: list[Runner] = []
    for role in chosen(names):
        reason = role.not_needed(needs)
        if reason is not None:
            log.info("%s: %s; not started", role.name, reason)
            continue
        out += role.runners(needs)
    if out:  # and what says, in the store, that they loop (podium status)
        out.append(heartbeats.runner(needs.store, out))
    return out
