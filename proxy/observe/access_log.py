"""One structured JSON line per model request, on stdout.

Written when the guard finishes a request (forwarded or answered locally),
as an `Observer`; on when `log.access_log` is true. A line holds ids, counts,
costs (`"usd": null` for a model with no price), timings and verdicts: the key only as its salted hash, never the API
key and never message content. Other log messages go to stderr.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import sys
from collections.abc import AsyncIterator
from typing import BinaryIO

import orjson

from runguard.proxy.guard import NullObserver
from runguard.proxy.store.records import RequestRecord


def access_line(record: RequestRecord) -> bytes:
    """The JSON object logged for `record` (`"polled": true` only on a background response's poll)."""
    line = {
        "ts": datetime.datetime.fromtimestamp(record.at, datetime.UTC),  # orjson writes RFC 3339, fast
        "run_id": record.run_id,
        "key_hash": record.key_hash,
        "index": record.index,
        "agent": record.agent,
        "model": record.model,
        "provider": record.provider,
        "api": record.api,
        "streamed": record.streamed,
        "status": record.status,
        "tokens": {
            "input": record.input_tokens,
            "output": record.output_tokens,
            "cached": record.cached_tokens,
            "reasoning": record.reasoning_tokens,
            "estimated": record.usage_estimated,
        },
        "usd": None if record.unpriced else round(record.usd, 6),  # unpriced: its cost is unknown, never 0
        "upstream_ms": round(record.upstream_ms, 2) if record.upstream_ms is not None else None,
        "overhead_ms": round(record.overhead_ms, 3),
        "blocked_by": record.blocked_by,
        "warnings": [v.detector for v in record.verdicts if v.action in ("warn", "nudge")],
        "error": record.error,
    }
    if record.polled:
        line["polled"] = True
    return orjson.dumps(line, option=orjson.OPT_UTC_Z)


class AccessLog(NullObserver):
    """Writes each finished request as one JSON line to stdout, a batch at a time.

    Lines wait at most `interval` seconds (or until `max_pending` are waiting)
    and go out in one write: a write and a flush per request cost more than
    the rest of the line's work. The app's shutdown writes what is left
    (`lifetime`). The stream is looked up when written, so a redirected
    `sys.stdout` is honoured; a closed one loses the lines, never the request.
    """

    def __init__(self, stream: BinaryIO | None = None, interval: float = 0.2, max_pending: int = 512) -> None:
        self._stream = stream
        self._interval = interval
        self._max_pending = max_pending
        self._pending: list[bytes] = []
        self._timer: asyncio.TimerHandle | None = None

    def request_done(self, record: RequestRecord) -> None:
        self._pending.append(access_line(record))
        if len(self._pending) >= self._max_pending:
            self.flush()
        elif self._timer is None:
            try:
                self._timer = asyncio.get_running_loop().call_later(self._interval, self.flush)
            except RuntimeError:  # no loop running (a synchronous caller): write now
                self.flush()

    def flush(self) -> None:
        """Write every waiting line now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        data = b"\n".join(self._pending) + b"\n"
        self._pending.clear()
        stream = self._stream if self._stream is not None else sys.stdout.buffer
        try:
            stream.write(data)
            stream.flush()
        except (OSError, ValueError) as exc:  # stdout closed or gone: logging must not break requests
            logging.getLogger("runguard.access").warning("access log lines lost: %r", exc)

    async def lifetime(self, _app: object) -> AsyncIterator[None]:
        """For `app.cleanup_ctx`: write what is waiting when the app shuts down."""
        yield
        self.flush()
