"""Which API key a request carries, kept only as a salted hash.

Which header or query parameter a route's key is read from is `credentials`'
business; here it is hashed. The hash is an HMAC-SHA256 under
the install's salt, shortened to 16 hex characters and prefixed `k_`; the key
itself is never stored, logged or returned.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path

ANONYMOUS = "k_anonymous"
_SECRETS = re.compile(r"(?i)([?&;]key=|bearer\s+|api-key[\"']?\s*[:=]\s*[\"']?)[^&\s\"',;)\]]+")
# Key-shaped words wherever they stand: OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), Google (AIza).
_KEY_SHAPED = re.compile(r"(?<![A-Za-z0-9_-])(?:sk-[A-Za-z0-9_-]{8,}|AIza[0-9A-Za-z_-]{10,})")
MIN_EXACT = 8  # shorter credentials are not masked by value (they would mask ordinary words)


def redact(text: str, exact: Iterable[str] = ()) -> str:
    """`text` with anything that looks like an API key masked: a query `key=`, a bearer token, an
    `api-key:` value, a word shaped like an OpenAI, Anthropic or Google key, and each `exact` credential
    (the request's own, whatever its shape) of at least `MIN_EXACT` characters."""
    for secret in exact:
        if len(secret) >= MIN_EXACT and secret in text:
            text = text.replace(secret, "<redacted>")
    return _KEY_SHAPED.sub("<redacted>", _SECRETS.sub(r"\1<redacted>", text))


class RedactingFormatter(logging.Formatter):
    """A log formatter that masks anything key-shaped in the whole line, traceback included (`redact`):
    a library's exception text may quote a URL with `?key=` or a header."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class KeyHasher:
    """Salted, cached hashing of API keys (a handful of keys repeat endlessly)."""

    def __init__(self, salt: bytes, cache_size: int = 1024) -> None:
        self._salt = salt
        self._cache: dict[str, str] = {}
        self._cache_size = cache_size

    def hash(self, key: str | None) -> str:
        if not key:
            return ANONYMOUS
        cached = self._cache.get(key)
        if cached is None:
            cached = "k_" + hmac.new(self._salt, key.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:16]
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[key] = cached
        return cached


def load_salt(configured: str | None, home: Path | None = None) -> bytes:
    """The configured salt, else the install's own (created once in RUNGUARD_HOME/salt).

    Replicas that share state must share the salt: set `runs.key_salt`
    (RUNGUARD_KEY_SALT) for them.
    """
    if configured:
        return configured.encode()
    home = home or Path(os.environ.get("RUNGUARD_HOME", Path.home() / ".runguard"))
    path = home / "salt"
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        home.mkdir(parents=True, exist_ok=True)
        salt = secrets.token_hex(32).encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(salt)
        return salt
    except OSError:
        # An unwritable home must not stop the proxy; hashes then differ per process.
        return secrets.token_hex(32).encode()
