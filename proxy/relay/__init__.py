"""relay: moving bytes between the client and the upstream.

`ProxyContext` (what every handler shares), the pooled upstream client, streams, the headers that cross,
decompression for the parsers, the proxy's own error answers, the shutdown clock.

Its face is `__all__`, each name imported on first use (`runguard.proxy.core.faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runguard.proxy.core.faces import lazy_face

if TYPE_CHECKING:
    from runguard.proxy.relay.codec import BodyTooLarge, decode_body, inflate
    from runguard.proxy.relay.context import CONTEXT, ProxyContext
    from runguard.proxy.relay.headers import is_upgrade, upstream_request_headers
    from runguard.proxy.relay.replies import error_body, provider_error, upstream_failed
    from runguard.proxy.relay.shutdown import Shutdown, handlers_wait
    from runguard.proxy.relay.stream_usage import UsageChunkFilter, with_usage_requested
    from runguard.proxy.relay.streams import is_stream, relay_stream, whole_response
    from runguard.proxy.relay.upstream import Upstreams, read_whole

HOMES = {
    "BodyTooLarge": "codec",
    "CONTEXT": "context",
    "ProxyContext": "context",
    "Shutdown": "shutdown",
    "Upstreams": "upstream",
    "UsageChunkFilter": "stream_usage",
    "decode_body": "codec",
    "error_body": "replies",
    "handlers_wait": "shutdown",
    "inflate": "codec",
    "is_stream": "streams",
    "is_upgrade": "headers",
    "provider_error": "replies",
    "read_whole": "upstream",
    "relay_stream": "streams",
    "upstream_failed": "replies",
    "upstream_request_headers": "headers",
    "whole_response": "streams",
    "with_usage_requested": "stream_usage",
}
__all__ = [
    "CONTEXT",
    "BodyTooLarge",
    "ProxyContext",
    "Shutdown",
    "Upstreams",
    "UsageChunkFilter",
    "decode_body",
    "error_body",
    "handlers_wait",
    "inflate",
    "is_stream",
    "is_upgrade",
    "provider_error",
    "read_whole",
    "relay_stream",
    "upstream_failed",
    "upstream_request_headers",
    "whole_response",
    "with_usage_requested",
]

__getattr__ = lazy_face(__name__, HOMES)
