"""Spend and estimated cost avoided: the one definition every view reads.

Spend: a request costs its usage (input, cached input, output and reasoning
tokens) times the model's prices in the pricing table
(`runguard.proxy.guard.costs.pricing.ModelTables.cost`). That figure is computed once,
when the response ends, and recorded with the request; a run's spend, a key's
spend for the day and `runguard_usd_total` are sums of it, never recomputed.

Cost avoided (an estimate): when a detector blocks a run at its request N, the
run had spent S so far (the response that tripped it included). Left alone it
would most likely have gone on at the same pace for T times the requests it had
made, T fitted per detector on what the stuck sessions of the real-session corpus
it stopped really went on to make (`python -m bench.corpus tail`: the calls each
had left before its own step limit or its end, over the calls it had reached).
Of the 76 sessions judged stuck, `text_loop` stopped 68 at 1,671 calls in all,
with 1,811 left (1.08); `non_progress` 7 at 96, with 1,017 left (10.6: busy polls
that would have polled on for hundreds of calls); other detectors, with too few
stuck sessions of their own to fit, take all 76 together (1,797 reached, 2,829
left: 1.57). Never past its own limits: its step cap (`max_requests.limit` as
that run had it, a header's `X-RunGuard-Max-Requests` included; 500 by default)
or its budget (`budget.run_usd`, a header's `X-RunGuard-Budget-Usd` included),
whichever comes first, so the estimate is

    avoided = min(S / N * min(T * N, max(cap - N, 0)), max(budget - S, 0))

the run's average cost per request times the requests it would most likely
still have made (a run capped at 2 requests avoided nothing past its 2nd; a
`text_loop` stop at $0.50 a request at the 4th, about $2.20, and never more
than its budget still allowed).
A warning stops nothing, so it avoids nothing: its estimate is 0. The figure
is fixed when the trip is recorded; the CLI (`show`, `trips`, `runs`), the
admin API, the dashboard, alerts and the `runguard_usd_avoided_total` metric
all show that same stored value (the store's reader also counts a warning
recorded by an older version, which stored an estimate for it, as 0).
"""

from __future__ import annotations

BLOCK = "block"  # the trip action that stops the run, the only one that avoids any cost
# Requests a stuck run would still have made, per request it made (fitted on the corpus: see above).
TAILS = {"text_loop": 1.1, "non_progress": 10.6}
TAIL = 1.6  # any other detector's: all stuck sessions together
AVOIDED_BASIS = (
    "Cost avoided is an estimate: a stopped run's cost per request times the requests it would most likely still "
    "have made, as many more as the stuck sessions of real agents that the same detector stopped went on to make "
    f"({', '.join(f'{name} {tail:g}x' for name, tail in TAILS.items())}, others {TAIL:g}x the requests made), never "
    "past its own step cap or budget. A warning avoids nothing."
)


def avoided_estimate(
    action: str, spent: float, index: int, step_cap: int, budget: float | None = None, detector: str = ""
) -> float:
    """The estimated USD a trip of `detector` with `action` at request `index` avoided (see the module
    docstring); `budget`: the run's USD cap (None: it has none)."""
    if action != BLOCK:
        return 0.0
    made = max(index, 1)
    projected = spent / made * min(TAILS.get(detector, TAIL) * made, max(step_cap - index, 0))
    if budget is not None:
        projected = min(projected, max(budget - spent, 0.0))
    return round(projected, 6)


def counted_avoided(action: str, estimate: float) -> float:
    """The cost avoided a stored trip counts for: its estimate when it blocked, 0 for a warning."""
    return estimate if action == BLOCK else 0.0
