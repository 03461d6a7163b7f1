"""The read-and-parse floor: the pass-through plus the parsing any guard must do, and nothing else.

    python -m bench.floor --upstream http://127.0.0.1:PORT [--port 0]

On top of `bench/passthrough.py` (same server, client and uvloop settings) it
reads the request body whole and parses it with orjson, looks up one header
(`X-Run-Id`), forwards, and parses the answer on the side: a whole JSON body
after relaying it; an SSE stream split into events at blank lines while it is
relayed byte for byte, each `data:` line parsed. No run, no state, no record:
what reading both bodies costs, so RunGuard's figures can be read as
"beyond the parse" (issue #50).
"""

from __future__ import annotations

import contextlib

import orjson
from aiohttp import web

from bench import passthrough
from bench.passthrough import filtered, upstream_call

RUN_HEADER = "X-Run-Id"


class SseSplitter:
    """Cuts relayed bytes into SSE events at blank lines and parses each event's `data:` lines."""

    def __init__(self) -> None:
        self.pending = b""
        self.events = 0

    def feed(self, chunk: bytes) -> None:
        data = self.pending + chunk
        start = 0
        while (end := data.find(b"\n\n", start)) != -1:
            self._event(data[start:end])
            start = end + 2
        self.pending = data[start:]

    def _event(self, event: bytes) -> None:
        for line in event.split(b"\n"):
            if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
                with contextlib.suppress(orjson.JSONDecodeError):
                    orjson.loads(line[5:])
        self.events += 1


def _parsed(body: bytes) -> object:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


async def handle(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    _parsed(body)
    request.headers.get(RUN_HEADER)
    async with upstream_call(request, body) as upstream:
        headers = filtered(upstream.headers)
        if upstream.content_type == "text/event-stream":
            out = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
            await out.prepare(request)
            splitter = SseSplitter()
            async for chunk in upstream.content.iter_any():
                await out.write(chunk)
                splitter.feed(chunk.replace(b"\r\n", b"\n") if b"\r" in chunk else chunk)
            await out.write_eof()
            return out
        answer = await upstream.read()
        response = web.Response(status=upstream.status, reason=upstream.reason, headers=headers, body=answer)
        await response.prepare(request)
        await response.write_eof()
        _parsed(answer)
        return response


def main() -> None:
    passthrough.main(handle, "The read-and-parse floor baseline.")


if __name__ == "__main__":
    main()
