"""What an OpenAI-compatible server is reached with, checked before the first call: the
server's URL (``--base-url``) and the key (``LCR_API_KEY``), each refused in one line
naming where it came from, not retried nor met as an internal error."""

from __future__ import annotations


def check_base_url(url: str) -> str:
    """The server URL, or a usage error naming ``--base-url`` when it has no http(s)
    scheme or no host: a typo is not worth five retries nor an "internal error"."""
    from urllib.parse import urlsplit

    from lcr.errors import UsageError

    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        host = None
        parts = urlsplit("")
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise UsageError(
            f"--base-url {url!r} is not a server URL: give the scheme and host, "
            "e.g. http://localhost:8000/v1 (or set LCR_BASE_URL)"
        )
    return url.strip()


def check_api_key(key: str | None) -> str | None:
    """``LCR_API_KEY`` (None if unset or empty), or a usage error naming it when it holds
    what an HTTP header cannot carry (a line break or other control character, a
    character beyond latin-1): one line, not an internal error from the first call."""
    from lcr.errors import UsageError

    if not key:
        return None
    if any(ord(c) < 32 or ord(c) == 127 or ord(c) > 255 for c in key):
        raise UsageError(
            "LCR_API_KEY holds a character an HTTP header cannot carry (a line break, a "
            "control character or one beyond latin-1): set it to the key alone"
        )
    return key
