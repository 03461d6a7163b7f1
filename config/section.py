"""What every settings section shares: a frozen model that refuses unknown keys, and the check of an upstream URL."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """One section of the settings: frozen, and an unknown key is an error that names it."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def http_url(url: str) -> str:
    """`url` if it is an absolute http(s) URL with a host; a ValueError that says what is wanted otherwise."""
    try:
        parts = urlsplit(url)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # raises on a port that is not a number (or out of range)
    except ValueError:  # an unclosed [IPv6] or a port that is not a number
        usable = False
    if not usable:
        raise ValueError(f"expected an http:// or https:// URL with a host, got {url!r}")
    return url
