"""The trips page: the last day by detector, then every trip and warning newest first, in pages of 50,
filtered by detector with the filter kept across pages; stops and warnings told apart."""

from __future__ import annotations

import re
import time
from pathlib import Path

from runguard.proxy.store.records import Record
from tests.proxy.admin.ui.filled import dashboard, fill, page
from tests.proxy.store import factory
from tests.support.upstream import FakeUpstream


def _runs(text: str) -> list[str]:
    return re.findall(r'class="run-id">([^<]+)</a>', text)


async def test_trips_by_detector_then_every_trip_newest_first_in_pages(upstream: FakeUpstream, tmp_path: Path) -> None:
    now = time.time()
    records: list[Record] = [factory.trip(f"spiral-{n:02d}", detector="spiral", at=now - 1000 + n) for n in range(55)]
    records += [
        factory.trip("looping", detector="text_loop", action="warn", at=now - 10, reason="same text 3 times"),
        factory.trip("old", detector="spiral", at=now - 3 * 86400),
    ]
    url = f"sqlite+aiosqlite:///{tmp_path}/ui.db"
    await fill(url, records)
    async with dashboard(upstream.url, url) as running:
        first = await page(running, "trips")
        second = await page(running, "trips", page="2")
        warnings = await page(running, "trips", detector="text_loop")
    summary = first.split("All trips and warnings", 1)[0]
    spiral = re.search(r'detector=spiral">spiral</a></td><td class="num">(\d+)</td><td class="num">(\d+)</td>', summary)
    assert spiral is not None and spiral.groups() == ("55", "0")  # the last 24 hours only
    assert 'detector=text_loop">text_loop</a></td><td class="num">0</td><td class="num">1</td>' in summary
    listed = _runs(first)
    assert len(listed) == 50 and listed[0] == "looping" and listed[1] == "spiral-54"
    assert 'href="/runguard/ui/trips?page=2" rel="next"' in first
    assert _runs(second) == [*(f"spiral-{n:02d}" for n in range(5, -1, -1)), "old"]
    assert 'rel="next"' not in second
    assert _runs(warnings) == ["looping"]
    assert "<td>warned</td>" in warnings and "same text 3 times" in warnings and "<td>stopped</td>" not in warnings
    assert '<option value="text_loop" selected>' in warnings


async def test_without_a_store_the_page_says_so(upstream: FakeUpstream) -> None:
    async with dashboard(upstream.url, "") as running:
        assert "No record store is configured" in await page(running, "trips")
