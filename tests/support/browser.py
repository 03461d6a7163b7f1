"""Headless Chromium from the system's packages (Debian `chromium`, `chromium-driver`), driven by Selenium.

Selenium is pointed at the installed binary and driver; Selenium Manager is
never asked to download anything (SE_OFFLINE). A test that needs the browser
calls `require_chromium()`: it skips with the reason when the packages are
missing, except under RUNGUARD_REQUIRE_SERVICES=1 (set by `.ci/run`), where it
fails, as `tests/services.py` does for Redis and PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = os.environ.get("RUNGUARD_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("RUNGUARD_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def chromium_missing() -> str | None:
    """Why the browser cannot run here, or None when it can."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    return None


def require_chromium() -> None:
    reason = chromium_missing()
    if reason is None:
        return
    if os.environ.get("RUNGUARD_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}, and RUNGUARD_REQUIRE_SERVICES=1 requires it")
    pytest.skip(reason)


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[WebDriver]:
    """A headless Chromium WebDriver with a fresh profile, quit (and its profile removed) afterwards."""
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager fetch a browser or driver
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="rg-chromium-")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
