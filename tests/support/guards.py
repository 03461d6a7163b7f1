"""A real `Guard` (and the `ProxyContext` around it) without a server: for tests that drive the guard the way
the handlers and socket relays do, with the default detectors, a state and a list of records."""

from __future__ import annotations

from typing import Any

from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.costs.pricing import ModelTables
from runguard.proxy.guard.guard import Guard
from runguard.proxy.guard.lineup.policy import Policy
from runguard.proxy.guard.observer import NullObserver
from runguard.proxy.relay.context import ProxyContext
from runguard.proxy.relay.upstream import Upstreams
from runguard.proxy.runs.keys import KeyHasher
from runguard.proxy.state.base import StateBackend
from runguard.proxy.state.memory import MemoryState
from tests.support.proxy import ListSink, settings_for

NOWHERE = "http://127.0.0.1:9"  # no upstream is called: these tests feed the guard what came back


def guard_settings(**sections: dict[str, Any]) -> Settings:
    return settings_for(NOWHERE, **sections)


def make_guard(settings: Settings, state: StateBackend | None = None, sink: ListSink | None = None) -> Guard:
    policy = Policy(default_detectors(), settings.guard)
    tables = ModelTables(settings.pricing_file, settings.models_file)
    backend = state if state is not None else MemoryState()
    return Guard(settings, backend, policy, tables, sink if sink is not None else ListSink(), NullObserver())


def make_context(settings: Settings, guard: Guard) -> ProxyContext:
    """The context a handler gets, around `guard` (its upstreams are never called)."""
    return ProxyContext(settings, guard, Upstreams(settings.upstreams), KeyHasher(b"test-salt"), NullObserver(), set())
