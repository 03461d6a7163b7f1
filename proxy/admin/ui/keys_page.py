"""Keys: each API key (by salted hash) seen in the last 7 UTC days, today's spend against its daily budget, and
its breakers.

Today's spend and the breakers come from the shared state, the figures the
`budget` and `retry_cascade` detectors act on (every replica adds to them);
the store's sum of today's requests stands in where the state has forgotten
the day. A key's daily budget is `budget.key_daily_usd` as configured for it
(key overrides included).
"""

from __future__ import annotations

import time

from aiohttp import web

from runguard.proxy.admin.ui.html import Html, esc, href, join, layout, link, short, table, tag, usd
from runguard.proxy.admin.ui.routes import UiContext, no_store, reader_of
from runguard.proxy.admin.ui.run_page import reset_control
from runguard.proxy.core.ops import Scope
from runguard.proxy.core.safe_text import reset_command
from runguard.proxy.guard import BreakerRecord, breaker, spend
from runguard.proxy.store import StoreReader

DAYS = 7
MAX_KEYS = 200


def _meter(spent: float, budget: float | None) -> Html:
    if budget is None:
        return Html(esc(f"{usd(spent)} (no daily budget)"))
    share = spent / budget if budget else 0.0
    meter = f'<meter min="0" max="1" low="0.7" high="0.9" optimum="0" value="{min(share, 1.0):.3f}"></meter>'
    return Html(f"{meter} {esc(f'{usd(spent)} of {usd(budget)} ({share:.0%})')}")


async def _day_spend(ctx: UiContext, key_hash: str, now: float) -> float | None:
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    value = (await ctx.state.read_scope(Scope.KEY_DAY, f"{key_hash}|{day}")).get("core.usd")
    return float(value) if isinstance(value, (int, float, str)) and value != "" else None


async def page(request: web.Request, ctx: UiContext) -> Html:
    reader = reader_of(request)
    if not isinstance(reader, StoreReader):
        return layout("Keys", "keys", no_store())
    now = reader.now()
    found = (await reader.spend.keys(DAYS, ctx.past))[:MAX_KEYS]
    stored_today = await reader.spend.today([key["key_hash"] for key in found])
    labels = ctx.settings.guard.key_labels
    rows = []
    for key in found:
        key_hash = key["key_hash"]
        spent = await _day_spend(ctx, key_hash, now)
        budget = getattr(ctx.policy.effective(key_hash, "").get("budget"), "key_daily_usd", None)
        record = BreakerRecord.loads((await ctx.state.read_scope(Scope.KEY, key_hash)).get(breaker.FIELD))
        open_models = []
        for model in key["models"]:
            scoped = await ctx.state.read_scope(Scope.KEY_MODEL, f"{key_hash}|{model}")
            model_record = BreakerRecord.loads(scoped.get(breaker.FIELD))
            if model_record is not None:
                open_models.append(f"{model}: {model_record.state.value} ({model_record.detector})")
        state = record.state.value if record is not None else "closed"
        reset = (
            reset_control(f"/runguard/keys/{key_hash}/reset", reset_command(key=key_hash, url=None), "Reset key")
            if record is not None
            else Html("")
        )
        rows.append(
            [
                link(href("runs", key=key_hash), short(key_hash)),
                labels.get(key_hash, ""),
                _meter(spent if spent is not None else stored_today.get(key_hash, 0.0), budget),
                Html(esc(state) + (esc(f" ({record.detector})") if record else "") + reset),
                join(open_models, "; ") or "all closed",
                spend(key["usd"], key["unpriced"]),
                key["requests"],
                join(key["models"], ", "),
            ]
        )
    headers = [
        "key",
        "label",
        "spend today against its daily budget",
        "key breaker",
        "key+model breakers",
        "spend, 7 days",
        "requests, 7 days",
        "models",
    ]
    note = tag("p", "Keys are shown by their salted hash; RunGuard never stores API keys.", class_="muted")
    return layout("Keys", "keys", Html(table(headers, rows, class_="keys") + note))
