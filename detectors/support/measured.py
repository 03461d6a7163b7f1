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
    before: tuple[int, int]  # (stopped, of which progress) with the previous defaults


SESSIONS = 617
CALLS = 17_132
STUCK = 38  # sessions judged stuck among all the corpus sessions any detector stopped
RESPONSES = 15_866
WARNED = 244
WARNED_BEFORE = (1_000, 15_352)
ROWS = (
    Measured("text_loop", 64, 25, 35, 4, (62, 23)),
    Measured("non_progress", 3, 0, 2, 1, (4, 1)),
    Measured("spiral", 3, 1, 1, 1, (3, 1)),
    Measured("context_growth", 1, 1, 0, 0, (1, 1)),
    Measured("fan_out", 1, 1, 0, 0, (1, 1)),
    Measured("max_tokens", 0, 0, 0, 0, (19, 19)),
    Measured("max_requests", 0, 0, 0, 0, (2, 2)),
    Measured("timeout", 0, 0, 0, 0, (1, 1)),
)
WARNINGS = (("consecutive_same_tool", 229, 715), ("tool_storm", 47, 625))


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
        "families (mini-swe-agent and Live-SWE-agent on SWE-bench, SWE-agent on Java issues, OpenHands, "
        "Claude Code, tau-bench airline), 8 of them over 100 calls. Each stop was judged by reading the "
        "session. The false-stop rate is the share of all sessions stopped while making progress; the catch "
        f"rate, the share of the {STUCK} stuck sessions the detector stopped. Reproduce: "
        "`python -m bench.corpus build`, then "
        "`runguard-proxy replay bench/corpus/build --json`.",
        "",
        "| detector | sessions stopped | false stops (making progress) | false-stop rate | stuck caught | "
        "catch rate | other | before: stopped (false) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ROWS:
        lines.append(
            f"| `{row.detector}` | {row.stopped} | {row.progress} | {_share(row.progress, SESSIONS)} | {row.stuck} | "
            f"{_share(row.stuck, STUCK)} | {row.other} | {row.before[0]} ({row.before[1]}) |"
        )
    before = sum(row.before[0] for row in ROWS), sum(row.before[1] for row in ROWS)
    lines += [
        f"| all | {stopped} | {progress} | {_share(progress, SESSIONS)} | {caught} | {_share(caught, STUCK)} | "
        f"{stopped - progress - caught} | {before[0]} ({before[1]}) |",
        "",
        f"Warnings: {WARNED} of {RESPONSES:,} responses ({_share(WARNED, RESPONSES)}; before, "
        f"{_share(*WARNED_BEFORE)}): "
        + ", ".join(f"`{name}` {now} (before {then})" for name, now, then in WARNINGS)
        + ". What is left of `text_loop`'s false stops is code reading by text-protocol agents whose every "
        "observation ends with the same footer and whose file windows overlap; `context_growth`'s one is an "
        "agent reading a file 440 lines a step; `fan_out`'s, Claude Code editing one function after another "
        "with its to-do list beside each edit. What real sessions reach beside each cap is in its settings.",
    ]
    return "\n".join(lines)
