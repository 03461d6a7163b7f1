"""The provider APIs the proxy understands: one line per API, and every lookup of a spec.

Adding a provider API is adding its spec (`providers/<api>/spec.py`) to `APIS` below; its provider, its
doors and its paths join the routing table from there (`routes`), its credential places the credential
reader (`credentials`), its error format the proxy's own errors (`relay.replies`), its upstream setting
the upstream pool (`relay.upstream`). Nothing else names providers.

The tables are built once, in `Registry`, and never change: `REGISTRY` is the proxy's. Lookups read the
module attribute each call, so a test may swap in a registry with a provider of its own (`monkeypatch`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from runguard.config import GuardSettings
from runguard.proxy.core.events import Api, Provider
from runguard.proxy.providers import (
    anthropic,
    gemini,
    openai_chat,
    openai_realtime,
    openai_responses,
    vertex,
    vertex_claude,
)
from runguard.proxy.providers.base import Adapter
from runguard.proxy.providers.sockets import Sessions
from runguard.proxy.providers.spec import Door, PathRule, ProviderApi, ProviderSpec

_FOREIGN_HEADERS = ("x-api-key",)
_NO_FACTS: frozenset[str] = frozenset()  # shared: most requests carry no header a door is keyed by
HEADER_FACT = "header:"  # a door fact that is a request header's presence (`spec.Door`)
_TRAILING = re.compile(r"[\s.]+$")  # what some servers trim off a path's end (a decoded %20, a dot)

APIS: tuple[ProviderApi, ...] = (
    openai_chat.SPEC,
    openai_responses.SPEC,
    gemini.SPEC,
    anthropic.SPEC,
    vertex.SPEC,
    vertex_claude.SPEC,
)
# Sessions over a WebSocket whose server starts the responses (`sockets.Sessions`): one line each.
SESSIONS: tuple[Sessions, ...] = (openai_realtime.SESSIONS,)


class Registry:
    """The specs of a set of provider APIs, and the tables built from them (built once, read only)."""

    __slots__ = (
        "_by_api",
        "_by_provider",
        "_folded",
        "_paths",
        "apis",
        "claims",
        "doors",
        "fact_headers",
        "key_headers",
        "leads",
        "providers",
        "query_names",
        "sessions",
    )

    def __init__(self, apis: Iterable[ProviderApi], sessions: Iterable[Sessions] = ()) -> None:
        self.apis = tuple(apis)
        self.sessions = tuple(sessions)
        self._by_api: dict[str, ProviderApi] = {}
        self._by_provider: dict[str, ProviderSpec] = {}
        for spec in self.apis:
            if self._by_api.setdefault(spec.name, spec) is not spec:
                raise ValueError(f"two specs name the API {spec.name!r}")
            if self._by_provider.setdefault(spec.provider.name, spec.provider) is not spec.provider:
                raise ValueError(f"two provider specs are named {spec.provider.name!r}")
        self.providers = tuple(self._by_provider.values())
        for provider in self.providers:
            setting = provider.upstream
            if setting.env != f"RUNGUARD_{setting.name.upper()}_UPSTREAM":
                raise ValueError(
                    f"{provider.name}: its upstream's variable must be RUNGUARD_{setting.name.upper()}_UPSTREAM"
                )
        # One ordered table for the whole proxy: by tier, then in the order the specs are listed.
        ranked = [
            (door.tier, order, door, provider)
            for provider in self.providers
            for order, door in enumerate(provider.doors)
        ]
        ranked.sort(key=lambda row: row[0])  # stable: within a tier, providers' order, then their doors'
        self.doors: tuple[tuple[Door, ProviderSpec], ...] = tuple((door, provider) for _, _, door, provider in ranked)
        self.leads = tuple(door.lead for door, _ in self.doors)  # `Door.lead` of each, computed once
        named = {fact for door, _ in self.doors for fact in door.needs | door.unless if fact.startswith(HEADER_FACT)}
        self.fact_headers = tuple(sorted(fact[len(HEADER_FACT) :] for fact in named))  # headers doors are keyed by
        paths: dict[str, list[tuple[PathRule, ProviderApi]]] = {}
        for spec in self.apis:
            for rule in spec.paths:
                paths.setdefault(rule.family, []).append((rule, spec))
        self._paths = {family: tuple(rules) for family, rules in paths.items()}
        # The same rules read without case: a path they match only so is a guarded endpoint's look-alike.
        self._folded = {
            family: tuple(re.compile(rule.pattern.pattern, rule.pattern.flags | re.IGNORECASE) for rule, _ in rules)
            for family, rules in paths.items()
        }
        # Every header and query parameter that may carry a key, in any provider's place (`credentials`):
        # `Authorization` aside (every provider reads it), and Anthropic's `x-api-key` whether or not a
        # provider here reads it (a key no upstream reads is never forwarded).
        headers = [name for provider in self.providers for name in provider.credentials.headers]
        self.key_headers = tuple(dict.fromkeys(h for h in (*headers, *_FOREIGN_HEADERS) if h != "Authorization"))
        self.query_names = frozenset(name for provider in self.providers for name in provider.credentials.query)
        # (fact, headers, query parameters) of each provider that claims shared paths by its key's place.
        self.claims = tuple(
            (
                f"{provider.name}_key",
                tuple(place for place in provider.credentials.claims if not place.startswith("?")),
                tuple(place[1:] for place in provider.credentials.claims if place.startswith("?")),
            )
            for provider in self.providers
            if provider.credentials.claims
        )

    def header_facts(self, headers: Mapping[str, str]) -> frozenset[str]:
        """The `header:<name>` facts of a request's `headers` (those some door is keyed by)."""
        found = [HEADER_FACT + name for name in self.fact_headers if name in headers]
        return frozenset(found) if found else _NO_FACTS

    def api(self, name: str) -> ProviderApi | None:
        """The spec of the API named `name`; None for one forwarded and only counted (`Api.OTHER`)."""
        return self._by_api.get(name)

    def provider(self, name: str | None) -> ProviderSpec | None:
        return self._by_provider.get(name) if name is not None else None

    def sessions_at(self, provider: str, path: str) -> Sessions | None:
        """The sessions a WebSocket to `provider`'s routed `path` opens; None when it opens none."""
        return next((s for s in self.sessions if s.provider() == provider and s.serves(path)), None)

    def encoding(self, api: str, model: str) -> str | None:
        """The tiktoken encoding of `model` as `api` counts it (its spec's `encoding`, or its sessions');
        None to count by characters."""
        spec = self._by_api.get(api)
        if spec is not None:
            return spec.encoding(model)
        return next((s.encoding(model) for s in self.sessions if s.api() == api), None)

    def paths(self, family: str) -> tuple[tuple[PathRule, ProviderApi], ...]:
        """The API rules that read paths of a door's `family`, in the specs' order."""
        return self._paths.get(family, ())

    def lookalike(self, family: str, rest: str) -> bool:
        """Whether `rest`, which no API rule of `family` reads, is a guarded endpoint but for its case or
        trailing spaces and dots (`/v1/Chat/Completions`, `/v1/chat/completions%20`, `:GenerateContent`):
        front ends that fold case or trim the path would serve it as that endpoint."""
        trimmed = _TRAILING.sub("", rest)
        return any(folded.search(trimmed) for folded in self._folded.get(family, ()))


REGISTRY = Registry(APIS, SESSIONS)


def provider_titles() -> str:
    """The providers' names as a sentence lists them ("OpenAI, Gemini and Anthropic"), in the registry's order."""
    names = [provider.display for provider in REGISTRY.providers]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def api_named(name: Api | str) -> ProviderApi | None:
    """The spec of an API; None for APIs that are forwarded and only counted."""
    return REGISTRY.api(name)


def provider_named(name: Provider | str | None) -> ProviderSpec | None:
    """The spec of an upstream provider; None for a name no spec has (or None)."""
    return REGISTRY.provider(name)


def adapter_for(api: Api | str) -> Adapter | None:
    """The adapter for an API; None for APIs that are forwarded and only counted.

    Adapters hold no state (each stream gets its own parser), so a fresh one
    per call costs a small object and keeps nothing at module level.
    """
    spec = REGISTRY.api(api)
    return spec.adapter() if spec is not None else None


def block_status(provider: Provider | str, guard: GuardSettings) -> int:
    """The status of a blocked request's error answer in `provider`'s dialect (its spec's `block_status`)."""
    spec = REGISTRY.provider(provider)
    return spec.block_status(guard) if spec is not None else 429


def header_facts(headers: Mapping[str, str]) -> frozenset[str]:
    """The routing facts a request's headers give (`Registry.header_facts`)."""
    return REGISTRY.header_facts(headers)


def chains_responses(api: Api | str) -> bool:
    """Whether a response of `api` may be continued from by id (`previous_response_id`): its id is kept."""
    spec = REGISTRY.api(api)
    return spec is not None and spec.chains_responses


def poller(provider: Provider | str) -> ProviderApi | None:
    """The API of `provider` whose background responses are polled by id (`ProviderApi.polls`): a GET of one
    of its poll paths is read with its adapter (`guard.costs.background`); None when it has none."""
    return next((spec for spec in REGISTRY.apis if spec.polls is not None and spec.provider.name == provider), None)


def usage_on_request(api: Api | str) -> bool:
    """Whether `api`'s streams carry usage only when asked (`ProviderApi.stream_usage_on_request`)."""
    spec = REGISTRY.api(api)
    return spec is not None and spec.stream_usage_on_request
