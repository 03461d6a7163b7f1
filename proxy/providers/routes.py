"""Which provider and API a request path speaks: one ordered table, built from the specs (`registry`).

Two levels, both data. First the doors (`spec.Door`, every provider's, by tier): the first that matches
the path (and the request's facts: a Gemini key, an Azure `api-version`) names the provider, the path
family and a prefix to remove (`/openai`, `/gemini`: forwarded without it). Then the API rules of that
family (`spec.PathRule`): the first that matches the rest names the API that reads it, else the request
is forwarded and only counted (`Api.OTHER`). The doors and paths themselves, and why they are what they
are, are with each provider: `openai/provider.py` (OpenAI, Azure OpenAI), `gemini/spec.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import field

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers import paths, registry
from runguard.proxy.providers.credentials import target_without_unread
from runguard.proxy.providers.framing import SSE, Framing
from runguard.proxy.providers.spec import ProviderApi


@frozen
class Route:
    provider: Provider  # the upstream the request goes to (records and metrics name it)
    api: Api
    upstream_path: str  # the path to request upstream (prefix removed)
    model: str | None = None  # Gemini: the model in the URL
    stream: bool = False  # Gemini: :streamGenerateContent
    spec: ProviderApi | None = field(default=None, compare=False, repr=False)  # who reads it; None: Api.OTHER
    lookalike: bool = False  # Api.OTHER, but a guarded endpoint in another case or with a trailing space: refused

    def framing(self, query: Mapping[str, str]) -> Framing:
        """How its answer streams (its spec's `framing` for this request's query; SSE for an API no spec reads)."""
        return self.spec.framing(self.stream, query) if self.spec is not None else SSE

    @property
    def dialect(self) -> Provider:
        """Whose error format the client reads: the API's own provider for an API a spec reads (OpenAI's for
        Chat and Responses, whoever serves them), else the upstream's."""
        spec = self.spec if self.spec is not None else registry.api_named(self.api)
        return spec.provider.name if spec is not None else self.provider


_NO_FACTS: frozenset[str] = frozenset()


def _facts(gemini_key: bool, api_version: bool, facts: Collection[str]) -> frozenset[str]:
    if not (gemini_key or api_version or facts):
        return _NO_FACTS  # the common request: no allocation
    named = {name for name, present in (("gemini_key", gemini_key), ("api_version", api_version)) if present}
    return frozenset(named.union(facts))


def resolve(
    path: str, gemini_key: bool = False, api_version: bool = False, *, facts: Collection[str] = ()
) -> Route | None:
    """The route for a request path (a `paths.canonical` one), or None for a path no provider serves.

    `gemini_key`: the request carries a Gemini API key (`x-goog-api-key` or `?key=`);
    `api_version`: its query names an `api-version` (Azure OpenAI's); `facts`: any other fact a door needs.
    """
    return _routed(registry.REGISTRY, path, _facts(gemini_key, api_version, facts))


@functools.lru_cache(maxsize=1024)
def _routed(table: registry.Registry, path: str, known: frozenset[str]) -> Route | None:
    """`resolve`, memoised per table, path and facts (a `Route` is immutable): a client sends the same few
    paths with the same facts every request, and the doors' and rules' searches cost more than the rest of
    the routing. Bounded: the 1024 paths last routed."""
    for lead, (door, provider) in zip(table.leads, table.doors, strict=True):
        if not path.startswith(lead) or not door.needs <= known or not door.unless.isdisjoint(known):
            continue
        if not door.pattern.search(path):
            continue
        if door.refuse:
            return None
        rest = path
        if door.strip:
            rest = path[len(door.strip) :]
            rest = rest if rest.startswith("/") else "/" + rest
        for rule, spec in table.paths(door.family):
            found = rule.pattern.search(rest)
            if found is not None:
                groups = found.groupdict()
                stream = groups.get("method") in rule.streaming
                return Route(provider.name, spec.name, rest, groups.get("model"), stream, spec)
        named = door.model.search(rest) if door.model is not None else None
        lookalike = table.lookalike(door.family, rest)
        return Route(provider.name, Api.OTHER, rest, named["model"] if named else None, lookalike=lookalike)
    return None


def raw_target(route: Route, raw_path: str) -> str:
    """The path and query to request upstream: the path `route` was resolved for (a `paths.canonical` one, less
    an explicit `/openai` or `/gemini` prefix), encoded, and the query as sent (`raw_path`'s) less a query
    credential the provider does not read (`credentials`).

    Built from the route, never from the bytes the client sent: the provider is
    asked for the endpoint that was routed (and guarded), whatever the spelling.
    """
    _, mark, query = raw_path.partition("?")
    return target_without_unread(route.provider, paths.upstream(route.upstream_path) + mark + query)
