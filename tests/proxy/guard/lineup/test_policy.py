from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import Field

from runguard.config.settings import GuardSettings, Override
from runguard.detectors.support.base import Action, Detector, DetectorConfig
from runguard.proxy.guard.lineup import engine
from runguard.proxy.guard.lineup.policy import Policy, tightening_from


class _LimitConfig(DetectorConfig):
    limit: int = Field(100, description="the limit", json_schema_extra={"tighten": "lower"})
    note: str = Field("x", description="not tightenable")


class _Limit(Detector[_LimitConfig]):
    name: ClassVar[str] = "limit"
    Config = _LimitConfig


class _WarnConfig(DetectorConfig):
    action: Action = Field(Action.WARN, description="warn by default")


class _Warn(Detector[_WarnConfig]):
    name: ClassVar[str] = "warny"
    Config = _WarnConfig


def _policy(**guard: object) -> Policy:
    return Policy([_Limit(), _Warn()], GuardSettings.model_validate(guard))


def _cfg(
    policy: Policy, name: str, key: str = "k_1", model: str = "gpt-4o", headers: dict[str, str] | None = None
) -> Any:  # the detector's own config class: tests read its fields
    found = {a.name: a.config for a in policy.lineup(key, model, tightening_from(headers or {})).armed}
    return found.get(name)


def test_layers_apply_global_then_key_then_model() -> None:
    policy = _policy(
        detectors={"limit": {"limit": 50}},
        key_labels={"k_1": "team-a"},
        overrides=[
            Override(key="team-a", detectors={"limit": {"limit": 40}}),
            Override(model="gpt-4o*", detectors={"limit": {"limit": 30}}),
            Override(key="k_other", detectors={"limit": {"limit": 1}}),
        ],
    )
    assert _cfg(policy, "limit").limit == 30
    assert _cfg(policy, "limit", model="o3").limit == 40
    assert _cfg(policy, "limit", key="k_2", model="o3").limit == 50


def test_headers_only_tighten() -> None:
    policy = _policy(detectors={"limit": {"limit": 50}})
    assert _cfg(policy, "limit", headers={"X-RunGuard-Limit": "limit.limit=10"}).limit == 10
    assert _cfg(policy, "limit", headers={"X-RunGuard-Limit": "limit.limit=500"}).limit == 50
    assert _cfg(policy, "limit", headers={"X-RunGuard-Limit": "limit.note=y"}).note == "x"
    assert _cfg(policy, "limit", headers={"X-RunGuard-Limit": "limit.limit=garbage"}).limit == 50
    assert _cfg(policy, "warny", headers={"X-RunGuard-Limit": "warny.action=block"}).action is Action.BLOCK
    assert _cfg(policy, "limit", headers={"X-RunGuard-Limit": "limit.action=off"}).action is Action.BLOCK


def test_off_detectors_are_not_armed() -> None:
    policy = _policy(detectors={"warny": {"action": "off"}})
    assert _cfg(policy, "warny") is None
    assert _cfg(policy, "limit") is not None


def test_short_headers_map_to_budget_fields() -> None:
    assert tightening_from({"X-RunGuard-Budget-Usd": "0.5", "X-RunGuard-Max-Requests": "7"}) == (
        ("budget", "run_usd", "0.5"),
        ("max_requests", "limit", "7"),
    )


def test_state_names_are_kept_once_per_detector_whatever_the_number_of_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # Some fields are named after the tools a run calls: a gateway with thousands of keys whose
    # clients invent tool names must not keep a name cache per key.
    monkeypatch.setattr(engine, "MAX_NAMES", 3)
    policy = _policy()
    for key in ("k_1", "k_2", "k_3"):
        (limit,) = (a for a in policy.lineup(key, "gpt-4o").armed if a.name == "limit")
        assert [limit.state_name(f"n.{key}.{i}") for i in range(2)] == [f"limit.n.{key}.0", f"limit.n.{key}.1"]
    (limit,) = (a for a in policy.lineup("k_4", "gpt-4o").armed if a.name == "limit")
    assert limit.names == {"n.k_1.0": "limit.n.k_1.0", "n.k_1.1": "limit.n.k_1.1", "n.k_2.0": "limit.n.k_2.0"}


@pytest.mark.parametrize(
    ("header", "named"),
    [
        ("limitt.limit=10", "limitt: no such detector"),
        ("limit.limti=10", "limit.limti: no such field"),
        ("limit.limit=abc", "limit.limit='abc'"),
        ("limit.note=y", "limit.note: cannot be set per run"),
        ("limit", "limit.?: expected detector.field=value"),
        ("limit.limit=", "limit.limit: expected detector.field=value"),
        ("warny.action=sometimes", "warny.action='sometimes'"),
    ],
)
def test_header_entries_no_detector_can_take_are_named(header: str, named: str) -> None:
    errors = _policy().header_errors(tightening_from({"X-RunGuard-Limit": header}))
    assert len(errors) == 1 and errors[0].startswith(named), errors


def test_valid_header_entries_have_no_errors_and_loosening_ones_are_noted() -> None:
    policy = _policy(detectors={"limit": {"limit": 50}})
    tight = tightening_from({"X-RunGuard-Limit": "limit.limit=500, limit.action=off, warny.action=block"})
    assert policy.header_errors(tight) == []
    assert policy.ignored("k_1", "gpt-4o", tight) == (
        "limit.action=off ignored: headers only tighten (configured: block)",
        "limit.limit=500 ignored: headers only tighten (configured: 50)",
    )
    assert policy.ignored("k_1", "gpt-4o", tightening_from({"X-RunGuard-Limit": "limit.limit=5"})) == ()


def test_nudge_is_set_per_key_and_model_and_headers_move_it_only_towards_block() -> None:
    policy = _policy(
        overrides=[
            Override(key="k_1", detectors={"warny": {"action": "nudge"}}),
            Override(model="o3", detectors={"limit": {"action": "nudge"}}),
        ]
    )
    assert _cfg(policy, "warny").action is Action.NUDGE
    assert _cfg(policy, "warny", key="k_2").action is Action.WARN
    assert _cfg(policy, "limit", model="o3").action is Action.NUDGE
    assert _cfg(policy, "warny", key="k_2", headers={"X-RunGuard-Limit": "warny.action=nudge"}).action is Action.NUDGE
    assert _cfg(policy, "warny", headers={"X-RunGuard-Limit": "warny.action=block"}).action is Action.BLOCK
    assert _cfg(policy, "limit", headers={"X-RunGuard-Limit": "limit.action=nudge"}).action is Action.BLOCK
