"""The tail: what the stops of sessions judged stuck really avoided (the calls each session had left), over the
calls they had reached; stops of sessions judged making progress or not judged are left out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.corpus.judge import Verdict
from bench.corpus.tail import tails

ROOT = Path(__file__).resolve().parents[2]


def _report(*stops: tuple[str, str, int, int]) -> dict[str, Any]:
    detectors: dict[str, Any] = {}
    for run, name, call, of_calls in stops:
        entry = detectors.setdefault(name, {"sessions_stopped": 0, "stops": []})
        entry["stops"].append({"run_id": run, "detector": name, "at_call": call, "of_calls": of_calls})
    return {"summary": {"sessions": 4, "responses": 100, "warned_responses": 0, "detectors": detectors}}


def _verdict(run: str, detector: str, call: int, kind: str) -> Verdict:
    return Verdict(run, run.split("/", maxsplit=1)[0], detector, call, kind, "read")


def test_the_calls_left_after_stuck_stops_over_the_calls_reached() -> None:
    report = _report(("a/1", "text_loop", 10, 75), ("a/2", "text_loop", 20, 25), ("a/3", "spiral", 5, 40))
    verdicts = [
        _verdict("a/1", "text_loop", 10, "stuck"),
        _verdict("a/2", "text_loop", 18, "stuck"),  # caught later than judged: still counted
        _verdict("a/3", "spiral", 5, "progress"),  # a false stop avoided nothing worth counting
    ]
    by_detector = {t.detector: t for t in tails(report, verdicts)}
    assert set(by_detector) == {"text_loop", "all"}
    loop = by_detector["text_loop"]
    assert (loop.stops, loop.reached, loop.avoided) == (2, 30, 66 + 6)
    assert by_detector["all"].ratio == pytest.approx(72 / 30)


def test_the_command_prints_the_table(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    report.write_bytes(orjson.dumps(_report(("a/1", "non_progress", 4, 8))))
    (tmp_path / "v").mkdir()
    line = {"run": "a/1", "source": "a", "detector": "non_progress", "call": 4, "verdict": "stuck", "why": "read"}
    (tmp_path / "v" / "a.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    done = subprocess.run(
        [sys.executable, "-m", "bench.corpus", "tail", str(report), "--verdicts", str(tmp_path / "v")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "non_progress" in done.stdout and "1.25" in done.stdout  # calls 4..8 left (5) over 4 reached
