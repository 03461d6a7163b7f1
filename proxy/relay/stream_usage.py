"""Opt-in `upstreams.inject_stream_usage`: exact usage for streamed Chat Completions.

A streamed Chat request without `stream_options.include_usage` gets no usage
from OpenAI, so the proxy can only estimate it. With the option on, the proxy
asks upstream for usage (the one case where it re-serializes a request body)
and hides what the client did not ask for: the extra usage-only chunk
(`"choices": []` with `usage`) and the `"usage":null` every other chunk then
carries. The stream parser still sees the upstream bytes, usage included.
"""

from __future__ import annotations

import re

import orjson

_EVENT_END = re.compile(rb"\r?\n\r?\n")
_NULL_USAGE = b',"usage":null'
MAX_HELD = 1 << 20  # bytes of an unfinished event held back at most


def with_usage_requested(body: bytes) -> bytes | None:
    """The request body asking for `stream_options.include_usage`; None if it is not a JSON object."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    options = data.get("stream_options")
    data["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return orjson.dumps(data)


def _is_usage_only(data: bytes) -> bool:
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(payload, dict) and payload.get("choices") == [] and bool(payload.get("usage"))


class UsageChunkFilter:
    """Rewrites an SSE byte stream event by event; bytes of an unfinished event wait for the rest.

    An unfinished event past `MAX_HELD` bytes (one huge line) is not an event
    this filter rewrites (those are a few hundred bytes): it and the rest of
    the stream pass as they come, so no byte is held or scanned again.
    """

    __slots__ = ("_off", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._off = False

    def feed(self, chunk: bytes) -> bytes:
        if self._off:
            return chunk
        if len(self._pending) + len(chunk) > MAX_HELD and not _EVENT_END.search(chunk):
            self._off = True
            rest, self._pending = self._pending + chunk, b""
            return rest
        buffer = self._pending + chunk if self._pending else chunk
        out: list[bytes] = []
        start = 0
        for end in _EVENT_END.finditer(buffer):
            event = buffer[start : end.start()]
            start = end.end()
            if b'"usage":{' in event and _is_usage_only(event.removeprefix(b"data:").strip()):
                continue
            out.append(event.replace(_NULL_USAGE, b""))
            out.append(end.group())
        self._pending = buffer[start:]
        return b"".join(out)

    def flush(self) -> bytes:
        """What is left when the stream ends (an unterminated event, passed as it came)."""
        rest, self._pending = self._pending, b""
        return rest
