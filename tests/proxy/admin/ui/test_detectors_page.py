"""The detectors page: every detector with its effective settings next to their defaults (configured ones
marked), its documentation, a link to its runs, what each override changes for its keys and models, and
a notice in shadow mode."""

from __future__ import annotations

import re

from runguard.detectors.registry import default_detectors
from tests.proxy.admin.ui.filled import dashboard, page
from tests.support.upstream import FakeUpstream


def _section(text: str, name: str) -> str:
    found = re.search(rf'<section class="detector"><h2 id="{name}">.*?</section>', text, re.S)
    assert found is not None, name
    return found.group(0)


async def test_every_detector_with_its_effective_settings_and_overrides(upstream: FakeUpstream) -> None:
    guard = {
        "detectors": {"max_requests": {"limit": 40}},
        "overrides": [
            {"model": "gpt-4o*", "detectors": {"max_requests": {"limit": 10}}},
            {"key": "batch-jobs", "detectors": {"spiral": {"action": "warn"}}},
        ],
    }
    async with dashboard(upstream.url, "", guard=guard) as running:
        text = await page(running, "detectors")
    for detector in default_detectors():
        assert f'<h2 id="{detector.name}">' in text and f'href="#{detector.name}"' in text
    capped = _section(text, "max_requests")
    assert re.search(r"<code>limit</code></td><td>40</td><td>\d+</td><td>configured</td>", capped)
    assert "<td>model gpt-4o*</td><td>limit = 10</td>" in capped
    assert 'href="/runguard/ui/runs?detector=max_requests"' in capped
    spiral = _section(text, "spiral")
    assert "<td>key batch-jobs</td><td>action = warn</td>" in spiral
    assert "<td>configured</td>" not in spiral  # defaults only
    assert "Shadow mode is on" not in text


async def test_shadow_mode_is_announced(upstream: FakeUpstream) -> None:
    async with dashboard(upstream.url, "", guard={"shadow": True}) as running:
        assert "Shadow mode is on: every detector only warns." in await page(running, "detectors")
