"""Specs: what a provider API plugs into the proxy; its Doors (routing rows, ranked by Tier) claim its paths.

One frozen spec per API, data and hooks, no behaviour of its own.

A provider is two levels of spec:

- `ProviderSpec`: the upstream a request is sent to (its name labels records and metrics), where its
  credentials are read (`credentials`), the base URL setting of its upstream, the shape of the errors the
  proxy itself writes for its clients, the status a block answers with, and its doors: the rows of the
  routing table that claim paths for it before its APIs are told apart (`Door`).
- `ProviderApi`: one API that provider serves (OpenAI Chat, OpenAI Responses, Gemini): its name, the
  paths it reads (`PathRule`), the adapter that reads its requests, responses and streams and writes its
  error and stop answers (`base.Adapter`), and its hooks (nudge splicing, tokenizer, telemetry name).

Each folder under `providers/` exports one `ProviderApi` as `SPEC`; `registry` holds the ordered tuple of
them and every lookup. The core never compares provider or API names: it asks the spec of a route.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any

from runguard.config import GuardSettings
from runguard.proxy.core.events import Api, Provider
from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers.base import Adapter
from runguard.proxy.providers.framing import Framing, sse_framing
from runguard.proxy.providers.sockets import RequestMessages
from runguard.proxy.providers.transcript import Transcript

ErrorPayload = Callable[[int, str, str], Mapping[str, Any]]
"""(status, message, code) -> the JSON object of an error in the provider's format."""

NudgeSplice = Callable[[bytes, dict[str, Any], str], "bytes | None"]
"""(body, its parsed object, note) -> the body with the note spliced in where the API puts instructions
(every other byte as the client sent it), or None when it cannot be placed (see `guard.nudge`)."""


class Tier(IntEnum):
    """Where a door sits in the one routing table: lower tiers are tried first, specs' order within a tier.

    The tiers let each provider keep its doors in its own spec and still build one table whose order is
    the order of specificity: a prefix naming the provider beats a path only it serves, which beats a
    shared path claimed by the credential it carries, which beats the shared path's default owner.
    """

    # A request marked as this provider's by what only its clients send (`needs` a header fact, below:
    # Anthropic's `anthropic-version`): it goes there whatever its path, so no other upstream gets its key.
    MARKED = -1
    PREFIX = 0  # a path under the provider's own prefix (`/gemini/...`, `/openai/...`)
    NATIVE = 1  # paths only this provider serves (`/v1beta/...`); refusals of paths nobody serves here
    KEYED = 2  # a shared path (`/v1/...`) claimed when the request carries this provider's credential
    DEFAULT = 3  # a shared path's owner when nothing else claims it


@frozen
class Door:
    """One row of the routing table's first level: the paths a provider claims.

    `pattern` is searched in the request's canonical path. A claimed path then goes through the API rules
    (`PathRule`) of its `family` with `strip` removed from its front; the path without it is what goes
    upstream. `needs`: request facts the row requires (`routes.resolve`: "api_version", and "<provider>_key"
    when the request fills one of that provider's `CredentialPlaces.claims`);
    `unless`: facts that exclude it. `refuse`: the path is known and served by no upstream (Vertex AI's):
    the request gets the unknown-path error. `model`: where a path no API rule reads names its model.
    A fact named `header:<name>` (lower case) is the request carrying that header: the registry collects
    the headers its doors name (`Registry.header_facts`), so a door needs no code to be keyed by one.
    """

    pattern: re.Pattern[str]
    family: str
    strip: str = ""
    tier: Tier = Tier.NATIVE
    needs: frozenset[str] = frozenset()
    unless: frozenset[str] = frozenset()
    refuse: bool = False
    model: re.Pattern[str] | None = None

    @property
    def lead(self) -> str:
        """The literal text every path the pattern matches starts with ("" when it is not anchored): a cheap
        `startswith` rules out most doors before their pattern runs (`routes.resolve`)."""
        source = self.pattern.pattern
        if not source.startswith("^") or self.pattern.flags & re.IGNORECASE or _alternates(source):
            return ""
        end = 1
        while end < len(source) and source[end] not in _SPECIAL:
            end += 1
        lead = source[1:end]
        # A quantifier after the literal may make its last character optional (`^/v1?`): leave it out.
        return lead[:-1] if end < len(source) and source[end] in "?*{" else lead


_SPECIAL = frozenset(".^$*+?{}[]\\|()")


def _alternates(source: str) -> bool:
    """Whether a pattern has a `|` outside any group (`^/a|/b`: its second branch is not anchored)."""
    depth, escaped, in_class = 0, False, False
    for char in source:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
    return False


@frozen
class PathRule:
    """One row of the routing table's second level: a path of a door's `family` this API reads.

    `pattern` is searched in the path (the door's prefix removed); its `model` group, if any, is the model
    the URL names. `streaming`: values of its `method` group that stream (Gemini's `streamGenerateContent`).
    """

    family: str
    pattern: re.Pattern[str]
    streaming: frozenset[str] = frozenset()


@frozen
class UpstreamSetting:
    """The base URL setting of a provider's upstream: `upstreams.<name>` for the built-in ones (fields of
    `UpstreamSettings`), `upstreams.others.<name>` for a plug-in's; `env` is its environment variable, which
    must be `RUNGUARD_<NAME>_UPSTREAM` (the form the config loader reads: `registry` checks it)."""

    name: str
    default_url: str
    env: str
    # (base URL, path and query) -> the URL to request, for an upstream whose URL is not the base URL followed
    # by the path (Vertex AI: the regional host its path implies); None: the base URL and the path.
    locate: Callable[[str, str], str] | None = None


@frozen
class CredentialPlaces:
    """Where a provider reads a request's credential: headers (`Authorization` read as a bearer token),
    query parameters, and a WebSocket subprotocol prefix that carries a key (a browser's)."""

    headers: tuple[str, ...]
    query: tuple[str, ...] = ()
    subprotocol: str | None = None
    # The places whose presence claims a shared path for this provider (its `KEYED` doors need the fact
    # `<provider>_key`, `credentials.claims`): header names, and `?name` for a query parameter.
    claims: tuple[str, ...] = ()


def _always_429(guard: GuardSettings) -> int:
    return 429


@frozen
class ProviderSpec:
    """An upstream provider: see the module docstring. `name` labels records, metrics and the upstream."""

    name: Provider
    upstream: UpstreamSetting
    credentials: CredentialPlaces
    doors: tuple[Door, ...]
    error_payload: ErrorPayload  # the proxy's own errors (bad path, too large, upstream down) in its format
    # The status of a blocked request's error answer: 429 is the status every SDK raises without retrying
    # when the answer says so; Gemini's is configurable (`guard.gemini_error_status`).
    block_status: Callable[[GuardSettings], int] = _always_429
    telemetry_name: str = ""  # `gen_ai.provider.name` (the GenAI conventions' spelling); "" means `name`
    title: str = ""  # how people write its name (`--help`, the `serve` banner); "" means `name`, capitalised
    client_path: str = ""  # what its SDKs' base URL adds to the proxy's address ("/v1" for OpenAI's)
    # The account a request's upstream path acts for, whose credentials rotate (Vertex AI: the project its
    # path names; None: the credential is the identity). A credential the upstream has accepted for that
    # account then acts as the account itself (`runs.accounts`), so runs and budgets outlive a token's refresh.
    account: Callable[[str], str | None] | None = None

    @property
    def system(self) -> str:
        return self.telemetry_name or str(self.name)

    @property
    def display(self) -> str:
        return self.title or str(self.name).capitalize()


@frozen
class Polls:
    """How an API's response kept by id is fetched again (a background response's poll, `guard.costs.background`):
    `path` finds its id (group `id`) in a routed path a GET asks for; `final`: the statuses (`finish_reason`)
    of a response that is done."""

    path: re.Pattern[str]
    final: frozenset[str]

    def polled_id(self, path: str) -> str | None:
        """The response id a poll's `path` names; None for any other path."""
        found = self.path.match(path)
        return found["id"] if found else None


def _no_encoding(model: str) -> str | None:
    return None


@frozen
class ProviderApi:
    """One API of a provider: see the module docstring. `provider` is whose format its clients read
    (errors, answers); a route may send it to another upstream (Gemini's OpenAI-compatible Chat)."""

    name: Api
    provider: ProviderSpec
    adapter: Callable[[], Adapter]  # a fresh adapter: they hold no state, each stream gets its own parser
    paths: tuple[PathRule, ...]
    nudge: NudgeSplice | None = None  # None: a nudge's note cannot be carried (the request goes unchanged)
    # The tiktoken encoding of a model it serves, None to count tokens by characters (`guard.costs.tokens`).
    encoding: Callable[[str], str | None] = _no_encoding
    operation: str = "chat"  # `gen_ai.operation.name`: "chat", "generate_content"
    # A response id a later request may continue from (`previous_response_id`): remembered per run.
    chains_responses: bool = False
    # A response that finishes in the background, polled by id on its provider's upstream (`Polls`): read.
    polls: Polls | None = None
    # Streams carry usage only when the request asks (Chat's `stream_options.include_usage`): the proxy may
    # ask for it (`upstreams.inject_stream_usage`, `relay.stream_usage`).
    stream_usage_on_request: bool = False
    # (the request streams, its query) -> how its answer streams (`framing`): SSE unless the API says otherwise.
    framing: Callable[[bool, Mapping[str, str]], Framing] = sse_framing
    # How its WebSocket mode's messages are read (`sockets.RequestMessages`); None: its sockets pass unread.
    socket: RequestMessages | None = None
    # What a recorded request body says, for the run page and `show` (`transcript`); None: nothing is shown.
    transcript: Transcript | None = None
