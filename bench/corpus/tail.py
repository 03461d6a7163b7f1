"""`python -m bench.corpus tail REPLAY.json`: how far a stuck session would have gone on after its stop.

The dashboard's cost avoided (`runguard.proxy.store.costs`) projects a stopped run's pace over the
requests it would most likely still have made. This measures that on the corpus: for every stop of a
session judged stuck, the recorded calls from the stopped one to the session's end (its own step limit
or its end, what the stop really avoided) against the calls it had reached. The ratio of the sums, per
detector, is `costs.TAILS` (for a detector with five or more such stops) and for all together `costs.TAIL`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.corpus.judge import Stop, Verdict, judge, load_verdicts


@dataclass(frozen=True, slots=True)
class Tail:
    """`stops` stuck sessions stopped at `reached` calls in all, with `avoided` calls of theirs left after."""

    detector: str
    stops: int
    reached: int
    avoided: int

    @property
    def ratio(self) -> float:
        return self.avoided / self.reached if self.reached else 0.0


def _tail(detector: str, stops: Iterable[Stop]) -> Tail:
    found = list(stops)
    reached = sum(s.call for s in found)
    avoided = sum(max(s.of_calls - s.call + 1, 0) for s in found)
    return Tail(detector, len(found), reached, avoided)


def tails(report: Mapping[str, Any], verdicts: Iterable[Verdict]) -> list[Tail]:
    """Per detector, then for all: the stuck sessions caught and the calls left after their stops."""
    judged = judge(report, verdicts)
    rows = [_tail(row.detector, row.caught) for row in judged.rows if row.caught]
    return [*rows, _tail("all", judged.total.caught)]


def text(found: list[Tail]) -> str:
    lines = [f"{'detector':<16}{'stuck stopped':>15}{'calls reached':>15}{'calls left':>12}{'ratio':>8}"]
    lines += [f"{t.detector:<16}{t.stops:>15}{t.reached:>15}{t.avoided:>12}{t.ratio:>8.2f}" for t in found]
    return "\n".join(lines)


def run(report_path: Path, folder: Path) -> str:
    return text(tails(orjson.loads(report_path.read_bytes()), load_verdicts(folder)))
