"""Whether a key may spend on a request RunGuard forwards without reading it.

Requests the adapters do not model (legacy completions, embeddings, images,
audio, batches, Gemini `batchGenerateContent`, Anthropic message batches) are
forwarded and only counted. A stopped key must not spend on them either: before
such a request goes upstream, one state batch reads the key's breaker and its
spend of the day. While the key's breaker is open (its daily budget spent, or
any other key-wide stop), or its spend has reached the daily budget the policy
gives it (`budget.key_daily_usd`, when `budget` blocks), the request is
refused in the provider's format, as a guarded one would be.

Requests that cost nothing are not checked, so a stopped key can still list
models or fetch a batch's results: every GET, HEAD, OPTIONS and DELETE, and the
free POSTs (token counts, cancels, moderations, file uploads). No run entry is
made either way: the batch touches the key's scopes only.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from runguard.config import BreakerSettings
from runguard.detectors.support import Action
from runguard.proxy.core.ops import Get, Scope
from runguard.proxy.core.safe_text import reset_command
from runguard.proxy.guard import breaker
from runguard.proxy.guard.batches import Batches
from runguard.proxy.guard.breaker import BreakerRecord, GateKind
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.guard.ticket import scope_ids

_FREE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
# POSTs no provider charges for: counting tokens (Gemini's and Vertex AI's `:countTokens` and `:computeTokens`,
# Anthropic's `count_tokens`, Claude on Vertex's `count-tokens:rawPredict`), cancelling, moderation, uploading
# files (their use is paid).
_FREE_POST = re.compile(
    r"(:countTokens|:computeTokens|/count_tokens|/count-tokens:rawPredict|/cancel|/moderations|/files"
    r"|/uploads(/[^/]+(/parts|/complete))?)$"
)


def costs_money(method: str, path: str) -> bool:
    """Whether a forwarded request (`path` as sent upstream) may cost its key money."""
    return method not in _FREE_METHODS and _FREE_POST.search(path.rstrip("/")) is None


class KeySpending:
    """Refuses what a stopped key would spend on requests RunGuard forwards unread (see the module docstring)."""

    def __init__(
        self,
        batches: Batches,
        policy: Policy,
        cfg: BreakerSettings,
        clock: Callable[[], float],
        proxy_url: str | None,
    ) -> None:
        self._batches = batches
        self._policy = policy
        self._probe_timeout = cfg.probe_timeout_seconds
        self._clock = clock
        self._proxy_url = proxy_url

    async def refusal(self, key_hash: str, model: str) -> tuple[str, str] | None:
        """(detector, reason with how to reset) when the key may not spend now; None to forward."""
        now = self._clock()
        ids = scope_ids("", key_hash, model, now)
        got = await self._batches.execute(ids, [Get(Scope.KEY, breaker.FIELD), Get(Scope.KEY_DAY, "core.usd")])
        if got is None:
            return None  # the state failed: as for a guarded request that cannot be judged (fail open)
        hint = f"Reset with: {reset_command(key=key_hash, url=self._proxy_url)}"
        record = BreakerRecord.loads(got[0])
        if breaker.gate(record, now, self._probe_timeout).kind is GateKind.DENY and record is not None:
            return record.detector, f"{record.reason}. {hint}"
        cfg = self._policy.config_of("budget", key_hash, model)
        cap = getattr(cfg, "key_daily_usd", None)
        spent = got[1] if isinstance(got[1], float) else 0.0
        if cfg is not None and cfg.action is Action.BLOCK and isinstance(cap, float) and spent >= cap:
            return "budget", f"API key spent ${spent:.4f} today, reaching its ${cap:.2f} daily budget. {hint}"
        return None
