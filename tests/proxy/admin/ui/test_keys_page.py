"""The keys page: each key of the last 7 days by its hash and label, today's spend from the shared state
(the store's sum when the state forgot the day) against its daily budget (key overrides included), its
breakers with the command that resets them; never an API key."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

from runguard.proxy.core.ops import Add, Put, Scope
from runguard.proxy.guard import breaker
from runguard.proxy.guard.breaker import BreakerRecord, BreakerState
from runguard.proxy.state.base import ScopeIds
from runguard.proxy.state.memory import MemoryState
from runguard.proxy.store.records import Record
from tests.proxy.admin.ui.filled import dashboard, fill, page
from tests.proxy.store import factory
from tests.support.upstream import FakeUpstream

A, B, OLD = "k_aaaaaaaaaaaaaaaa", "k_bbbbbbbbbbbbbbbb", "k_0000000000000000"


def _row(text: str, key_hash: str) -> str:
    found = re.search(rf"<tr><td><a [^>]*key={key_hash}[^>]*>.*?</tr>", text)
    assert found is not None, key_hash
    return html.unescape(re.sub(r"<[^>]+>", " ", found.group(0)))


async def test_spend_budget_and_breakers_of_each_key(upstream: FakeUpstream, tmp_path: Path) -> None:
    now = time.time()
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    records: list[Record] = [
        factory.request("a-1", 1, at=now - 30, key_hash=A, usd=1.0, model="gpt-4o"),
        factory.request("b-1", 1, at=now - 20, key_hash=B, usd=2.5, model="gpt-4o"),
        factory.request("b-2", 1, at=now - 2 * 86400, key_hash=B, usd=1.0, model="gpt-4o-mini"),
        factory.request("old-1", 1, at=now - 9 * 86400, key_hash=OLD, usd=9.0),
    ]
    url = f"sqlite+aiosqlite:///{tmp_path}/ui.db"
    await fill(url, records)
    state = MemoryState()
    ids = ScopeIds(run="-", key=A, key_model=f"{B}|gpt-4o", key_day=f"{A}|{day}")
    opened = BreakerRecord(BreakerState.OPEN, now, 60.0, 1, "spend_rate", "fast", latched=False)
    throttled = BreakerRecord(BreakerState.OPEN, now, 60.0, 1, "retry_cascade", "429s")
    await state.execute(
        ids,
        [
            Add(Scope.KEY_DAY, "core.usd", 4.0),  # what every replica added today (more than this store saw)
            Put(Scope.KEY, breaker.FIELD, opened.dumps()),
            Put(Scope.KEY_MODEL, breaker.FIELD, throttled.dumps()),
        ],
    )
    guard = {
        "key_labels": {A: "team-alpha"},
        "detectors": {"budget": {"key_daily_usd": 10}},
        "overrides": [{"key": B, "detectors": {"budget": {"key_daily_usd": 5}}}],
    }
    async with dashboard(upstream.url, url, state, guard=guard) as running:
        text = await page(running, "keys")
    a, b = _row(text, A), _row(text, B)
    assert "team-alpha" in a and "$4.0000 of $10.0000 (40%)" in a
    assert "open (spend_rate)" in a and f"runguard-proxy reset --key {A}" in a
    assert "$2.5000 of $5.0000 (50%)" in b  # the state holds nothing of B's day: the store's sum of today
    assert "closed" in b and "gpt-4o: open (retry_cascade)" in b
    assert "$3.5000  2 " in b and "gpt-4o-mini" in b  # spend, requests and models of 7 days
    assert OLD not in text  # nothing in the last 7 days
    assert "never stores API keys" in text


async def test_a_key_without_a_budget_says_so(upstream: FakeUpstream, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/ui.db"
    await fill(url, [factory.request("a-1", 1, at=time.time() - 5, key_hash=A, usd=0.125)])
    async with dashboard(upstream.url, url) as running:
        row = _row(await page(running, "keys"), A)
    assert "$0.1250 (no daily budget)" in row and "all closed" in row
