"""The use cases, wired once: what the API, the web pages, the command line and the workers
call. Each lives in its own module and takes only the ports it uses:

- ``matches``: recording a match's results (``matches.py``);
- ``keys``: the API keys, issued, revoked and checked on each request (``credentials.py``);
- ``player_admin``: profiles, friends and bans (``player_admin.py``);
- ``board_admin``: a window's review before prizes, and its freeze now (``board_admin.py``);
- ``rebuilds``: the index refilled from the store, profiles included (``rebuilds.py``);
- ``boards``: the board catalogue, configured and made at run time, and the window a
  request names (``boards.py``); ``changed``, what a use case that changed the index tells
  this process's reads (``Reads.clear_cache``);
- ``reads``: pages, ranks, friends, distributions (``reads.py``);
- ``lifecycle``: the life of a window: its freeze, final standings, archive (``lifecycle.py``);
- ``health``: whether the store and the index answer (``health.py``);
- ``past``: past windows listed, their standings streamed, a player's history (``past.py``);
- ``groups``: the groups of a board split by country, with their players (``groups.py``);
- ``lookups``: players looked up by id on a board (``lookups.py``);
- ``webhooks``: the admin's list of webhook deliveries, and a failed one retried
  (``webhook_admin.py``).
- ``search``: players found by id or name, and one player's file, for the admin
  (``moderation.py``).
- ``tournaments``: tournaments made, joined, counted and read (``tournaments.py``).
- ``erasures``: a player's data exported, and erased everywhere (``erasure.py``).
- ``leagues``: league boards' cohorts: placed, read, frozen with their tier moves
  (``leagues.py``).

``Service`` holds them and nothing else: no rule lives here, and the API reaches data only
through these (``tests/unit/test_layout.py`` checks that ``api/`` and ``web/`` touch no
store, index or log). Only ``bootstrap.py`` builds one, from ports and the two choices it
makes for the deployment (how a window is rebuilt, whether reads check the index's markers):
nothing is patched in after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from podium.config.settings import Settings
from podium.ports import ChangeLog, Clock, ProfileCopy, RankIndex, RankSource, ScoreStore
from podium.ports.archive import Archive
from podium.ports.erasure import ArchiveErasure, IndexErasure
from podium.ports.upkeep import UpkeepRecords
from podium.service.board_admin import BoardAdmin
from podium.service.boards import Boards, Changed
from podium.service.credentials import Keys
from podium.service.erasure import Erasures
from podium.service.health import Health
from podium.service.leagues import Leagues
from podium.service.lifecycle import Lifecycle
from podium.service.matches import Matches
from podium.service.moderation import PlayerSearch
from podium.service.player_admin import PlayerAdmin
from podium.service.profiles import ProfileCache
from podium.service.ranks.marked import MarkedRanks
from podium.service.reads.freshness import Freshness
from podium.service.reads.groups import Groups
from podium.service.reads.lookups import Lookups
from podium.service.reads.past import Past
from podium.service.reads.reads import Reads
from podium.service.tournaments import Tournaments
from podium.service.upkeep.progress import NoUpkeep
from podium.service.upkeep.rebuilds import Beside, Rebuilds
from podium.service.webhook_admin import WebhookAdmin


@dataclass(frozen=True)
class Service:
    settings: Settings
    clock: Clock
    boards: Boards
    changed: Changed
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
    search: PlayerSearch
    tournaments: Tournaments
    leagues: Leagues
    erasures: Erasures
    # where a rebuild or a reshard says how far it is, for every process (ports/upkeep.py)
    upkeep: UpkeepRecords = field(default_factory=NoUpkeep)

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
        *,
        beside: Callable[[Changed], Beside] | None = None,
        marked: MarkedRanks | None = None,
        erased_from: Sequence[IndexErasure] = (),
        files: ArchiveErasure | None = None,
        erased_log: IndexErasure | None = None,
        upkeep: UpkeepRecords | None = None,
        freshness: Freshness | None = None,
    ) -> Service:
        """``beside``: how a shared index rebuilds a window beside its live generation,
        given what to tell when it switched (None: refilled in place, the in-process index);
        ``marked``: the reads' check of the index's generation markers, which a league's
        cohort read goes through too (None: an index without markers); ``erased_from``:
        what an erasure clears beside the index (the aggregator's snapshots), ``files`` the
        archive's files it writes again, ``erased_log`` a stream that keeps messages naming a
        player (JetStream's); ``freshness``: how far the board is behind the store, from
        its marks (None: answers never say)."""
        # One cache of names per process: the reads show them, a profile write forgets one.
        profiles = ProfileCache(store, clock)
        lifecycle = Lifecycle(settings, store, clock, archive, profiles)
        boards = Boards(settings.boards, clock)
        reads = Reads(
            settings, boards, store, ranking, copy, clock, lifecycle, profiles, index, freshness
        )
        changed: Changed = reads.clear_cache  # the pages this process holds, read again
        past = Past(store, store, index, clock, lifecycle, archive, boards)
        tournaments = Tournaments(
            settings, store, store, store, clock, lifecycle, boards, reads, past
        )
        leagues = Leagues(settings, store, index, lifecycle, profiles, clock, marked, freshness)
        rebuilt = None if beside is None else beside(changed)
        return cls(
            settings=settings,
            clock=clock,
            boards=boards,
            changed=changed,
            reads=reads,
            lifecycle=lifecycle,
            matches=Matches(settings, store, lifecycle, clock, tournaments, leagues),
            keys=Keys(settings, store, clock),
            player_admin=PlayerAdmin(settings, store, index, copy, clock, profiles, changed),
            board_admin=BoardAdmin(store, boards, reads, lifecycle, changed, leagues),
            rebuilds=Rebuilds(settings, store, index, copy, clock, boards, changed, rebuilt),
            health=Health(store, index, log),
            past=past,
            groups=Groups(store, index, boards, lifecycle, clock, freshness),
            lookups=Lookups(boards, lifecycle, ranking, copy, profiles, clock, freshness),
            webhooks=WebhookAdmin(store, settings, clock),
            search=PlayerSearch(store, clock, settings.boards),
            tournaments=tournaments,
            leagues=leagues,
            erasures=Erasures(settings, store, [index, *erased_from], files, clock, erased_log),
            upkeep=upkeep or NoUpkeep(),
        )
