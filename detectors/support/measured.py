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


SESSIONS = 772
CALLS = 25_394
LONG = 23  # sessions over 100 calls
STUCK = 76  # sessions judged stuck (bench/corpus/verdicts), stopped or not
RESPONSES = 22_317
WARNED = 382
ROWS = (
    Measured("text_loop", 78, 0, 68, 10),
    Measured("non_progress", 9, 0, 7, 2),
    Measured("spiral", 2, 0, 1, 1),
    Measured("budget", 0, 0, 0, 0),
    Measured("max_tokens", 0, 0, 0, 0),
    Measured("parallel_calls", 0, 0, 0, 0),
)
WARNINGS = (("consecutive_same_tool", 210), ("tool_storm", 171), ("context_window", 13))


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%"


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
        f"1.x on SWE-bench, OpenHands, Claude Code on SWE-bench and in developers' own projects, tau-bench "
        f"airline), {LONG} of them over 100 calls "
        "([corpus.md](corpus.md)). Each stop was judged by reading the session (stuck, making progress or "
        "borderline; the verdicts are in `bench/corpus/verdicts/`). The false-stop rate is the share of all "
        f"sessions stopped while making progress; the catch rate, the share of the {STUCK} sessions judged "
        "stuck that the detector stopped. Reproduce: `python -m bench.corpus build`, "
        "`runguard-proxy replay bench/corpus/build --json > r.json`, `python -m bench.corpus judge r.json`.",
        "",
        "| detector | sessions stopped | false stops (making progress) | false-stop rate | stuck caught | "
        "catch rate | borderline |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ROWS:
        lines.append(
            f"| `{row.detector}` | {row.stopped} | {row.progress} | {_share(row.progress, SESSIONS)} | {row.stuck} | "
            f"{_share(row.stuck, STUCK)} | {row.other} |"
        )
    lines += [
        f"| all | {stopped} | {progress} | {_share(progress, SESSIONS)} | {caught} | {_share(caught, STUCK)} | "
        f"{stopped - progress - caught} |",
        "",
        f"Warnings: {WARNED} of {RESPONSES:,} responses ({_share(WARNED, RESPONSES)}): "
        + ", ".join(f"`{name}` {count}" for name, count in WARNINGS)
        + ". A warning marks a count reaching its threshold and each doubling of it, not every response after "
        "(`context_window`'s are one session working at 70-90% of its window). What real sessions reach "
        "beside each cap is in its settings.",
    ]
    return "\n".join(lines)
