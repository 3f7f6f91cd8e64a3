"""URLs with their secrets hidden, for everything podium shows or logs.

A store, index, log or webhook URL may carry a password (``user:pass@``) or a token in its
query (``?token=``): an error message, a listing or a log line names the URL so that an
operator can tell which one is meant, never what unlocks it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, unquote_plus, urlencode, urlsplit, urlunsplit

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


def redact_text(text: str, url: str) -> str:
    """``text`` (an error's message, an answer's body) with every secret of ``url`` in it
    replaced by ``***``: the URL itself as ``redact_url`` shows it, then its password and
    secret query values wherever else they appear, as written in the URL or decoded."""
    text = text.replace(url, redact_url(url))
    for secret in sorted(_secrets(url), key=len, reverse=True):  # a longer one first
        text = text.replace(secret, HIDDEN)
    return text


def _secrets(url: str) -> set[str]:
    try:
        parts = urlsplit(url)
        password = parts.password
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        raw = [p.partition("=") for p in parts.query.split("&")]
    except ValueError:
        return {url}  # cannot be parsed: any of it might be the secret
    found = {unquote(password), password} if password else set()
    found |= {value for name, value in pairs if _secret(name)}
    found |= {value for name, _, value in raw if _secret(unquote_plus(name))}
    return {s for s in found if s}
