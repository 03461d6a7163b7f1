"""docs/corpus.md's table: each source's sessions, calls and long sessions from the build, its stops (the
false ones by the verdicts) and the share of its responses warned on from a replay report, and the total."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from bench.corpus.judge import Verdict
from bench.corpus.sources_table import markdown, rows

ROOT = Path(__file__).resolve().parents[2]

SESSIONS = [
    {"source": "a", "family": "fam-a", "protocol": "text", "calls": 120},
    {"source": "a", "family": "fam-a", "protocol": "text", "calls": 30},
    {"source": "b", "family": "fam-b", "protocol": "function-calling", "calls": 10},
]


def _report() -> dict[str, Any]:
    stops = [
        {"run_id": "a/1", "at_call": 50, "of_calls": 120},
        {"run_id": "a/2", "at_call": 9, "of_calls": 30},
    ]
    return {
        "runs": [
            {"run_id": "a/1", "requests": 50},
            {"run_id": "a/2", "requests": 9},
            {"run_id": "b/1", "requests": 10},
        ],
        "trips": [
            {"run_id": "b/1", "detector": "tool_storm", "action": "warn", "request_index": 3},
            {"run_id": "b/1", "detector": "consecutive_same_tool", "action": "warn", "request_index": 3},
            {"run_id": "b/1", "detector": "tool_storm", "action": "warn", "request_index": 7},
            {"run_id": "a/1", "detector": "text_loop", "action": "block", "request_index": 50},
        ],
        "summary": {"sessions": 3, "detectors": {"text_loop": {"stops": stops}}},
    }


def test_each_source_s_sessions_stops_false_stops_and_warned_share() -> None:
    verdicts = [
        Verdict("a/1", "a", "text_loop", 50, "progress", "read"),
        Verdict("a/2", "a", "text_loop", 9, "stuck", "read"),
    ]
    found = {row.source: row for row in rows(_report(), SESSIONS, verdicts)}
    a, b = found["a"], found["b"]
    assert (a.sessions, a.calls, a.long, a.stopped, a.false, a.warned_any) == (2, 150, 1, 2, 1, 0)
    assert (b.sessions, b.calls, b.long, b.stopped, b.warned_any, b.responses) == (1, 10, 0, 0, 2, 10)
    assert b.warned == {"tool_storm": 2, "consecutive_same_tool": 1}  # two detectors on one response: one warned
    table = markdown(list(found.values())).splitlines()
    assert table[2] == "| a | fam-a | text | 2 | 150 | 1 | 2 (1) | 0.0% |"
    assert (
        table[3]
        == "| b | fam-b | function-calling | 1 | 10 | 0 | 0 (0) | 20.0% (consecutive_same_tool 1, tool_storm 2) |"
    )
    assert table[4] == "| all | 2 families | | 3 | 160 | 1 | 2 (1) | 2.9% |"


def test_the_command_reads_the_build_and_the_report(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "sessions.json").write_bytes(b"\n".join(orjson.dumps(s) for s in SESSIONS) + b"\n")
    (tmp_path / "replay.json").write_bytes(orjson.dumps(_report()))
    verdicts = tmp_path / "verdicts"
    verdicts.mkdir()
    command = [sys.executable, "-m", "bench.corpus", "sources", str(tmp_path / "replay.json"), "--build", str(build)]
    out = subprocess.run([*command, "--verdicts", str(verdicts)], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "| a | fam-a | text | 2 | 150 | 1 | 2 (0) | 0.0% |" in out.stdout  # no verdicts: no false stop counted
