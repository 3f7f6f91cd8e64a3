"""URLs with their secrets hidden, for everything podium shows or logs.

A store, index, log or webhook URL may carry a password (``user:pass@``) or a token in its
query (``?token=``): an error message, a listing or a log line names the URL so that an
operator can tell which one is meant, never what unlocks it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

HIDDEN = "***"

# Query parameters whose value is a credential (compared lower-cased, '-' read as '_').
SECRET_PARAMS = frozenset(
    {
        "token",
        "access_token",
        "auth",
        "key",
        "api_key",
        "apikey",
        "secret",
        "client_secret",
        "password",
        "passwd",
        "pass",
        "pwd",
        "sig",
        "signature",
        "code",
    }
)


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo and the values of secret-looking query
    parameters replaced by ``***``. A value that is not a URL at all comes back unchanged;
    one that cannot be parsed comes back as ``***`` (it might be all secret)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return HIDDEN
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}{':' + HIDDEN if sep else ''}@{hosts}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_secret(name) for name, _ in pairs):
            query = urlencode(
                [(name, HIDDEN if _secret(name) else value) for name, value in pairs], safe="*"
            )
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing hidden: as given (urlunsplit would drop an empty '//')
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secret(name: str) -> bool:
    return name.lower().replace("-", "_") in SECRET_PARAMS
