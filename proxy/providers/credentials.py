"""Which credential a request carries: read where its provider reads it, from what goes upstream.

The key the proxy judges (allowlist, per-key budgets and breakers, the
record's key hash) must be the key the provider is sent. So it is read from
the headers as they leave for the upstream (hop-by-hop headers, including
those `Connection:` names, already removed: see `headers`), and only from the
places the route's provider reads: its spec's `credentials` (`spec.CredentialPlaces`).
OpenAI (every `/v1/...` and `/openai/...` path, Azure OpenAI's included) reads
`Authorization` and `api-key`, and on a WebSocket handshake the browser's
`openai-insecure-api-key.<key>` subprotocol; Gemini (native, its
OpenAI-compatible Chat, Live sockets, uploads) `Authorization`,
`x-goog-api-key`, and the query's `key`, `$key`, `access_token` and
`oauth_token` (Google's system parameters).

Every value in those places must be the same: a request that carries two
different credentials for its provider is refused (`Conflict`). Credentials
in places the provider does not read (an `x-goog-api-key` or `?key=` on an
OpenAI route, an `api-key` on a Gemini one, `x-api-key` anywhere) are taken
out of what goes upstream (`drop_unread`), so the credential judged is the
only one an upstream, or a gateway in front of it, can use.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote_plus

from multidict import CIMultiDict, MultiMapping

from runguard.proxy.core.events import Provider
from runguard.proxy.core.frozen import frozen
from runguard.proxy.providers import registry
from runguard.proxy.providers.openai.provider import BROWSER_KEY_PROTOCOL
from runguard.proxy.providers.spec import CredentialPlaces

_MAY_NAME_ONE = ("key", "token", "%")  # a raw query holds a credential parameter only if it holds one of these
_NONE_READ = CredentialPlaces(())  # an unknown provider reads no place: every key header is dropped
QUERY_NAMES = registry.REGISTRY.query_names  # every query parameter that may hold a credential
__all__ = [
    "BROWSER_KEY_PROTOCOL",
    "QUERY_NAMES",
    "Credential",
    "after_semicolons",
    "drop_unread",
    "every_value",
    "read",
]


def _places(provider: Provider) -> CredentialPlaces:
    spec = registry.provider_named(provider)
    return spec.credentials if spec is not None else _NONE_READ


@frozen
class Credential:
    """The one credential a request carries for its provider (`key`, None when it carries none), or a
    refusal to judge (`conflict`: the places that disagree, named for the error)."""

    key: str | None
    conflict: tuple[str, ...] = ()


def _bearer(value: str) -> str:
    scheme, _, token = value.strip().partition(" ")
    # Any other scheme (Basic, ...) is a credential too, judged as the whole value: it goes upstream.
    return token.strip() if scheme.lower() == "bearer" else value.strip()


def _add(found: dict[str, str], value: str, place: str) -> None:
    if value:
        found.setdefault(value, place)


def read(
    provider: Provider, headers: MultiMapping[str], query: MultiMapping[str], protocols: Iterable[str] = ()
) -> Credential:
    """The credential of a request for `provider`, from the `headers` that go upstream and its `query`
    (`protocols`: a WebSocket handshake's offered subprotocols)."""
    found: dict[str, str] = {}  # value -> the first place it was found in
    places = _places(provider)
    for name in places.headers:
        if name in headers:  # most places are empty: a membership test is the cheap way to say so
            for value in headers.getall(name):
                _add(found, _bearer(value) if name == "Authorization" else value.strip(), name)
    for name in places.query:
        if name in query:
            for value in query.getall(name):
                _add(found, value.strip(), f"?{name}=")
    prefix = places.subprotocol
    if prefix:
        for protocol in protocols:
            if protocol.startswith(prefix):
                _add(found, protocol[len(prefix) :].strip(), "Sec-WebSocket-Protocol")
    if len(found) > 1:
        return Credential(None, tuple(dict.fromkeys(found.values())))
    return Credential(next(iter(found), None))


def drop_unread(provider: Provider, headers: CIMultiDict[str]) -> None:
    """Take out of `headers` (the copy going upstream) the credential headers `provider` does not read."""
    read = {name.lower() for name in _places(provider).headers}
    for name in registry.REGISTRY.key_headers:
        if name.lower() not in read and name in headers:
            headers.popall(name)


def target_without_unread(provider: Provider, target: str) -> str:
    """`target` (path and raw query, as sent upstream) less the query credentials `provider` does not read;
    byte for byte the same otherwise (the common case: no such parameter, the text is not split)."""
    path, sep, query = target.partition("?")
    unread = registry.REGISTRY.query_names.difference(_places(provider).query)
    if not sep or not unread or not may_name_one(query):
        return target
    kept = [part for part in query.split("&") if unquote_plus(part.partition("=")[0]) not in unread]
    return path + ("?" + "&".join(kept) if kept else "")


def after_semicolons(raw_query: str) -> tuple[str, ...]:
    """The credential parameters a raw query joins to another with a `;` (`?alt=json;key=...`,
    `?key=K;alt=json`), as `?name=`.

    The proxy splits a query on `&` only, so `alt=json;key=K` is one parameter `alt`, and `key=K;alt=json`
    a key `K;alt=json`; a server that also splits on `;` (older frameworks, some gateways) reads the key
    `K`, a credential never judged here. Such a request is refused (`handlers`); the common query, with no
    `;`, costs one test.
    """
    if ";" not in raw_query or not may_name_one(raw_query):
        return ()
    found = [
        unquote_plus(piece.partition("=")[0]).strip()
        for part in raw_query.split("&")
        if ";" in part
        for piece in part.split(";")
    ]
    return tuple(f"?{name}=" for name in dict.fromkeys(found) if name in QUERY_NAMES)


def may_name_one(raw_query: str) -> bool:
    """Whether a raw query string may hold a credential parameter (`QUERY_NAMES`): a cheap test that spares
    parsing the common query that cannot."""
    return any(text in raw_query for text in _MAY_NAME_ONE)


def every_value(headers: MultiMapping[str], query: MultiMapping[str]) -> tuple[str, ...]:
    """Every value in a request that may be a credential, in any provider's place and not only the one judged
    (to mask in what an upstream says): `Authorization` and `Proxy-Authorization` (whole, and their token),
    the key headers and the credential query parameters."""
    found: list[str] = []
    for name in ("Authorization", "Proxy-Authorization"):
        for value in headers.getall(name, ()):
            found += [value.strip(), value.partition(" ")[2].strip()]
    for name in registry.REGISTRY.key_headers:
        found += [value.strip() for value in headers.getall(name, ())]
    for name in registry.REGISTRY.query_names:
        found += [value.strip() for value in query.getall(name, ())]
    return tuple(value for value in found if value)


def claims(headers: MultiMapping[str], raw_query: str, query: MultiMapping[str]) -> frozenset[str]:
    """The facts `<provider>_key` of the providers whose claiming places (`CredentialPlaces.claims`) the
    request fills, among the `headers` that go upstream and its query: a shared path (`/v1/...`) is then
    theirs (a `KEYED` door). The query is parsed only when its raw text (`raw_query`) names such a place (an
    OpenAI request, keyed by its Authorization header, then parses no query)."""
    found = [
        fact
        for fact, names, parameters in registry.REGISTRY.claims
        if any(name in headers for name in names) or any(name in raw_query and name in query for name in parameters)
    ]
    return frozenset(found) if found else _NO_CLAIMS


_NO_CLAIMS: frozenset[str] = frozenset()
