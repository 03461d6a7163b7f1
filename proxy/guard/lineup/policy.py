"""Which detectors run for a request, with which settings.

Settings are layered: the built-in defaults, then `guard.detectors`, then every
override whose key matches the request's key hash (or its label), then every
override whose model matches, then per-run request headers. Headers may only
tighten: a field accepts a header value only if its config declares a
`tighten` direction and the value is stricter; an action may go from off to
warn to nudge to block, never back. Resolved sets are cached per (key, model, headers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from runguard.config import GuardSettings, Override
from runguard.detectors.support import Action, Detector, DetectorConfig
from runguard.proxy.guard.lineup.engine import Armed, Lineup

LIMIT_HEADER = "X-RunGuard-Limit"
# Convenience headers for the budgets, each equal to one LIMIT_HEADER entry.
SHORT_HEADERS = {
    "X-RunGuard-Budget-Usd": "budget.run_usd",
    "X-RunGuard-Max-Requests": "max_requests.limit",
    "X-RunGuard-Max-Tokens": "max_tokens.limit",
    "X-RunGuard-Timeout": "timeout.seconds",
}
_ACTION_RANK = {Action.OFF: 0, Action.WARN: 1, Action.NUDGE: 2, Action.BLOCK: 3}

Tightening = tuple[tuple[str, str, str], ...]  # (detector, field, raw value)


def tightening_from(headers: Mapping[str, str]) -> Tightening:
    """Parse `X-RunGuard-Limit: budget.run_usd=0.5, spiral.threshold=0.6` and the short headers.

    Every entry is kept, malformed ones too (a missing field or value is an empty string), so that
    `Policy.header_errors` can name them; `Policy.lineup` applies only the ones that are valid.
    """
    entries: list[tuple[str, str, str]] = []
    raw = [f"{target}={headers[name]}" for name, target in SHORT_HEADERS.items() if name in headers]
    raw += [part for part in headers.get(LIMIT_HEADER, "").replace(";", ",").split(",") if part.strip()]
    for item in raw:
        target, _, value = item.partition("=")
        detector, _, field = target.strip().partition(".")
        entries.append((detector, field.strip(), value.strip()))
    return tuple(sorted(entries))


def _direction(config: type[DetectorConfig], field: str) -> str | None:
    """The way a header may move `field` ("lower", "higher"; "up" for an action), None if it may not."""
    if field == "action":
        return "up"
    info = config.model_fields.get(field)
    extra = info.json_schema_extra if info is not None and isinstance(info.json_schema_extra, dict) else {}
    direction = extra.get("tighten")
    return direction if direction in ("lower", "higher") else None


def _matches_model(pattern: str, model: str) -> bool:
    return model.startswith(pattern[:-1]) if pattern.endswith("*") else model == pattern


def _stricter(config: DetectorConfig, field: str, value: Any) -> bool:
    if field == "action":
        return _ACTION_RANK[Action(value)] > _ACTION_RANK[config.action]
    info = type(config).model_fields.get(field)
    extra = info.json_schema_extra if info is not None and isinstance(info.json_schema_extra, dict) else {}
    direction = extra.get("tighten")
    current = getattr(config, field)
    if direction not in ("lower", "higher") or value is None:
        return False
    if current is None:
        return True
    return bool(value < current) if direction == "lower" else bool(value > current)


class Policy:
    def __init__(self, detectors: Sequence[Detector[Any]], settings: GuardSettings, cache_size: int = 4096) -> None:
        self._detectors = list(detectors)
        self._settings = settings
        self._cache: dict[tuple[str, str, Tightening], Lineup] = {}
        self._cache_size = cache_size
        # Each detector's state field names, shared by all its lineups (see `Armed.state_name`).
        self._names: dict[str, dict[str, str]] = {d.name: {} for d in self._detectors}

    def _layers(self, key_hash: str, model: str) -> list[Mapping[str, Mapping[str, Any]]]:
        label = self._settings.key_labels.get(key_hash)
        by_key: list[Override] = []
        by_model: list[Override] = []
        for override in self._settings.overrides:
            if override.key is not None and override.key not in (key_hash, label):
                continue
            if override.model is not None and not _matches_model(override.model, model):
                continue
            (by_model if override.model is not None else by_key).append(override)
        return [self._settings.detectors, *(o.detectors for o in by_key), *(o.detectors for o in by_model)]

    def _resolve(
        self, detector: Detector[Any], layers: list[Mapping[str, Mapping[str, Any]]], tight: Tightening
    ) -> DetectorConfig:
        values: dict[str, Any] = {}
        for layer in layers:
            values.update(layer.get(detector.name, {}))
        config = detector.Config.model_validate(values)
        for name, field, raw in tight:
            if name != detector.name:
                continue
            try:
                candidate = detector.Config.model_validate({**config.model_dump(), field: raw})
            except ValidationError:
                continue  # a malformed header is ignored, never loosens anything
            if _stricter(config, field, getattr(candidate, field)):
                config = candidate
        return config

    def header_errors(self, tight: Tightening) -> list[str]:
        """What no detector can take from the per-run headers, each naming its field: a malformed
        entry, an unknown detector or field, a field headers cannot set, a value the field refuses."""
        detectors = {d.name: d for d in self._detectors}
        errors: list[str] = []
        for name, field, raw in tight:
            detector = detectors.get(name)
            if not name or not field or not raw:
                errors.append(f"{name or '?'}.{field or '?'}: expected detector.field=value")
            elif detector is None:
                errors.append(f"{name}: no such detector (runguard-proxy detectors lists them)")
            elif field not in detector.Config.model_fields:
                errors.append(f"{name}.{field}: no such field")
            elif _direction(detector.Config, field) is None:
                errors.append(f"{name}.{field}: cannot be set per run (only limits and thresholds can)")
            else:
                try:
                    detector.Config.model_validate({field: raw})
                except ValidationError as exc:
                    reason = exc.errors()[0]["msg"] if exc.errors() else "invalid"
                    errors.append(f"{name}.{field}={raw[:40]!r}: {reason}")
        return errors

    def ignored(self, key_hash: str, model: str, tight: Tightening) -> tuple[str, ...]:
        """The valid header entries that would loosen the configured policy (so are not applied)."""
        detectors = {d.name: d for d in self._detectors}
        layers = self._layers(key_hash, model)
        notes: list[str] = []
        for name, field, raw in tight:
            detector = detectors.get(name)
            if detector is None or not field or _direction(detector.Config, field) is None:
                continue
            config = self._resolve(detector, layers, ())
            try:
                value = detector.Config.model_validate({**config.model_dump(), field: raw})
            except ValidationError:
                continue
            if not _stricter(config, field, getattr(value, field)):
                current = getattr(config, field)
                shown = current.value if isinstance(current, Action) else current
                notes.append(f"{name}.{field}={raw} ignored: headers only tighten (configured: {shown})")
        return tuple(notes)

    def lineup(self, key_hash: str, model: str, tight: Tightening = ()) -> Lineup:
        """The detectors to run, with their effective settings (off ones left out)."""
        cache_key = (key_hash, model, tight)
        found = self._cache.get(cache_key)
        if found is None:
            layers = self._layers(key_hash, model)
            configs = ((d, self._resolve(d, layers, tight)) for d in self._detectors)
            found = Lineup.of(Armed(d, c, self._names[d.name]) for d, c in configs if c.action is not Action.OFF)
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[cache_key] = found
        return found

    @property
    def detectors(self) -> Sequence[Detector[Any]]:
        return tuple(self._detectors)

    def effective(self, key_hash: str, model: str) -> dict[str, DetectorConfig]:
        """Every detector's settings for a key and model, off ones included (for the dashboard)."""
        layers = self._layers(key_hash, model)
        return {d.name: self._resolve(d, layers, ()) for d in self._detectors}

    def config_of(self, detector: str, key_hash: str, model: str) -> DetectorConfig | None:
        return self.lineup(key_hash, model).configs.get(detector)
