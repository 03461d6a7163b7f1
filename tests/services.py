"""The live services some tests need: Redis and PostgreSQL on loopback.

A test that needs one asks for it through `require_redis()` / `require_postgres()`.
When the server does not answer, the test is skipped with the reason, except
under `RUNGUARD_REQUIRE_SERVICES=1` (set by `.ci/run`), where it fails: CI
always exercises the real servers. The same holds for the programs some tests
run (`require_binary`: `redis-server`, `promtool`), which `.ci/run` installs.
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import uuid
from typing import NoReturn

import pytest

REDIS_URL = os.environ.get("RUNGUARD_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get("RUNGUARD_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _require(name: str, host: str, port: int) -> None:
    if _reachable(host, port):
        return
    _missing(f"{name} is not reachable on {host}:{port}")


def _missing(reason: str) -> NoReturn:
    """Skip the test for `reason`, or fail it under RUNGUARD_REQUIRE_SERVICES=1 (CI runs every test)."""
    if os.environ.get("RUNGUARD_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}, and RUNGUARD_REQUIRE_SERVICES=1 requires it")
    pytest.skip(reason)


def require_binary(name: str, package: str) -> str:
    """The path of the program `name` (from the Debian package `package`), or skip (fail under
    RUNGUARD_REQUIRE_SERVICES=1: `.ci/run` installs it)."""
    found = shutil.which(name)
    if found is not None:
        return found
    _missing(f"{name} is not installed (apt-get install {package})")


def require_redis() -> str:
    """The Redis URL to use, or skip (fail under RUNGUARD_REQUIRE_SERVICES=1)."""
    _require("Redis", "127.0.0.1", 6379)
    return REDIS_URL


def require_postgres() -> str:
    """The PostgreSQL SQLAlchemy URL to use, or skip (fail under RUNGUARD_REQUIRE_SERVICES=1)."""
    _require("PostgreSQL", "127.0.0.1", 5432)
    return POSTGRES_URL


def unique_name(prefix: str) -> str:
    """A name no other test run uses (Redis key prefix, PostgreSQL schema)."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def require_kernel(module: str, package: str) -> None:
    """Skip unless the C extension `module` is built (fail under RUNGUARD_REQUIRE_SERVICES=1: `.ci/run`
    installs `package`, the header it is built with, before installing the project)."""
    try:
        importlib.import_module(module)
    except ImportError:
        _missing(f"{module} is not built (apt-get install {package}, then pip install -e . again)")
