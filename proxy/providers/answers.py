"""What the proxy answers instead of the upstream: a whole synthetic response, and why it answers.

Every provider API writes its own answers (errors its SDK does not retry, completions that end the turn)
from a `StopNotice`; the core hands them on as `Synthetic` responses.
"""

from __future__ import annotations

from collections.abc import Mapping

from runguard.proxy.core.frozen import frozen
from runguard.proxy.core.safe_text import printable


@frozen
class Synthetic:
    """A complete HTTP response the proxy writes instead of going upstream."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@frozen
class StopNotice:
    """Why the proxy answers locally: what every synthetic message must name."""

    detector: str
    run_id: str
    reason: str  # names the figure that tripped it, e.g. "tool 'search' returned the same result 3 times"
    reset_hint: str = ""  # how an operator resets, e.g. "Reset with: runguard-proxy reset RUN_ID" (words quoted)

    @property
    def summary(self) -> str:
        """What happened, for the model's eyes in a stop completion: no operator instructions, and printable
        (the run id and the reason may quote client text: a model name, a tool's)."""
        return printable(f"RunGuard stopped run {self.run_id}: {self.detector}: {self.reason}.")

    @property
    def message(self) -> str:
        """The summary and how to reset, for the people who read an error response."""
        return f"{self.summary} {self.reset_hint}".strip()
