"""One structured JSON line per model request, on the `runguard.access` logger.

Written when the guard finishes a request (forwarded or answered locally),
as an `Observer`; on when `log.access_log` is true. A line holds ids, counts,
costs, timings and verdicts: the key only as its salted hash, never the API
key and never message content.
"""

from __future__ import annotations

import datetime
import logging

import orjson

from runguard.proxy.observe import NullObserver
from runguard.proxy.records import RequestRecord


def access_line(record: RequestRecord) -> bytes:
    """The JSON object logged for `record`."""
    return orjson.dumps(
        {
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
            "usd": round(record.usd, 6),
            "upstream_ms": round(record.upstream_ms, 2) if record.upstream_ms is not None else None,
            "overhead_ms": round(record.overhead_ms, 3),
            "blocked_by": record.blocked_by,
            "warnings": [v.detector for v in record.verdicts if v.action == "warn"],
            "error": record.error,
        },
        option=orjson.OPT_UTC_Z,
    )


class AccessLog(NullObserver):
    """Logs each finished request at INFO; costs nothing when the logger is off."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger or logging.getLogger("runguard.access")

    def request_done(self, record: RequestRecord) -> None:
        if self._log.isEnabledFor(logging.INFO):
            self._log.info(access_line(record).decode())
