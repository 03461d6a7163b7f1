"""What the detectors do on real agent sessions: the section of `docs/detectors.md` with the corpus figures.

The figures come from replaying the repository's corpus of recorded sessions (`bench/corpus`, built with
`python -m bench.corpus build`) through the proxy at the default configuration, with `runguard-proxy
replay bench/corpus/build --json`, and from reading every stopped session around its stop: *stuck* (the
agent repeats the same action or failure), *progress* (each call does something new and gets a new
answer), *borderline* (varied but fruitless) or *recovered* (a real repeat the agent then left on its own).
They are data, kept here beside the code so the generated page stays one file a test compares with it;
re-measure and update them when a detector or a default changes.
"""

from __future__ import annotations

from runguard.proxy.core.frozen import frozen


@frozen
class Measured:
    """One detector on the corpus: sessions it stopped, judged (`progress`: false stops, `stuck`: catches)."""

    detector: str
    stopped: int
    progress: int
    stuck: int
    other: int  # borderline, or a real repeat the agent recovered from
    before: tuple[int, int, int]  # (stopped, of which progress, of which nobody read) at the round's start


SESSIONS = 690
CALLS = 21_334
LONG = 11  # sessions over 100 calls
STUCK = 70  # sessions judged stuck (bench/corpus/verdicts), stopped or not
RESPONSES = 19_249
WARNED = 410
WARNED_BEFORE = (1_714, 18_008)
ROWS = (
    Measured("text_loop", 78, 1, 67, 10, (84, 12, 0)),
    Measured("non_progress", 3, 0, 2, 1, (5, 1, 1)),
    Measured("spiral", 2, 0, 1, 1, (4, 1, 1)),
    Measured("novelty", 0, 0, 0, 0, (4, 4, 0)),
    Measured("context_growth", 0, 0, 0, 0, (1, 1, 0)),
    Measured("fan_out", 0, 0, 0, 0, (1, 1, 0)),
    Measured("max_tokens", 0, 0, 0, 0, (36, 0, 36)),
    Measured("max_requests", 0, 0, 0, 0, (2, 0, 2)),
    Measured("budget", 0, 0, 0, 0, (1, 0, 0)),
    Measured("timeout", 0, 0, 0, 0, (1, 0, 1)),
)
WARNINGS = (("consecutive_same_tool", 274, 1_077), ("tool_storm", 185, 1_248))


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%"


def _before(figures: tuple[int, int, int]) -> str:
    stopped, progress, unread = figures
    return f"{stopped} ({progress}; {unread} unread)" if unread else f"{stopped} ({progress})"


def render() -> str:
    """The "On real sessions" section."""
    stopped = sum(row.stopped for row in ROWS)
    progress = sum(row.progress for row in ROWS)
    caught = sum(row.stuck for row in ROWS)
    lines = [
        "## On real sessions",
        "",
        f"Replayed at the defaults: {SESSIONS} recorded sessions ({CALLS:,} model calls) of six agent "
        "families (mini-swe-agent and Live-SWE-agent on SWE-bench, SWE-agent on Java issues and SWE-agent "
        f"1.x on SWE-bench, OpenHands, Claude Code, tau-bench airline), {LONG} of them over 100 calls "
        "([corpus.md](corpus.md)). Each stop was judged by reading the session (stuck, making progress or "
        "borderline; the verdicts are in `bench/corpus/verdicts/`). The false-stop rate is the share of all "
        f"sessions stopped while making progress; the catch rate, the share of the {STUCK} sessions judged "
        "stuck that the detector stopped. Before: the defaults of the release before, over the same "
        "sessions (unread: stops nobody judged). Reproduce: `python -m bench.corpus build`, "
        "`runguard-proxy replay bench/corpus/build --json > r.json`, `python -m bench.corpus judge r.json`.",
        "",
        "| detector | sessions stopped | false stops (making progress) | false-stop rate | stuck caught | "
        "catch rate | borderline | before: stopped (false) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ROWS:
        lines.append(
            f"| `{row.detector}` | {row.stopped} | {row.progress} | {_share(row.progress, SESSIONS)} | {row.stuck} | "
            f"{_share(row.stuck, STUCK)} | {row.other} | {_before(row.before)} |"
        )
    before = tuple(sum(row.before[i] for row in ROWS) for i in range(3))
    lines += [
        f"| all | {stopped} | {progress} | {_share(progress, SESSIONS)} | {caught} | {_share(caught, STUCK)} | "
        f"{stopped - progress - caught} | {_before((before[0], before[1], before[2]))} |",
        "",
        f"Warnings: {WARNED} of {RESPONSES:,} responses ({_share(WARNED, RESPONSES)}; before, "
        f"{_share(*WARNED_BEFORE)}): "
        + ", ".join(f"`{name}` {now} (before {then})" for name, now, then in WARNINGS)
        + ". The one false stop left is `text_loop`'s: a text-protocol agent that re-views a file it has "
        "already shown whole and then writes a new search it has not yet seen the answer of. What real sessions reach "
        "beside each cap is in its settings.",
    ]
    return "\n".join(lines)
