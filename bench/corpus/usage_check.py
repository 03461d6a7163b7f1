"""How far `usage.reconstruct` is from recorded usage: each session of a source whose answers carry their
usage is read twice, as recorded and with its usage dropped and rebuilt, and the tokens `max_tokens`
counts (input and output, cache reads weighed at `WEIGHT`) are compared, with the cache-read share.

`python -m bench.corpus usage [--source ID ...]` prints one line per session and the error's median and
worst (bench/corpus/README.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.corpus import usage
from bench.corpus.build import read_source
from bench.corpus.session import Session, Turn

WEIGHT = 0.1  # max_tokens' default cached_weight
SOURCES = ("claude-code-swe-contextbench",)


@dataclass(frozen=True, slots=True)
class Counted:
    tokens: int  # input (cache reads and writes included) plus output
    read: int  # cache-read input tokens
    out: int  # output tokens

    @property
    def weighed(self) -> float:
        return self.tokens - self.read + self.read * WEIGHT

    @property
    def share(self) -> float:
        """The cache reads' share of the input."""
        inputs = self.tokens - self.out
        return self.read / inputs if inputs else 0.0


def counted(turns: Iterable[Turn]) -> Counted:
    tokens = read = out = 0
    for turn in turns:
        used = turn.usage or {}
        reads = int(used.get("cache_read_input_tokens") or 0)
        inputs = int(used.get("input_tokens") or 0) + int(used.get("cache_creation_input_tokens") or 0) + reads
        output = int(used.get("output_tokens") or 0)
        tokens, read, out = tokens + inputs + output, read + reads, out + output
    return Counted(tokens, read, out)


def compare(session: Session) -> tuple[Counted, Counted]:
    """The session's recorded count and its count with the usage dropped and rebuilt."""
    recorded = counted(session.turns)
    for turn in session.turns:
        turn.usage = None
    usage.reconstruct(session)
    return recorded, counted(session.turns)


def _summary(name: str, errors: list[float], shares: list[float]) -> str:
    worst = max(errors, key=abs)
    return (
        f"{name}: {len(errors)} sessions, weighed tokens rebuilt vs recorded: median {statistics.median(errors):+.0%}, "
        f"median |error| {statistics.median(abs(e) for e in errors):.0%}, worst {worst:+.0%}; cache-read share "
        f"median {statistics.median(shares):+.1%} points, worst {max(shares, key=abs):+.1%}"
    )


def run(sources: list[dict[str, object]], mirrors: Path) -> str:
    lines, totals = [], []
    for source in sources:
        errors, shares = [], []
        for session in read_source(source, mirrors):
            if not session.turns or any(turn.usage is None for turn in session.turns):
                continue
            recorded, rebuilt = compare(session)
            errors.append(rebuilt.weighed / recorded.weighed - 1)
            shares.append(rebuilt.share - recorded.share)
            lines.append(
                f"{session.id}: {len(session.turns)} calls, weighed {recorded.weighed:,.0f} recorded, "
                f"{rebuilt.weighed:,.0f} rebuilt ({errors[-1]:+.0%}); cache reads {recorded.share:.0%} / "
                f"{rebuilt.share:.0%}"
            )
        if errors:
            totals.append(_summary(str(source["id"]), errors, shares))
    return "\n".join(lines + totals) if totals else "no session with recorded usage"
