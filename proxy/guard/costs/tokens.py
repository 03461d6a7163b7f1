"""Token estimates that never touch the network.

Upstream `usage` is always preferred; estimates are for responses that carry
none (streamed Chat Completions without `stream_options.include_usage`, which
openai-agents omits behind a custom base URL). tiktoken downloads its BPE
tables on first use, so it is used only when the table is already in its
cache (`TIKTOKEN_CACHE_DIR`; the Docker image pre-seeds it); otherwise, and
for APIs whose spec names no encoding (Gemini), about four characters make a
token (Google's documented rule).
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from typing import Any

from runguard.proxy.core.events import Api
from runguard.proxy.providers import registry

CHARS_PER_TOKEN = 4
_TABLE_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
# tiktoken re-downloads a cached table whose hash is wrong, so the proxy checks the hash first.
_TABLE_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


def cached_table(encoding: str, environ: dict[str, str] | None = None) -> str | None:
    """Where tiktoken keeps `encoding`'s table, if it is there and intact (tiktoken's own cache layout)."""
    env = os.environ if environ is None else environ
    directory = env.get("TIKTOKEN_CACHE_DIR", env.get("DATA_GYM_CACHE_DIR"))
    if directory is None:
        directory = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not directory:
        return None
    path = os.path.join(directory, hashlib.sha1(_TABLE_URL.format(encoding).encode()).hexdigest())
    try:
        with open(path, "rb") as table:
            intact = hashlib.sha256(table.read()).hexdigest() == _TABLE_SHA256.get(encoding)
    except OSError:
        return None
    return path if intact else None


ENCODINGS = ("o200k_base", "cl100k_base")  # every encoding a spec's `encoding` hook answers
__all__ = ["CHARS_PER_TOKEN", "ENCODINGS", "TokenEstimator", "cached_table"]


class TokenEstimator:
    """Counts a text's tokens for a model: exactly when a cached table exists, else by characters.

    Loading an encoding reads and hashes its table (megabytes) and builds tiktoken's ranks: about a
    second of blocking work. `preload` does it for every encoding, meant for a thread at start-up
    (`create_app`), so no request waits on it on the event loop.
    """

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        self._environ = environ
        self._encodings: dict[str, Any] = {}  # encoding name -> tiktoken.Encoding, or None if unavailable

    def _encoding(self, name: str) -> Any:
        if name not in self._encodings:
            found = None
            if cached_table(name, self._environ) is not None:
                try:
                    import tiktoken

                    found = tiktoken.get_encoding(name)
                except Exception:  # a damaged cache must not break estimates: fall back to characters
                    found = None
            self._encodings[name] = found
        return self._encodings[name]

    def preload(self) -> None:
        """Load every encoding now (blocking: run it off the event loop)."""
        for name in ENCODINGS:
            self._encoding(name)

    def count(self, text: str, model: str, api: Api | None = None) -> int:
        """`text`'s tokens for `model`, in the encoding `api` counts in (its spec's `encoding` hook, or its
        sessions': `registry.encoding`), else by characters."""
        if not text:
            return 0
        name = registry.REGISTRY.encoding(api, model) if api is not None else None
        encoding = self._encoding(name) if name is not None else None
        if encoding is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(encoding.encode(text, disallowed_special=()))
