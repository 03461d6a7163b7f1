"""The live part of the records as plain values: a day starts with nothing in it, and importing them needs no
SQLAlchemy (a proxy without a store rebuilds nothing and never loads it)."""

from __future__ import annotations

import subprocess
import sys

from runguard.proxy.core.errors import RunGuardError
from runguard.proxy.store.live_facts import Live, LiveTrip, RecordsUnavailable


def test_a_day_starts_empty_and_an_outage_is_the_proxy_s_own_error() -> None:
    live = Live("2026-12-06")
    assert (live.key_day_usd, live.runs, live.trips, live.resets) == ({}, [], [], 0)
    trip = LiveTrip("run", "run-1", "run-1", "kh", "spiral", "same question", 3, 1.0)
    assert trip.count == 1
    assert issubclass(RecordsUnavailable, RunGuardError)


def test_the_records_and_the_live_facts_load_without_sqlalchemy() -> None:
    probe = (
        "import sys\n"
        "import runguard.proxy.store.live_facts, runguard.proxy.store.records, runguard.proxy.store\n"
        "print('sqlalchemy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
