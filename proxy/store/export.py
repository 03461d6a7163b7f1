"""Recorded traffic out of the store, as the JSON-lines file `replay` reads (docs/records.md).

One line per recorded exchange (store.record_bodies), in arrival order. A
body that is JSON is written as a JSON value, anything else (an SSE stream)
as text, so a file is readable with `jq` and `replay FILE` reads it back to
the same exchanges the store holds: export, then replay, reports what
`replay --from-db` reports.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import IO, Any

import orjson

FIELDS = (
    "run_id",
    "at",
    "path",
    "query",
    "status",
    "key_hash",
    "request",
    "response",
    "answered_locally",
    "error",
    "index",
    "agent",
    "model",
)


def _body(raw: bytes) -> Any:
    """A JSON body as its value, anything else as text ("" for no body)."""
    if raw.lstrip()[:1] in (b"{", b"["):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return raw.decode("utf-8", "replace")


def line(row: dict[str, Any]) -> bytes:
    """One `RecordedReader.exchanges()` row as a record line (with its newline)."""
    record = {
        "run_id": row["run_id"],
        "at": row["at"],
        "path": row["path"],
        "query": row["query"],
        "status": row["status"],
        "key_hash": row["key_hash"],
        "request": _body(bytes(row["request"])),
        "response": _body(bytes(row["response"])),
        "answered_locally": row["status"] is None and row["blocked_by"] is not None,
        "error": row["error"],
        "index": row["request_index"],
        "agent": row["agent"],
        "model": row["model"],
    }
    return orjson.dumps(record) + b"\n"


async def export(rows: AsyncIterable[dict[str, Any]], out: IO[bytes]) -> tuple[int, set[str]]:
    """Write every row as a record line to `out`; the number of lines and the runs they belong to."""
    written, runs = 0, set()
    async for row in rows:
        out.write(line(row))
        written += 1
        runs.add(row["run_id"])
    return written, runs
