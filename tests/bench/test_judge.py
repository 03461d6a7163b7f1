"""The judge: a replay report joined with the verdicts people wrote counts, per detector, its false stops
(sessions judged making progress), the stuck sessions it catches (also when it stops them later than
judged) and the stops nobody read; a stuck session nothing stops is missed; the committed verdicts are
well formed and name every stop's run once per call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from bench.corpus.judge import VERDICTS, judge, load_verdicts, markdown, text

ROOT = Path(__file__).resolve().parents[2]


def _report(*stops: tuple[str, str, int]) -> dict[str, Any]:
    detectors: dict[str, Any] = {}
    for run, name, call in stops:
        entry = detectors.setdefault(name, {"sessions_stopped": 0, "stops": []})
        entry["stops"].append({"run_id": run, "detector": name, "at_call": call, "of_calls": 40})
    return {"summary": {"sessions": 10, "responses": 200, "warned_responses": 4, "detectors": detectors}}


def _write(folder: Path, *rows: tuple[str, str, int, str]) -> None:
    lines = [
        orjson.dumps({"run": r, "source": r.split("/")[0], "detector": d, "call": c, "verdict": v, "why": "read"})
        for r, d, c, v in rows
    ]
    (folder / "some.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def test_false_stops_catches_late_catches_unjudged_and_missed(tmp_path: Path) -> None:
    _write(
        tmp_path,
        ("a/1", "text_loop", 12, "progress"),
        ("a/2", "text_loop", 9, "stuck"),
        ("a/3", "text_loop", 20, "stuck"),
        ("a/4", "spiral", 7, "borderline"),
        ("a/5", "text_loop", 30, "stuck"),
    )
    report = _report(
        ("a/1", "text_loop", 12),  # false stop
        ("a/2", "text_loop", 11),  # stuck, stopped two calls later than judged: caught
        ("a/3", "text_loop", 8),  # stuck later on, stopped before: nobody read call 8
        ("a/4", "spiral", 7),  # borderline
        ("a/6", "fan_out", 3),  # never judged
    )
    judged = judge(report, load_verdicts(tmp_path))
    rows = {row.detector: row for row in judged.rows}
    assert [s.run for s in rows["text_loop"].false] == ["a/1"]
    assert [s.run for s in rows["text_loop"].caught] == ["a/2"]
    assert sorted(s.run for s in judged.total.unjudged) == ["a/3", "a/6"]
    assert [s.run for s in rows["spiral"].other] == ["a/4"]
    assert judged.stuck == ["a/2", "a/3", "a/5"]
    assert judged.missed == ["a/5"]  # a/3 is stopped, earlier than judged: to be read, not missed
    table = markdown(judged, before=judged)
    assert "| `text_loop` | 3 | 1 | 10.0% | 1 | 33.3% | 0 | 1 | 3 (1) |" in table
    assert "| all | 5 | 1 | 10.0% | 1 | 33.3% | 1 | 2 | 5 (1) |" in table
    listing = text(judged)
    assert "a/6  fan_out at call 3 of 40" in listing
    assert "judged stuck, not stopped:\n  a/5" in listing


def test_the_command_prints_the_table(tmp_path: Path) -> None:
    _write(tmp_path, ("a/1", "text_loop", 12, "progress"))
    report = tmp_path / "replay.json"
    report.write_bytes(orjson.dumps(_report(("a/1", "text_loop", 12))))
    command = [sys.executable, "-m", "bench.corpus", "judge", str(report), "--verdicts", str(tmp_path), "--markdown"]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "| `text_loop` | 1 | 1 | 10.0% | 0 | - | 0 | 0 |" in out


def test_the_committed_verdicts_are_well_formed() -> None:
    verdicts = load_verdicts(VERDICTS)
    assert verdicts
    seen = set()
    for verdict in verdicts:
        assert verdict.run.startswith(verdict.source + "/")
        assert verdict.why and verdict.call >= 1
        assert (verdict.run, verdict.call) not in seen
        seen.add((verdict.run, verdict.call))
