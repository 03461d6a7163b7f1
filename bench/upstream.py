"""A fast fake provider (OpenAI Chat and Responses, Gemini) in its own process.

    python -m bench.upstream [--port 0]

Every answer is pre-serialized bytes, built once per variant and cached; the
request body is read but never parsed (a stream is recognised by
`"stream":true` in the body, or Gemini's :streamGenerateContent path). Request
headers steer the answer (the proxy forwards them untouched):

- `x-bench-variant: J`   the tool call of step J of the agent loop (default 1);
- `x-bench-response: large`   about 300 KB of text instead of a tool call;
- `x-bench-response: tokens`  a short text answer, streamed a few tokens an event;
- `x-bench-stall-ms: MS`  a stream sends its first event, waits MS, then the rest;
- `x-bench-pace-ms: MS`  a stream waits MS after every event (a model's pace: events arrive one by one).

`GET /bench/stats` answers the number of requests served.
"""

from __future__ import annotations

import argparse
import asyncio

from aiohttp import web

from bench import replies, serving
from bench.payloads import Api

_JSON = {"Content-Type": "application/json", "x-request-id": "req_bench", "openai-processing-ms": "180"}
_ANSWERS = {"large": replies.LARGE, "tokens": replies.TOKENS}
_SSE = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "x-request-id": "req_bench"}


class FakeProvider:
    def __init__(self) -> None:
        self.served = 0
        self._bodies: dict[tuple[Api, int, replies.Text | None], bytes] = {}
        self._events: dict[tuple[Api, int, replies.Text | None], list[bytes]] = {}

    def body(self, api: Api, variant: int, answer: replies.Text | None) -> bytes:
        key = (api, variant, answer)
        found = self._bodies.get(key)
        if found is None:
            found = self._bodies[key] = replies.body(api, variant, answer)
        return found

    def events(self, api: Api, variant: int, answer: replies.Text | None) -> list[bytes]:
        key = (api, variant, answer)
        found = self._events.get(key)
        if found is None:
            found = self._events[key] = replies.events(api, variant, answer)
        return found

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.served += 1
        path = request.path
        api: Api
        if path.endswith("/chat/completions"):
            api, stream = "chat", b'"stream":true' in body
        elif path.endswith("/responses"):
            api, stream = "responses", b'"stream":true' in body
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            api, stream = "gemini", ":streamGenerateContent" in path
        elif request.method == "GET" and path.rstrip("/") in ("/v1/models", "/v1beta/models"):
            listing = replies.MODELS_LIST if path.startswith("/v1/") else replies.GEMINI_MODELS_LIST
            return web.Response(body=listing, headers=_JSON)
        elif path == "/bench/stats":
            return web.json_response({"served": self.served})
        else:
            return web.Response(status=404, body=b'{"error":{"message":"no such path","code":404}}', headers=_JSON)
        headers = request.headers
        variant = int(headers.get("x-bench-variant", "1"))
        answer = _ANSWERS.get(headers.get("x-bench-response", ""))
        if not stream:
            return web.Response(body=self.body(api, variant, answer), headers=_JSON)
        stall = float(headers.get("x-bench-stall-ms", "0")) / 1000.0
        pace = float(headers.get("x-bench-pace-ms", "0")) / 1000.0
        out = web.StreamResponse(headers=_SSE)
        await out.prepare(request)
        for index, event in enumerate(self.events(api, variant, answer)):
            await out.write(event)
            if index == 0 and stall > 0:
                await asyncio.sleep(stall)
            elif pace > 0:
                await asyncio.sleep(pace)
        await out.write_eof()
        return out


def make_app() -> web.Application:
    app = web.Application(client_max_size=1 << 30)
    app.router.add_route("*", "/{tail:.*}", FakeProvider().handle)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="A fast fake provider for the benchmarks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--no-uvloop", action="store_true")
    args = parser.parse_args()
    serving.run(lambda: serving.serve(make_app(), args.host, args.port), use_uvloop=not args.no_uvloop)


if __name__ == "__main__":
    main()
