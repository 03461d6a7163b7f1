"""What spans need from earlier requests of a run: the agent turn still open, and the tool calls made.

Both are kept in this process only, bounded (least recently used go first),
so their cost per request does not grow with a run's history. A run whose
requests land on several replicas gets a turn span per replica that served
it, and a tool call whose result reaches another replica than the call gets
an `execute_tool` span without its start (see `PendingCalls`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from opentelemetry.trace import Span, Status, StatusCode

from runguard.proxy.core.frozen import frozen

MAX_RUNS = 10_000  # runs with a turn open
MAX_CALLS = 50_000  # tool calls waiting for their results


class Turn:
    """One agent's stretch of consecutive requests in a run, as an `invoke_agent` span."""

    __slots__ = ("agent", "blocked", "last_end", "span")

    def __init__(self, agent: str, span: Span, last_end: int) -> None:
        self.agent = agent
        self.span = span
        self.last_end = last_end  # ns: the end of its latest request
        self.blocked = False

    def end(self) -> None:
        if self.blocked:
            self.span.set_status(Status(StatusCode.ERROR, "a request of this turn was blocked by RunGuard"))
        self.span.end(end_time=self.last_end)


class AgentTurns:
    """The open turn of each run: ended when another agent speaks, when its agent has been silent for `idle_ns`
    (`sweep`), when evicted, or at shutdown (`close`)."""

    def __init__(self, idle_ns: int, max_runs: int = MAX_RUNS) -> None:
        self._idle = idle_ns
        self._max = max_runs
        self._open: OrderedDict[str, Turn] = OrderedDict()

    def current(self, run_id: str, agent: str, start: Callable[[], Span], at: int) -> Turn:
        """The run's turn by `agent`, started with `start()` (at `at`) if the run's open turn is another
        agent's or there is none."""
        turn = self._open.get(run_id)
        if turn is not None and turn.agent == agent and at - turn.last_end <= self._idle:
            self._open.move_to_end(run_id)
            return turn
        if turn is not None:
            del self._open[run_id]
            turn.end()
        turn = Turn(agent, start(), at)
        self._open[run_id] = turn
        if len(self._open) > self._max:
            _, oldest = self._open.popitem(last=False)
            oldest.end()
        return turn

    def sweep(self, now: int) -> None:
        """End the turns whose agent has been silent for the idle time (least recently used come first)."""
        while self._open:
            run_id, turn = next(iter(self._open.items()))
            if now - turn.last_end <= self._idle:
                return
            del self._open[run_id]
            turn.end()

    def close(self) -> None:
        while self._open:
            _, turn = self._open.popitem(last=False)
            turn.end()


@frozen
class Call:
    """A tool call seen in a response: when that response ended, and who made it."""

    name: str
    arguments: str
    ended: int  # ns
    agent: str


class PendingCalls:
    """Tool calls waiting for their results, keyed by run and call id (Gemini, without ids: by tool name).

    A result whose call is not here (another replica saw it, or it was evicted)
    still gets its span, timed at the request that carried it.
    """

    def __init__(self, max_calls: int = MAX_CALLS) -> None:
        self._max = max_calls
        self._calls: OrderedDict[tuple[str, str], Call] = OrderedDict()

    def add(self, run_id: str, key: str, call: Call) -> None:
        self._calls[(run_id, key)] = call
        self._calls.move_to_end((run_id, key))
        if len(self._calls) > self._max:
            self._calls.popitem(last=False)

    def take(self, run_id: str, key: str) -> Call | None:
        return self._calls.pop((run_id, key), None)
