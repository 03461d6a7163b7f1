"""The dashboard in a real browser (headless Chromium): a proxy that served real runaway and healthy traffic,
each page loaded and read, the runaway's breaker reset by its button, and its next request let through.

Selenium is blocking, so its calls run in a thread while the proxy keeps serving on the test's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import openai
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from runguard.proxy.serve.server import Running
from tests.e2e import payloads
from tests.support.browser import chromium, require_chromium
from tests.support.dashboard import HEALTHY, RUNAWAY, sdk, serve_traffic, start_dashboard_proxy
from tests.support.upstream import FakeUpstream, Reply

T = TypeVar("T")


async def _in_browser(step: Callable[[], T]) -> T:
    return await asyncio.to_thread(step)


def _text(driver: WebDriver, url: str) -> str:
    driver.get(url)
    return str(driver.find_element(By.TAG_NAME, "main").text)


def _read_pages(driver: WebDriver, base: str) -> dict[str, str]:
    return {page: _text(driver, f"{base}/runguard/ui/{page}") for page in ("", "runs", "trips", "keys", "detectors")}


def _open_runaway_from_the_list(driver: WebDriver, base: str) -> str:
    driver.get(f"{base}/runguard/ui/runs?status=tripped")
    driver.find_element(By.LINK_TEXT, RUNAWAY).click()
    WebDriverWait(driver, 10).until(expected_conditions.title_contains(RUNAWAY))
    return str(driver.find_element(By.TAG_NAME, "main").text)


def _click_reset(driver: WebDriver) -> str:
    button = WebDriverWait(driver, 10).until(
        expected_conditions.visibility_of_element_located((By.CSS_SELECTOR, "button[data-reset]"))
    )
    button.click()
    WebDriverWait(driver, 10).until(expected_conditions.staleness_of(button))  # the page reloads after the reset
    WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, ".breaker")))
    return str(driver.find_element(By.CSS_SELECTOR, ".breaker").text)


async def test_the_dashboard_in_a_browser_shows_the_runs_and_resets_a_stopped_one(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    require_chromium()
    store_url = f"sqlite+aiosqlite:///{tmp_path}/browser.db"
    running: Running = await start_dashboard_proxy(upstream, store_url)
    browser = chromium()
    try:
        await serve_traffic(running, upstream, store_url)
    except BaseException:
        await running.stop()
        raise
    driver = await _in_browser(browser.__enter__)
    try:
        pages = await _in_browser(lambda: _read_pages(driver, running.url))
        assert "Runs live now" in pages[""] and "non_progress" in pages[""]
        assert HEALTHY in pages["runs"] and RUNAWAY in pages["runs"]
        assert "tripped:non_progress" in pages["runs"] and "completed" in pages["runs"]
        assert "non_progress" in pages["trips"] and "stopped" in pages["trips"]
        assert "closed" in pages["keys"] and "no daily budget" in pages["keys"]
        assert "non_progress" in pages["detectors"] and "context_window" in pages["detectors"]
        run = await _in_browser(lambda: _open_runaway_from_the_list(driver, running.url))
        assert "tripped:non_progress" in run and "Breaker: open" in run
        assert "partial_parse_error" in run  # the repeated tool result, recorded
        client = sdk(running.url, RUNAWAY)
        upstream.script = lambda _: Reply.json(payloads.chat_completion("Fine now."))
        with pytest.raises(openai.RateLimitError, match="non_progress"):  # the open breaker answers locally
            await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "again"}])
        breaker = await _in_browser(lambda: _click_reset(driver))
        assert breaker == "Breaker: closed"
        answer = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "again"}]
        )
        await client.close()
        assert answer.choices[0].message.content == "Fine now."  # the next request passes
    finally:
        await asyncio.to_thread(browser.__exit__, None, None, None)
        await running.stop()
