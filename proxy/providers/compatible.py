"""Routes of named OpenAI-compatible upstreams (`upstreams.compatible.<name>`): `/<name>/v1/...`.

A path under a configured name's prefix is OpenAI's route of the rest (`/v1/chat/completions`,
`/v1/responses`, any other `/v1/...` forwarded and only counted), sent to that upstream: its provider is
the upstream's name (records, metrics, prices say `groq`, not `openai`), and its key is read where OpenAI
reads it. Nothing under the prefix goes anywhere else, and only OpenAI's paths are served there: a path
under it that another provider would claim (`/v1beta/...`) is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container

from runguard.proxy.core.events import Provider
from runguard.proxy.providers.routes import Route, resolve


def named(path: str, names: Container[str]) -> str | None:
    """The name of the compatible upstream whose prefix `path` (a canonical one) is under; None when none is."""
    first = path[1:].partition("/")[0]
    return first if first and first in names else None


def route(name: str, path: str) -> Route | None:
    """The route of `path` under `name`'s prefix: OpenAI's route of the rest, sent to `name`; None when the
    rest is no OpenAI path (refused: nothing under a compatible upstream's prefix goes to another provider)."""
    rest = path[len(name) + 1 :]
    found = resolve(rest) if rest.startswith("/") else None
    if found is None or found.provider != Provider.OPENAI:
        return None
    return dataclasses.replace(found, provider=Provider(name))
