"""`python -m bench.corpus sources REPLAY.json [--build DIR]`: docs/corpus.md's table, one row a source.

Each source's sessions, calls and sessions over 100 calls come from the build's `sessions.json`; its
stops (with the false ones, judged making progress by `verdicts/*.jsonl`) and the share of its
responses that carried a warning, by detector, from a `runguard-proxy replay DIR --json` report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.corpus.judge import Verdict, judge

LONG = 100  # calls: a session over this is "long" (issue #44 asks for 30 of them)


@dataclass(slots=True)
class SourceRow:
    source: str
    family: str
    protocol: str
    sessions: int = 0
    calls: int = 0
    long: int = 0
    responses: int = 0
    stopped: int = 0
    false: int = 0
    warned: Counter[str] = field(default_factory=Counter)  # by detector: responses it warned on
    warned_any: int = 0

    def add(self, other: SourceRow) -> None:
        """Count `other`'s figures into this row's (the total's)."""
        self.sessions += other.sessions
        self.calls += other.calls
        self.long += other.long
        self.responses += other.responses
        self.stopped += other.stopped
        self.false += other.false
        self.warned_any += other.warned_any


def _source(run_id: str) -> str:
    return run_id.split("/", 1)[0]


def rows(
    report: Mapping[str, Any], sessions: Iterable[Mapping[str, Any]], verdicts: Iterable[Verdict]
) -> list[SourceRow]:
    """One row per source of the build, in the build's order."""
    by_source: dict[str, SourceRow] = {}
    for session in sessions:
        name = str(session["source"])
        row = by_source.setdefault(name, SourceRow(name, str(session["family"]), str(session["protocol"])))
        calls = int(session["calls"])
        row.sessions += 1
        row.calls += calls
        row.long += calls > LONG
    for run in report["runs"]:
        if (row := by_source.get(_source(run["run_id"]))) is not None:
            row.responses += int(run["requests"])
    judged = judge(report, verdicts).total  # every stop, and those judged making progress
    for stop in judged.stopped:
        if (row := by_source.get(_source(stop.run))) is not None:
            row.stopped += 1
    for stop in judged.false:
        if (row := by_source.get(_source(stop.run))) is not None:
            row.false += 1
    seen: set[tuple[str, int]] = set()
    for trip in report["trips"]:
        if trip["action"] != "warn" or (row := by_source.get(_source(trip["run_id"]))) is None:
            continue
        row.warned[trip["detector"]] += 1
        if (place := (trip["run_id"], int(trip["request_index"]))) not in seen:
            seen.add(place)
            row.warned_any += 1
    return list(by_source.values())


def _warned(row: SourceRow) -> str:
    share = f"{row.warned_any / row.responses:.1%}" if row.responses else "-"
    named = ", ".join(f"{name} {count}" for name, count in sorted(row.warned.items()))
    return f"{share} ({named})" if named else share


def markdown(found: list[SourceRow]) -> str:
    head = "| source | family | protocol | sessions | calls | >100 calls | stopped (false) | responses warned |"
    lines = [head, "|---|---|---|---:|---:|---:|---:|---|"]
    for row in found:
        cells = [row.source, row.family, row.protocol, row.sessions, row.calls, row.long]
        lines.append("| " + " | ".join(map(str, cells)) + f" | {row.stopped} ({row.false}) | {_warned(row)} |")
    total = SourceRow("all", f"{len({row.family for row in found})} families", "")
    for row in found:
        total.add(row)
    lines.append(
        f"| all | {total.family} | | {total.sessions} | {total.calls} | {total.long} | {total.stopped} ({total.false}) "
        f"| {_warned(total)} |"
    )
    return "\n".join(lines)


def run(report_path: Path, build: Path, verdicts: list[Verdict]) -> str:
    sessions = [orjson.loads(line) for line in (build / "sessions.json").read_bytes().splitlines() if line.strip()]
    return markdown(rows(orjson.loads(report_path.read_bytes()), sessions, verdicts))
