"""The ``[[webhooks]]`` tables of the settings file: where reward and moderation events are
POSTed (``workers/webhooks.py``), signed with which secret, for which events, and how long
a failing endpoint is retried. ``config/settings.py`` reads them with the rest of the file; the
messages follow its style (``webhooks[0].events: unknown event 'window.closed' (known: ...)``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Annotated, Any

from annotated_types import Ge, Gt, Le
from pydantic import BeforeValidator, ConfigDict, Strict, field_validator
from pydantic.dataclasses import dataclass as table

from podium.domain.events import EVENT_TYPES, Retry
from podium.util.redact import redact_url

SECRET_PREFIX = "whsec_"  # Standard Webhooks' secrets: the prefix, then the key in base64


def _number(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"expected a number, got {v!r}")
    return float(v)


def _text(v: Any) -> Any:
    if not isinstance(v, str) or not v:
        raise ValueError(f"expected a string, got {v!r}")
    return v


Seconds = Annotated[float, BeforeValidator(_number), Strict(), Gt(0), Le(7 * 86_400)]


@table(
    frozen=True,
    config=ConfigDict(extra="forbid", use_attribute_docstrings=True, title="[[webhooks]]"),
)
class WebhookTable:
    """An endpoint that receives reward and moderation events, signed as Standard Webhooks
    sign them, each at least once."""

    url: Annotated[str, BeforeValidator(_text)]
    """Where events are POSTed: http:// or https://. A password in it (user:pass@) and secret
    query values (token=, key=, sig=, ...) are sent, but shown and logged as ***."""
    secret: Annotated[str, BeforeValidator(_text)] = dataclasses.field(repr=False)  # never in a log
    """The signing secret, as Standard Webhooks writes it: whsec_ then base64 (at least 16
    bytes); the receiver verifies webhook-signature with it."""
    events: Annotated[tuple[str, ...], BeforeValidator(lambda v: v)]
    """The events sent here: any of window.frozen, tournament.ended, cohort.frozen,
    player.flagged, player.banned."""
    timeout_s: Seconds = 10.0
    """How long an attempt may take, all of it (connecting, sending, the answer); past it,
    the attempt failed."""
    retry_first_s: Seconds = 5.0
    """The wait after a first failed attempt; it doubles with every failure (with jitter),
    up to 6 hours."""
    retry_for_s: Annotated[float, BeforeValidator(_number), Strict(), Ge(0)] = 86_400.0
    """How long after its first attempt an event is retried; then its delivery is failed."""

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"expected http://... or https://..., got {redact_url(url)!r}")
        if len(url.encode()) > 1024:  # kept with every delivery, and named in its list
            raise ValueError("expected at most 1024 bytes")
        return url

    @field_validator("secret")
    @classmethod
    def _secret(cls, secret: str) -> str:
        key = b""
        if secret.startswith(SECRET_PREFIX):
            try:
                key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
            except (binascii.Error, ValueError):
                key = b""
        if len(key) < 16:
            # Never echo a secret back into a log: say what it should look like.
            raise ValueError("expected whsec_ and at least 16 bytes in base64")
        return secret

    @field_validator("events", mode="before")
    @classmethod
    def _events(cls, names: Any) -> Any:
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"expected a list of strings, got {names!r}")
        if not names:
            raise ValueError("expected at least one event")
        for name in names:
            if name not in EVENT_TYPES:
                raise ValueError(f"unknown event {name!r} (known: {', '.join(EVENT_TYPES)})")
        return tuple(dict.fromkeys(names))

    def __repr__(self) -> str:  # settings printed or logged show no password nor token
        return (
            f"WebhookTable(url={redact_url(self.url)!r}, events={self.events!r}, "
            f"timeout_s={self.timeout_s!r}, retry_first_s={self.retry_first_s!r}, "
            f"retry_for_s={self.retry_for_s!r})"
        )

    @property
    def retry(self) -> Retry:
        return Retry(self.retry_first_s, self.retry_for_s)


def check_unique(webhooks: tuple[WebhookTable, ...]) -> None:
    """An endpoint's deliveries are kept by its url: two tables with one url would be one."""
    urls = [w.url for w in webhooks]
    if twice := next((u for i, u in enumerate(urls) if u in urls[:i]), None):
        raise ValueError(f"webhooks: {redact_url(twice)!r} is defined twice")


def tables(v: Any) -> Any:
    """The ``webhooks`` setting's shape checked before its tables are: a mistyped one
    (``[webhooks]`` for ``[[webhooks]]``) is named without echoing it, since it holds urls
    with their passwords and the signing secrets."""
    if not isinstance(v, list | tuple):
        raise ValueError(f"expected an array of tables ([[webhooks]]), got {_shown(v)}")
    for i, item in enumerate(v):
        if not isinstance(item, dict | WebhookTable):
            raise ValueError(
                f"expected an array of tables ([[webhooks]]), got {_shown(item)} at [{i}]"
            )
    return v


def _shown(v: Any) -> str:
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list | tuple):
        return "an array"
    return repr(redact_url(v)) if isinstance(v, str) else repr(v)
