"""Which provider and API a request path speaks: an explicit, ordered table.

The first matching rule wins. Paths under `/openai/` and `/gemini/` name the
provider explicitly and are forwarded without that prefix; bare `/v1/...` is
OpenAI except `/v1/models/{m}:method`, which is Gemini's v1 surface, and any
`/v1/...` request that carries a Gemini API key (google-genai with
`api_version="v1"` lists and gets models at `/v1/models`, as OpenAI does).
`/upload/...` is Gemini's media upload (google-genai's `files.upload` sends
both of its steps there, on the client's base URL), and `/ws/...` its Live
API's WebSocket (`...GenerativeService.BidiGenerateContent`).

Gemini's OpenAI-compatible Chat Completions (`/v1beta/openai/chat/completions`,
the openai SDK's base URL `.../v1beta/openai/`) is read as Chat and sent to
the Gemini upstream.

Azure OpenAI's paths begin with `/openai/` too, and keep it upstream:
`/openai/deployments/{deployment}/chat/completions?api-version=...` (the
`AzureOpenAI` client's), `/openai/responses?api-version=...`. An `/openai/`
path that is not `/openai/v1/...` (OpenAI serves nothing else), or that has
an `api-version`, is Azure's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from runguard.proxy.core.events import Api, Provider
from runguard.proxy.core.frozen import frozen
from runguard.proxy.http import paths
from runguard.proxy.providers.credentials import target_without_unread


@frozen
class Route:
    provider: Provider
    api: Api
    upstream_path: str  # the path to request upstream (prefix removed)
    model: str | None = None  # Gemini: the model in the URL
    stream: bool = False  # Gemini: :streamGenerateContent

    @property
    def dialect(self) -> Provider:
        """Whose error format the client reads: OpenAI's for Chat and Responses, whoever serves them."""
        return Provider.OPENAI if self.api in (Api.CHAT, Api.RESPONSES) else self.provider


_GEMINI_METHOD = re.compile(r"^/v1(?:beta|alpha)?\d*/(?:models|tunedModels)/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
_GEMINI_GENERATE = {"generateContent": False, "streamGenerateContent": True}
_GEMINI_CHAT = re.compile(r"^/v1(?:beta|alpha)?\d*/openai/chat/completions/?$")
# Vertex AI's paths: /v1/projects/{project}/locations/{location}/publishers/google/..., and its express mode's
# (an API key, no project) /v1/publishers/google/...
_VERTEX = ("/v1/projects/", "/v1/publishers/")
_OPENAI_APIS = {"/v1/chat/completions": Api.CHAT, "/v1/responses": Api.RESPONSES}


def _gemini(path: str) -> Route:
    if _GEMINI_CHAT.match(path):
        return Route(Provider.GEMINI, Api.CHAT, path)
    match = _GEMINI_METHOD.match(path)
    if match and match["method"] in _GEMINI_GENERATE:
        return Route(Provider.GEMINI, Api.GEMINI, path, match["model"], _GEMINI_GENERATE[match["method"]])
    return Route(Provider.GEMINI, Api.OTHER, path, match["model"] if match else None)


def _openai(path: str) -> Route:
    return Route(Provider.OPENAI, _OPENAI_APIS.get(path.rstrip("/"), Api.OTHER), path)


def _azure(path: str) -> Route:
    """An Azure OpenAI path, forwarded as it is; its API is named by its last segments."""
    tail = path.rstrip("/")
    if tail.endswith("/chat/completions"):
        return Route(Provider.OPENAI, Api.CHAT, path)
    return Route(Provider.OPENAI, Api.RESPONSES if tail.endswith("/responses") else Api.OTHER, path)


def _strip(path: str, prefix: str) -> str:
    rest = path[len(prefix) :]
    return rest if rest.startswith("/") else "/" + rest


def resolve(path: str, gemini_key: bool = False, api_version: bool = False) -> Route | None:
    """The route for a request path (a `paths.canonical` one), or None for a path no provider serves.

    `gemini_key`: the request carries a Gemini API key (`x-goog-api-key` or `?key=`);
    `api_version`: its query names an `api-version` (Azure OpenAI's).
    """
    if path.startswith("/openai/"):
        if api_version or not path.startswith("/openai/v1/"):
            return _azure(path)
        return _openai(_strip(path, "/openai"))
    if path.startswith("/gemini/"):
        return _gemini(_strip(path, "/gemini"))
    if _GEMINI_METHOD.match(path):
        return _gemini(path)
    if path.startswith(("/v1beta/", "/v1alpha/", "/upload/", "/ws/")) or path in ("/v1beta", "/v1alpha"):
        return _gemini(path)
    if path.startswith(_VERTEX):
        return None  # Vertex AI's paths (google-genai with vertexai=True at api_version v1): not served
    if path.startswith("/v1/") or path == "/v1":
        return _gemini(path) if gemini_key else _openai(path)
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


def gemini_streams_sse(query: Mapping[str, str]) -> bool:
    """Whether a Gemini :streamGenerateContent request asked for SSE (`alt=sse`; `$alt` is the same parameter).

    Without it the method streams one JSON array (`$alt=json`, or no `alt` at all).
    """
    value = query.get("alt", query.get("$alt", ""))
    return value.partition(";")[0].strip().lower() == "sse"
