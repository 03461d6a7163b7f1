"""`python -m bench.corpus judge REPLAY.json`: a replay report joined with the verdicts people wrote.

Each stop of the corpus was read around its call and judged (`verdicts/*.jsonl`, one JSON line per
judged session: run, source, detector, call, verdict `stuck` / `progress` / `borderline`, why). The
join says, per detector, how many sessions it stops, how many of those were making progress (false
stops), how many stuck sessions it catches, and which stops nobody has read yet, so a person reads
them and adds a line.

A verdict holds for a stop at the call it was written for. A session judged stuck stays stuck: a
stop at that call or later catches it; a stop earlier, or a stop elsewhere in a session judged
making progress, was not read (the agent may be doing something else there) and is listed as
unjudged. The verdicts of sessions no longer stopped stay: a session judged stuck that nothing
stops counts as missed in the catch rate (one stopped before its judged call is listed to be read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

VERDICTS = Path(__file__).parent / "verdicts"
KINDS = ("stuck", "progress", "borderline")


@dataclass(frozen=True, slots=True)
class Verdict:
    run: str
    source: str
    detector: str
    call: int
    verdict: str
    why: str


@dataclass(frozen=True, slots=True)
class Stop:
    run: str
    detector: str
    call: int
    of_calls: int


@dataclass(slots=True)
class Row:
    """One detector's figures over one replay."""

    detector: str
    stopped: list[Stop] = field(default_factory=list)
    false: list[Stop] = field(default_factory=list)
    caught: list[Stop] = field(default_factory=list)
    other: list[Stop] = field(default_factory=list)
    unjudged: list[Stop] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Judged:
    sessions: int
    responses: int
    warned: int
    rows: list[Row]
    total: Row
    stuck: list[str]
    missed: list[str]


def load_verdicts(folder: Path = VERDICTS) -> list[Verdict]:
    """Every line of every `*.jsonl` in `folder`; a line of another shape stops the load with its place."""
    found: list[Verdict] = []
    for path in sorted(folder.glob("*.jsonl")):
        for number, line in enumerate(path.read_bytes().splitlines(), 1):
            if not line.strip():
                continue
            item = orjson.loads(line)
            if item.get("verdict") not in KINDS:
                raise ValueError(f"{path.name}:{number}: verdict must be one of {', '.join(KINDS)}")
            found.append(
                Verdict(
                    str(item["run"]),
                    str(item["source"]),
                    str(item["detector"]),
                    int(item["call"]),
                    str(item["verdict"]),
                    str(item.get("why", "")),
                )
            )
    return found


def stops_of(report: Mapping[str, Any]) -> list[Stop]:
    """The stops a `replay --json` report lists, detector by detector."""
    out: list[Stop] = []
    for name, figures in report["summary"]["detectors"].items():
        for stop in figures.get("stops", ()):
            out.append(Stop(stop["run_id"], name, int(stop["at_call"]), int(stop.get("of_calls", 0))))
    return out


def verdict_for(stop: Stop, judged: Iterable[Verdict]) -> Verdict | None:
    """The verdict that holds for `stop`: one written for its call, else a stuck one written for an earlier
    call of its session (a stuck session stopped later is still caught)."""
    exact = [v for v in judged if v.call == stop.call]
    if exact:
        return next((v for v in exact if v.detector == stop.detector), exact[0])
    return next((v for v in judged if v.verdict == "stuck" and v.call <= stop.call), None)


def judge(report: Mapping[str, Any], verdicts: Iterable[Verdict]) -> Judged:
    by_run: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        by_run.setdefault(verdict.run, []).append(verdict)
    rows: dict[str, Row] = {}
    total = Row("all")
    for stop in stops_of(report):
        row = rows.setdefault(stop.detector, Row(stop.detector))
        found = verdict_for(stop, by_run.get(stop.run, ()))
        kind = found.verdict if found else None
        place = {"progress": "false", "stuck": "caught", "borderline": "other", None: "unjudged"}[kind]
        for target in (row, total):
            target.stopped.append(stop)
            getattr(target, place).append(stop)
    stuck = sorted(run for run, items in by_run.items() if any(v.verdict == "stuck" for v in items))
    stopped = {stop.run for stop in total.stopped}  # one stopped before its judged call is unjudged, not missed
    summary = report["summary"]
    ordered = sorted(rows.values(), key=lambda r: (-len(r.stopped), r.detector))
    return Judged(
        sessions=int(summary["sessions"]),
        responses=int(summary.get("responses", 0)),
        warned=int(summary.get("warned_responses", 0)),
        rows=ordered,
        total=total,
        stuck=stuck,
        missed=[run for run in stuck if run not in stopped],
    )


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def _cells(row: Row, judged: Judged) -> list[str]:
    return [
        str(len(row.stopped)),
        str(len(row.false)),
        _share(len(row.false), judged.sessions),
        str(len(row.caught)),
        _share(len(row.caught), len(judged.stuck)),
        str(len(row.other)),
        str(len(row.unjudged)),
    ]


HEADER = ["sessions stopped", "false stops (making progress)", "false-stop rate", "stuck caught", "catch rate"]
HEADER += ["borderline", "unjudged"]


def markdown(judged: Judged, before: Judged | None = None) -> str:
    """The table of docs/detectors.md's "On real sessions", with a `before` column when one is given."""
    head = ["detector", *HEADER] + (["before: stopped (false)"] if before else [])
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    names = [row.detector for row in judged.rows]
    names += [row.detector for row in (before.rows if before else []) if row.detector not in names]
    rows = {row.detector: row for row in judged.rows}
    old = {row.detector: row for row in before.rows} if before else {}
    for name in [*names, "all"]:
        row = judged.total if name == "all" else rows.get(name, Row(name))
        cells = [name if name == "all" else f"`{name}`", *_cells(row, judged)]
        if before:
            was = before.total if name == "all" else old.get(name, Row(name))
            cells.append(f"{len(was.stopped)} ({len(was.false)})")
        lines.append("| " + " | ".join(cells) + " |")
    warned = _share(judged.warned, judged.responses)
    lines.append("")
    lines.append(
        f"{judged.sessions} sessions, {len(judged.stuck)} judged stuck ({len(judged.missed)} of them not stopped); "
        f"warnings on {judged.warned} of {judged.responses} responses ({warned})."
    )
    return "\n".join(lines)


def text(judged: Judged) -> str:
    """The figures per detector, then every stop nobody judged and every stuck session nothing stops."""
    lines = [
        f"{judged.sessions} sessions; {len(judged.total.stopped)} stopped; {len(judged.stuck)} judged stuck; "
        f"warnings on {judged.warned} of {judged.responses} responses ({_share(judged.warned, judged.responses)})",
        "",
        f"{'detector':<24}" + "".join(f"{h.split(' (')[0]:>18}" for h in HEADER),
    ]
    for row in [*judged.rows, judged.total]:
        lines.append(f"{row.detector:<24}" + "".join(f"{cell:>18}" for cell in _cells(row, judged)))
    for title, stops in (("false stops", judged.total.false), ("unjudged stops (read them)", judged.total.unjudged)):
        if stops:
            lines += ["", f"{title}:"]
            lines += [f"  {s.run}  {s.detector} at call {s.call} of {s.of_calls}" for s in stops]
    if judged.missed:
        lines += ["", "judged stuck, not stopped:"] + [f"  {run}" for run in judged.missed]
    return "\n".join(lines)


def run(report_path: Path, folder: Path, as_markdown: bool, before_path: Path | None) -> str:
    verdicts = load_verdicts(folder)
    judged = judge(orjson.loads(report_path.read_bytes()), verdicts)
    if not as_markdown:
        return text(judged)
    before = judge(orjson.loads(before_path.read_bytes()), verdicts) if before_path else None
    return markdown(judged, before)
