"""Where state and records live: the settings of the state backend (memory, Redis, Sentinel) and of the
record store (SQLite, PostgreSQL)."""

from __future__ import annotations

from pydantic import Field, field_validator

from runguard.config.section import Section as _Section


class StateSettings(_Section):
    url: str | None = Field(None, description="redis://... to share run and breaker state; unset keeps it in memory.")
    key_prefix: str = Field(
        "rg",
        min_length=1,
        pattern=r"^[^{}\s]+$",
        description="Prefix of every key RunGuard writes to Redis (no braces: keys carry their own hash tag).",
    )
    fail_closed: bool = Field(
        False, description="When the state backend fails: false forwards anyway (fail open), true answers an error."
    )
    timeout: float = Field(0.5, gt=0, description="Seconds one state round trip may take before it counts as failed.")
    max_connections: int = Field(
        64,
        ge=1,
        description="Redis connections one proxy process opens at most; more concurrent batches wait for one "
        "(up to `timeout`) instead of opening a connection each.",
    )
    sentinels: tuple[str, ...] = Field(
        (),
        description="host:port of each Redis Sentinel; set, the state lives on the primary they name for "
        "`sentinel_service` and follows it through a failover (`url`, if set, gives only the password and db).",
    )
    sentinel_service: str = Field("mymaster", min_length=1, description="The Sentinel service name of the primary.")
    generation_seconds: float = Field(
        1.0,
        gt=0,
        description="Seconds between two checks that Redis still holds what it was given (restarted empty, "
        "failed over): when it does not, the state is rebuilt from the records.",
    )

    @field_validator("sentinels")
    @classmethod
    def _host_ports(cls, sentinels: tuple[str, ...]) -> tuple[str, ...]:
        for address in sentinels:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"expected host:port, got {address!r}")
        return sentinels

    @property
    def shared(self) -> bool:
        """The state is in Redis (a URL or Sentinels), shared by every process that names it."""
        return bool(self.url or self.sentinels)

    @field_validator("url")
    @classmethod
    def _redis_url(cls, url: str | None) -> str | None:
        if url and url.split("://", 1)[0] not in {"redis", "rediss", "unix"}:
            raise ValueError("expected redis://, rediss:// or unix:// (or leave it unset for in-memory state)")
        return url or None


class StoreSettings(_Section):
    database_url: str = Field(
        "sqlite+aiosqlite:///runguard.db", description="SQLAlchemy URL of the record store (SQLite or PostgreSQL)."
    )
    record_bodies: bool = Field(
        False, description="Store request and response bodies (keys removed) for `runguard-proxy replay`."
    )
    queue_size: int = Field(50_000, gt=0, description="Records waiting for the database before new ones are dropped.")
    batch_size: int = Field(500, gt=0, description="Records written per database transaction.")
    flush_interval: float = Field(0.25, gt=0, description="Seconds between batch writes.")

    @field_validator("database_url")
    @classmethod
    def _known_engine(cls, url: str) -> str:
        if url and not url.startswith(("sqlite", "postgresql")):
            raise ValueError("expected sqlite+aiosqlite:///PATH or postgresql+asyncpg://... (empty keeps no records)")
        return url
