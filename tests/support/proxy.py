"""Starting the real proxy in-process on loopback, pointed at a fake upstream."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runguard.config.settings import Settings
from runguard.detectors.support.base import Detector
from runguard.proxy.serve.app import create_app
from runguard.proxy.serve.server import Running, start
from runguard.proxy.state.base import StateBackend
from runguard.proxy.store.records import Record

TEST_SALT = "test-salt"  # the key salt of every proxy made here (key hashes in tests use it)


class ListSink:
    """Keeps every record, for assertions."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def submit(self, record: Record) -> None:
        self.records.append(record)


def settings_for(upstream_url: str, **sections: dict[str, Any]) -> Settings:
    data: dict[str, Any] = {
        "upstreams": {"openai": upstream_url, "gemini": upstream_url, **sections.pop("upstreams", {})},
        "runs": {"key_salt": TEST_SALT, **sections.pop("runs", {})},
        # In-process proxies keep no database unless a test asks for one.
        "store": {"database_url": "", **sections.pop("store", {})},
        **sections,
    }
    return Settings.model_validate(data)


async def start_proxy(
    settings: Settings,
    *,
    sink: ListSink | None = None,
    state: StateBackend | None = None,
    detectors: Sequence[Detector[Any]] | None = None,
) -> Running:
    app = create_app(settings, sink=sink, state=state, detectors=detectors)
    return await start(app, "127.0.0.1", 0, grace=2.0)
