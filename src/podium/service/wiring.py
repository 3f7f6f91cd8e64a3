"""The use cases, wired once: what the API, the web pages, the command line and the workers
call. Each lives in its own module and takes only the ports it uses:

- ``matches``: recording a match's results (``matches.py``);
- ``keys``: the API keys, issued, revoked and checked on each request (``credentials.py``);
- ``player_admin``: profiles, friends and bans (``player_admin.py``);
- ``board_admin``: a window's review before prizes, and its freeze now (``board_admin.py``);
- ``rebuilds``: the index refilled from the store, profiles included (``rebuilds.py``);
- ``reads``: pages, ranks, friends, distributions (``reads.py``);
- ``lifecycle``: the life of a window: its freeze, final standings, archive (``lifecycle.py``);
- ``health``: whether the store and the index answer (``health.py``);
- ``past``: past windows listed, their standings streamed, a player's history (``past.py``);
- ``groups``: the groups of a board split by country, with their players (``groups.py``);
- ``lookups``: players looked up by id on a board (``lookups.py``);
- ``webhooks``: the admin's list of webhook deliveries (``webhook_admin.py``).
- ``tournaments``: tournaments made, joined, counted and read (``tournaments.py``).
- ``leagues``: league boards' cohorts: placed, read, frozen with their tier moves
  (``leagues.py``).

``Service`` holds them and nothing else: no rule lives here, and the API reaches data only
through these (``tests/unit/test_layout.py`` checks that ``api/`` and ``web/`` touch no
store, index or log). Only ``bootstrap.py`` builds one, from ports.
"""

from __future__ import annotations

from dataclasses import dataclass

from podium.config.settings import Settings
from podium.ports import ChangeLog, Clock, ProfileCopy, RankIndex, RankSource, ScoreStore
from podium.ports.archive import Archive
from podium.service.board_admin import BoardAdmin
from podium.service.credentials import Keys
from podium.service.health import Health
from podium.service.leagues import Leagues
from podium.service.lifecycle import Lifecycle
from podium.service.matches import Matches
from podium.service.player_admin import PlayerAdmin
from podium.service.profiles import ProfileCache
from podium.service.reads.groups import Groups
from podium.service.reads.lookups import Lookups
from podium.service.reads.past import Past
from podium.service.reads.reads import Reads
from podium.service.tournaments import Tournaments
from podium.service.upkeep.rebuilds import Rebuilds
from podium.service.webhook_admin import WebhookAdmin


@dataclass(frozen=True)
class Service:
    settings: Settings
    clock: Clock
    reads: Reads
    lifecycle: Lifecycle
    matches: Matches
    keys: Keys
    player_admin: PlayerAdmin
    board_admin: BoardAdmin
    rebuilds: Rebuilds
    health: Health
    past: Past
    groups: Groups
    lookups: Lookups
    webhooks: WebhookAdmin
    tournaments: Tournaments
    leagues: Leagues

    @classmethod
    def wire(
        cls,
        settings: Settings,
        store: ScoreStore,
        index: RankIndex,
        copy: ProfileCopy,
        clock: Clock,
        archive: Archive,
        ranking: RankSource,
        log: ChangeLog | None = None,
    ) -> Service:
        # One cache of names per process: the reads show them, a profile write forgets one.
        profiles = ProfileCache(store, clock)
        lifecycle = Lifecycle(settings, store, clock, archive, profiles)
        reads = Reads(settings, store, ranking, copy, clock, lifecycle, profiles, index)
        past = Past(store, store, index, clock, lifecycle, archive, reads)
        tournaments = Tournaments(settings, store, store, store, clock, lifecycle, reads, past)
        leagues = Leagues(settings, store, index, lifecycle, profiles, clock)
        return cls(
            settings=settings,
            clock=clock,
            reads=reads,
            lifecycle=lifecycle,
            matches=Matches(settings, store, lifecycle, clock, tournaments, leagues),
            keys=Keys(settings, store, clock),
            player_admin=PlayerAdmin(settings, store, index, copy, clock, profiles, reads),
            board_admin=BoardAdmin(store, reads, lifecycle, leagues),
            rebuilds=Rebuilds(settings, store, index, copy, clock, reads),
            health=Health(store, index, log),
            past=past,
            groups=Groups(store, index, reads, lifecycle, clock),
            lookups=Lookups(reads),
            webhooks=WebhookAdmin(store),
            tournaments=tournaments,
            leagues=leagues,
        )
