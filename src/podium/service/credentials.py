"""The API keys: issued (the secret shown once, stored only hashed), listed, revoked, and
checked on each request, one scope per key (invariant 5; ``api/auth.py`` asks for the scope).

Knows the ports, never an adapter.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence

from podium.config.settings import Settings
from podium.domain.models import ApiKey, Scope
from podium.domain.validation import KEY_NAME_MAX, name_problem
from podium.errors import InvalidInput, NotFound, Unauthorized
from podium.ports import Clock
from podium.ports import Credentials as KeyStore
from podium.util.caching import Cache

# Verified keys held, each for ``server.key_cache_s``. A deployment has a few keys per game
# server and admin; a bound far above that keeps memory flat, since only keys that verified
# are held (an unknown or forged token is looked up every time, and never kept).
MAX_KEYS = 10_000


def hash_key(secret: str) -> str:
    # Keys are 256-bit random tokens, so a plain digest is enough: there is nothing to
    # brute-force that a slow hash would protect.
    return hashlib.sha256(secret.encode()).hexdigest()


class Keys:
    def __init__(self, settings: Settings, store: KeyStore, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        # key_cache_s = 0: nothing is held, every request looks its key up (requests for one
        # key at the same moment still share the lookup).
        self._verified: Cache[str, ApiKey] = Cache(MAX_KEYS, settings.server.key_cache_s, clock.now)

    async def create(
        self, name: str, modes: Sequence[str], admin: bool = False, *, scope: Scope | None = None
    ) -> tuple[ApiKey, str]:
        """A new key and its secret (shown once, stored only hashed). ``scope`` defaults to
        admin when ``admin`` is set, else a game server's; only game-server keys have modes."""
        scope = scope or (Scope.ADMIN if admin else Scope.GAME)
        # The admin reads the name in lists of keys, on a terminal too: a newline, an escape
        # sequence or a bidi control in it could forge a line of ``podium keys list``.
        if why := name_problem("name", name, KEY_NAME_MAX):
            raise InvalidInput(why)
        # Each mode once, in the order given: a key's modes are a set the admin reads.
        modes = list(dict.fromkeys(modes))
        for m in modes:
            if self.settings.mode(m) is None:
                raise InvalidInput(f"unknown mode {m!r}")
        if scope is Scope.GAME and not modes:
            raise InvalidInput("a game-server key needs at least one mode")
        if scope is not Scope.GAME and modes:
            raise InvalidInput(f"an {scope.value} key submits no results: give it no modes")
        key_id = secrets.token_hex(6)
        secret = f"pdm_{key_id}_{secrets.token_urlsafe(32)}"
        key = ApiKey(key_id, name, hash_key(secret), tuple(modes), scope, self.clock.now())
        await self.store.add_key(key)
        return key, secret

    async def all(self) -> list[ApiKey]:
        """Every key, the revoked ones too."""
        return await self.store.list_keys()

    async def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key: this process refuses it at once, every other process once its
        cached copy expires, within ``server.key_cache_s``."""
        key = await self.store.revoke_key(key_id, self.clock.now())
        if key is None:
            raise NotFound(f"no key {key_id!r}")
        self._verified.forget(key.key_hash)
        return key

    async def authenticate(self, token: str | None) -> ApiKey:
        """The key behind a bearer token. A verified key is trusted for ``key_cache_s``
        without a lookup, so a revocation reaches every process within that bound."""
        if not token:
            raise Unauthorized("a credential is required: Authorization: Bearer <key>")
        digest = hash_key(token)
        return await self._verified.get_or_load(digest, lambda: self._look_up(digest))

    async def _look_up(self, digest: str) -> ApiKey:
        key = await self.store.key_by_hash(digest)
        if key is None:
            raise Unauthorized("unknown credential")
        if key.revoked:
            raise Unauthorized("this credential was revoked")
        return key
