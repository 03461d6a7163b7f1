"""One pooled keep-alive aiohttp client per provider.

aiohttp's own client is used on the hot path: on this kind of machine it costs
about a tenth of an httpx client's CPU per request. Bodies pass through as
bytes in both directions: no automatic decompression, and no headers the
client did not send (aiohttp would otherwise add Accept-Encoding, Accept,
User-Agent and Content-Type of its own).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from runguard.config import ConfigError, UpstreamSettings
from runguard.proxy.core.errors import UpstreamError, UpstreamRefused, UpstreamTimeout
from runguard.proxy.core.events import Provider
from runguard.proxy.core.safe_text import printable
from runguard.proxy.providers import registry
from runguard.proxy.relay.deadlines import Deadlines
from runguard.proxy.runs import redact

_NO_AUTO_HEADERS = ("Accept-Encoding", "Accept", "User-Agent", "Content-Type")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\",]*")  # a URL in an exception's text, to its end
MAX_DETAIL = 200  # characters of an upstream failure's detail a client is told
Locate = Callable[[str, str], str]  # (base URL, path and query) -> the URL to request (`UpstreamSetting.locate`)


class Upstream:
    def __init__(self, base_url: str, settings: UpstreamSettings, locate: Locate | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._locate = locate  # the URL of a path when it is not the base URL and the path (Vertex AI's)
        # An Azure OpenAI endpoint given with its `/openai` path (as its v1 API's base URL has it) serves
        # Azure's classic paths too, which come with that path of their own.
        self._under_openai = self.base_url.endswith("/openai")
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None
        # Each request's wait for its response headers, bounded by one timer for them all (`deadlines`).
        self._first_byte = Deadlines(settings.first_byte_timeout)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._settings.pool_size, ttl_dns_cache=300, keepalive_timeout=60)
            # No sock_read here: aiohttp's read timeout also bounds the wait for the response headers,
            # which is first_byte_timeout's (a model may think for minutes). `send` sets it once they are in.
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._settings.connect_timeout, sock_read=None)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=timeout,
                auto_decompress=False,
                skip_auto_headers=_NO_AUTO_HEADERS,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=self._settings.trust_env,
            )
        return self._session

    def url(self, raw_path_and_query: str) -> URL:
        """The upstream URL for a path and query exactly as the client sent them."""
        if self._locate is not None:
            return URL(self._locate(self.base_url, raw_path_and_query), encoded=True)
        if self._under_openai and raw_path_and_query.startswith("/openai/"):
            raw_path_and_query = raw_path_and_query[len("/openai") :]
        return URL(self.base_url + raw_path_and_query, encoded=True)

    async def send(
        self, method: str, raw_target: str, headers: CIMultiDict[str], body: bytes | aiohttp.StreamReader
    ) -> aiohttp.ClientResponse:
        """Send a request; returns once the response headers are in (the body is not read).

        `body`: bytes, or a client's body still arriving, streamed on as it comes. Sending it and
        waiting for the headers is bounded by `first_byte_timeout`; from then on the response body
        may stay silent `idle_timeout` seconds at most.
        """
        deadlines = self._first_byte
        task = deadlines.start()
        cancelled = False
        try:
            response = await self.session.request(
                method, self.url(raw_target), headers=headers, data=_data(body), allow_redirects=False
            )
        except asyncio.CancelledError:
            cancelled = True
            raise
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._failed(exc, "response") from exc
        finally:  # however the wait ended; a cancellation by its deadline is a timeout
            if deadlines.stop(task, cancelled=cancelled):
                raise self._failed(TimeoutError(), "response")
        _time_silence(response, self._settings.idle_timeout)
        return response

    async def connect(
        self, raw_target: str, headers: CIMultiDict[str], protocols: tuple[str, ...]
    ) -> aiohttp.ClientWebSocketResponse:
        """Open a WebSocket to the upstream (the handshake bounded by `first_byte_timeout`).

        Messages of any size pass (the client's are bounded by the server's body limit), and the
        connection may stay quiet for as long as its two ends like: pings are answered, none are sent.
        """
        try:
            async with asyncio.timeout(self._settings.first_byte_timeout):
                return await self.session.ws_connect(
                    self.url(raw_target),
                    headers=headers,
                    protocols=protocols,
                    max_msg_size=0,
                    timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=10.0),
                )
        except aiohttp.WSServerHandshakeError as exc:
            raise UpstreamRefused(f"the WebSocket handshake was answered {exc.status}", exc.status) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._failed(exc, "handshake") from exc

    def _failed(self, exc: aiohttp.ClientError | TimeoutError, awaited: str) -> UpstreamError:
        """RunGuard's error for a failure (or a timeout) waiting for the upstream's `awaited`."""
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return UpstreamTimeout(f"could not connect to {self.base_url} within the connect timeout")
        if isinstance(exc, TimeoutError):
            return UpstreamTimeout(f"no {awaited} from {self.base_url} within the timeout")
        return UpstreamError(describe(exc))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _data(body: bytes | aiohttp.StreamReader) -> bytes | aiohttp.StreamReader | None:
    if isinstance(body, bytes):
        return body or None  # no body: aiohttp sends no Content-Length or Transfer-Encoding of its own
    return body


def _time_silence(response: aiohttp.ClientResponse, seconds: float) -> None:
    """Fail the body's reads once it stays silent `seconds` (aiohttp's sock_read, from now on).

    A body that came whole with the headers needs no timer (and one started
    now would outlive it: aiohttp drops the timer at the body's end).
    """
    connection = response.connection
    protocol = connection.protocol if connection is not None else None
    if protocol is None or response.content.is_eof():
        return
    protocol.read_timeout = seconds
    protocol.start_timeout()


def describe(exc: BaseException) -> str:
    """A short account of a client error for the client's 502, with no URL in it.

    aiohttp's text quotes the upstream URL: the internal address, and the
    query's credentials whatever their name (`?key=`, `?access_token=`,
    `?oauth_token=`, `?%24key=`). A malformed response says only what was
    wrong with it (its first line, printable and short); other errors have
    every URL cut out and what looks like a key masked. A connection that
    cannot be made names the host and port it tried (the operator's setting).
    """
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = exc.os_error.strerror or type(exc.os_error).__name__
        return f"{name}: cannot connect to {exc.host}:{exc.port}: {reason}"
    if isinstance(exc, aiohttp.ClientResponseError):
        first = str(exc.message).strip().split("\n", 1)[0]
        return f"{name}: the upstream's response is malformed: {printable(first[:MAX_DETAIL])}"
    return f"{name}: {printable(redact(_URL.sub('<url>', str(exc)))[:MAX_DETAIL])}"


async def read_whole(response: aiohttp.ClientResponse) -> bytes:
    """A non-streamed body; a reset or a silence past the idle timeout raises UpstreamError."""
    try:
        return await response.read()
    except TimeoutError as exc:
        raise UpstreamTimeout("the response body went silent past the idle timeout") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamError(f"the response body broke off: {type(exc).__name__}") from exc


class Upstreams:
    """One upstream per provider spec (`registry`), at the base URL its setting names, and one per named
    OpenAI-compatible upstream (`upstreams.compatible`)."""

    def __init__(self, settings: UpstreamSettings) -> None:
        named = {spec.upstream.name for spec in registry.REGISTRY.providers}
        unknown = sorted(set(settings.others) - named)
        if unknown:  # a misspelt RUNGUARD_<NAME>_UPSTREAM would otherwise be ignored
            raise ConfigError(
                f"upstreams.others.{unknown[0]}: no provider's upstream is named {unknown[0]!r} "
                f"(known: {', '.join(sorted(named))})"
            )
        self._by_provider: dict[str, Upstream] = {
            spec.name: Upstream(
                settings.base_url(spec.upstream.name, spec.upstream.default_url), settings, spec.upstream.locate
            )
            for spec in registry.REGISTRY.providers
        }
        for name, service in settings.compatible.items():  # OpenAI-compatible services, by their names
            self._by_provider[name] = Upstream(service.url, settings)

    def __getitem__(self, provider: Provider) -> Upstream:
        return self._by_provider[provider]

    async def close(self) -> None:
        for upstream in self._by_provider.values():
            await upstream.close()
