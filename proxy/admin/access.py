"""Who may use RunGuard's own routes under `/runguard/`: one check, applied to every one of them.

`admin_refusal` runs on every request whose path is under `/runguard`,
whatever handler serves it, except `/runguard/health`, which stays open for
liveness probes (it tells only `ok` or `degraded`). Not as an aiohttp
middleware (an app with one runs every request, a model request too, through
the middleware chain): `checked(server, handler)` wraps each admin route's
handler (the admin API, metrics, the dashboard at `/runguard/ui/`), and the
catch-all route runs `admin_refusal` itself for the paths under `/runguard`
that reach it (`Metrics.counted`'s `own_paths`). The rules, in the order
they are checked:

1. `Host` names this proxy (refused with 403 otherwise; DNS rebinding sends
   the attacker's name): an IP literal that is loopback or the address the
   connection came in on, `localhost`, or the bind host, each with the port
   the connection came in on; or a name in `server.admin_hosts` (`name` for
   any port, `name:port` for that one). A request without `Host` (HTTP/1.0)
   passes: browsers always send one.
2. `Origin`, when present, names this proxy by the same rule (403 otherwise;
   `Origin: null` included): a page on another site cannot act through a
   visitor's browser.
3. The token and bind rules of `admin.admin_denial` (401 / 403).
4. Requests that change something (any method but GET, HEAD, OPTIONS) carry
   `Content-Type: application/json` (415 otherwise) and a JSON object body,
   `{}` when there is nothing to say (an empty body counts as `{}`; 400 for
   anything else). An HTML form cannot send that, and a cross-site script
   cannot send it without a CORS preflight, which this proxy never grants.

Refusals are JSON `{"error": ...}`; nothing in them repeats a token.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from runguard.config import ServerSettings

READS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def is_loopback(host: str) -> bool:
    """Whether `host` (a bind address) is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refusal(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON `{"error": message}` response."""
    return web.Response(
        status=status, body=orjson.dumps({"error": message}), content_type="application/json", headers=headers
    )


def admin_denial(server: ServerSettings, authorization: str | None, *, admin: bool = True) -> web.Response | None:
    """The token and bind rules: the response refusing this caller, or None when it may go on.

    - `server.admin_token` set: `Authorization: Bearer <token>` (compared in
      constant time) is required, from loopback too, metrics included.
    - no token and bound to loopback: open (only local processes reach it).
    - no token and bound beyond loopback: 403, disabled, except metrics
      (`admin=False`): their labels are bounded and content-free (no keys,
      hashes or run ids); set a token to protect them too.
    """
    token = server.admin_token
    if token is None:
        if admin and not is_loopback(server.host):
            return refusal(
                403,
                f"the admin API is disabled: the proxy is bound to {server.host} without server.admin_token "
                "(set RUNGUARD_ADMIN_TOKEN to enable it)",
            )
        return None
    scheme, _, given = (authorization or "").partition(" ")
    offered = given.strip().encode("utf-8", "surrogateescape")  # header bytes that were not UTF-8 stay bytes
    if scheme.lower() == "bearer" and hmac.compare_digest(offered, token.get_secret_value().encode()):
        return None
    return refusal(401, "admin token required: Authorization: Bearer <token>", {"WWW-Authenticate": "Bearer"})


def _address(hostname: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(hostname)
    except ValueError:
        return None


def _local(request: web.Request) -> tuple[str, int] | None:
    """The address and port the request's connection came in on (None once the connection is gone)."""
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    if not isinstance(sockname, tuple) or len(sockname) < 2:
        return None
    return str(sockname[0]), int(sockname[1])


def names_this_proxy(server: ServerSettings, hostname: str, port: int, local: tuple[str, int]) -> bool:
    """Whether `hostname:port` (from a Host or Origin header) is this proxy, reached over `local`."""
    hostname = hostname.lower().rstrip(".")
    for allowed in server.admin_hosts:
        name, _, wanted = allowed.lower().rpartition(":") if _has_port(allowed) else (allowed.lower(), "", "")
        if name.strip("[]") == hostname and (not wanted or wanted == str(port)):
            return True
    local_ip, local_port = local
    if port != local_port:
        return False
    address = _address(hostname)
    if address is not None:
        return address.is_loopback or address == _address(local_ip.split("%")[0])
    return hostname in ("localhost", server.host.lower())


def _has_port(entry: str) -> bool:
    """`name:8787` or `[::1]:8787`, not a bare IPv6 address."""
    head, sep, tail = entry.rpartition(":")
    return bool(sep) and tail.isdigit() and (entry.startswith("[") or ":" not in head)


def _host_port(authority: str, scheme: str) -> tuple[str, int] | None:
    """The host and port of `scheme://authority` (the default port when none is named); None if unreadable."""
    try:
        parts = urlsplit(f"{scheme}://{authority}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path or parts.query:
        return None
    return parts.hostname, port if port is not None else _DEFAULT_PORTS.get(scheme, 80)


def _origin(origin: str) -> tuple[str, int] | None:
    scheme, sep, authority = origin.partition("://")
    if not sep or scheme.lower() not in _DEFAULT_PORTS:
        return None
    return _host_port(authority, scheme.lower())


async def admin_refusal(server: ServerSettings, request: web.Request) -> web.Response | None:
    """The response refusing `request` to RunGuard's own routes, or None when it may go on (see the module)."""
    local = _local(request)
    if local is None:
        return refusal(403, "the connection is gone")
    host = request.headers.get("Host")
    if host is not None:
        target = _host_port(host, "http")
        if target is None or not names_this_proxy(server, *target, local):
            return refusal(
                403,
                f"RunGuard's admin routes do not answer for Host {host!r}: use the address the proxy is bound to "
                "(127.0.0.1, localhost) or add the name to server.admin_hosts",
            )
    origin = request.headers.get("Origin")
    if origin is not None:
        source = _origin(origin)
        if source is None or not names_this_proxy(server, *source, local):
            return refusal(403, f"RunGuard's admin routes refuse requests from another site (Origin {origin!r})")
    denied = admin_denial(server, request.headers.get("Authorization"), admin=request.path != "/runguard/metrics")
    if denied is not None:
        return denied
    if request.method in READS:
        return None
    if request.content_type != "application/json":
        return refusal(415, "send Content-Type: application/json with a JSON object body ({} when empty)")
    body = await request.read()
    if body.strip():
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return refusal(400, "the body must be a JSON object ({} when empty)")
    return None


def checked(server: ServerSettings, handler: Handler) -> Handler:
    """`handler` (a route's under `/runguard`) behind `admin_refusal` (see the module docstring)."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        refused = await admin_refusal(server, request)
        if refused is not None:
            return refused
        return await handler(request)

    return guarded
