"""The overview: today's and the week's spend, runs live now, the last day's trips, warnings and cost
avoided, spend charts by key (by its label) and by model with the smaller ones summed as "other"."""

from __future__ import annotations

import re
import time
from pathlib import Path

from runguard.proxy.store.records import Record
from tests.proxy.admin.ui.filled import dashboard, fill, page
from tests.proxy.store import factory
from tests.support.upstream import FakeUpstream


def _card(text: str, label: str) -> str:
    found = re.search(rf'<div class="label">{re.escape(label)}</div><div class="value">(.*?)</div>', text)
    assert found is not None, label
    return re.sub(r"<[^>]+>", "", found.group(1))


async def test_the_cards_add_up_the_store_s_figures(upstream: FakeUpstream, tmp_path: Path) -> None:
    now = time.time()
    records: list[Record] = [
        factory.request("ov-live", 1, at=now - 10, key_hash="k_a", usd=0.25),  # left a tool call open: live
        factory.request("ov-done", 1, at=now - 20, key_hash="k_b", usd=0.5, tool_calls=(), finish_reason="stop"),
        factory.request("ov-old", 1, at=now - 3 * 86400, key_hash="k_a", usd=2.0, tool_calls=(), finish_reason="stop"),
        factory.trip("ov-done", at=now - 15, usd_avoided_estimate=1.25),
        factory.trip("ov-done", detector="text_loop", action="warn", at=now - 14),
        factory.trip("ov-old", at=now - 3 * 86400, usd_avoided_estimate=4.0),
    ]
    url = f"sqlite+aiosqlite:///{tmp_path}/ui.db"
    await fill(url, records)
    async with dashboard(upstream.url, url, guard={"key_labels": {"k_a": "team-alpha"}}) as running:
        text = await page(running, "")
    assert _card(text, "Spend today (UTC)") == "$0.7500"
    assert _card(text, "Spend, last 7 days") == "$2.7500"
    assert _card(text, "Runs live now") == "1"
    assert (_card(text, "Trips, last 24 h"), _card(text, "Warnings, last 24 h")) == ("1", "1")
    assert _card(text, "Cost avoided, last 24 h (est.)") == "$1.2500"
    assert _card(text, "Cost avoided, last 7 days (est.)") == "$5.2500"
    assert "text_loop 1.1x" in text and "never past its own step cap or budget" in text  # its basis
    live = text.split("<h2>Runs live now</h2>", 1)[1]
    assert "ov-live" in live and "ov-done" not in live and "ov-old" not in live
    assert "team-alpha" in text and ">k_b<" in text  # the key's label names its series; a key without one its hash


async def test_past_the_top_five_the_smaller_keys_are_summed_as_other(upstream: FakeUpstream, tmp_path: Path) -> None:
    now = time.time()
    records: list[Record] = [
        factory.request(f"run-{n}", 1, at=now - 60, key_hash=f"k_{n}", usd=float(10 - n)) for n in range(7)
    ]
    url = f"sqlite+aiosqlite:///{tmp_path}/ui.db"
    await fill(url, records)
    async with dashboard(upstream.url, url) as running:
        text = await page(running, "")
    by_key = text.split("Spend per day by key (USD)", 1)[1].split("</table>", 1)[0]
    shown = re.findall(r"<tr><td>([^<]+)</td>", by_key)
    assert shown == ["k_0", "k_1", "k_2", "k_3", "k_4", "other"]
    other = by_key.split("<td>other</td>", 1)[1].split("</tr>", 1)[0]
    assert other.endswith("<td>$9.0000</td><td>$9.0000</td>")  # keys 5 and 6 ($5 + $4) today, and in all
