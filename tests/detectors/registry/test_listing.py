"""The registry's listing names every detector once, documents every setting, and validates settings by name."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import runguard.detectors
from runguard.config.loader import ConfigError, load_settings
from runguard.detectors.registry import DETECTOR_CLASSES, config_model, default_detectors, validate_config
from runguard.detectors.support.base import Action, Detector
from runguard.proxy.core.events import HandoffKind, ToolCall
from tests.detectors.harness import RunSimulator, Step, Turn, agent_loop, call, handoff, request, response, result

# what detectors/ holds besides the detectors: the list of them with its Markdown, and what they stand on
PACKAGES = {"registry", "support"}


def _modules() -> list[str]:
    """The modules of detectors/ (its packages aside): each one a detector."""
    return sorted(m.name for m in pkgutil.iter_modules(runguard.detectors.__path__) if not m.ispkg)


def test_the_folder_holds_detectors_and_two_packages() -> None:
    found = {m.name for m in pkgutil.iter_modules(runguard.detectors.__path__) if m.ispkg}
    assert found == PACKAGES, "a helper of the detectors goes in support/, beside them only detectors"


def test_every_detector_module_is_registered_once_under_its_own_name() -> None:
    registered = {cls: cls.name for cls in DETECTOR_CLASSES}
    for module_name in _modules():
        module = importlib.import_module(f"runguard.detectors.{module_name}")
        found = [
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, Detector) and obj.__module__ == module.__name__
        ]
        assert len(found) == 1, f"detectors/{module_name}.py must define exactly one detector"
        assert found[0] in registered, f"{found[0].__name__} is not in the registry"
        assert found[0].name == module_name
    names = [cls.name for cls in DETECTOR_CLASSES]
    assert len(names) == len(set(names))
    assert [d.name for d in default_detectors()] == names


def test_every_setting_has_a_description_and_a_valid_tighten_direction() -> None:
    for cls in DETECTOR_CLASSES:
        for field_name, info in cls.Config.model_fields.items():
            assert info.description, f"{cls.name}.{field_name} has no description"
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            assert extra.get("tighten") in (None, "lower", "higher"), f"{cls.name}.{field_name}"


def test_defaults_block_except_the_count_heuristics() -> None:
    warn = {cls.name for cls in DETECTOR_CLASSES if cls.Config().action is Action.WARN}
    assert warn == {"tool_storm", "consecutive_same_tool"}


def test_validate_config_names_the_field() -> None:
    validate_config("spiral", {"threshold": 0.6, "action": "warn"})
    with pytest.raises(ConfigError, match=r"^spiral\.threshold: Input should be"):
        validate_config("spiral", {"threshold": "high"})
    with pytest.raises(ConfigError, match=r"^budget\.bogus: Extra inputs are not permitted"):
        validate_config("budget", {"bogus": 1})
    with pytest.raises(ConfigError, match=r"^nope: unknown detector"):
        validate_config("nope", {})
    assert config_model("spiral").model_fields["threshold"].default == 0.72


def test_the_config_loader_reports_the_full_key(tmp_path: Path) -> None:
    config = tmp_path / "runguard.yaml"
    config.write_text("guard:\n  detectors:\n    max_requests:\n      limit: -1\n")
    with pytest.raises(ConfigError, match=r"guard\.detectors\.max_requests\.limit: Input should be greater"):
        load_settings(config_file=config, environ={}, validate_detectors=validate_config)


# -- every default detector together ------------------------------------------------------------------


async def test_a_long_healthy_plan_passes_every_default_detector() -> None:
    topics = [f"topic {i} {'abcdefghijklmnopqrstuvwxyz'[i]}" for i in range(20)]
    turns: list[Turn] = [
        [("web_search", {"query": f"market data on {t}"}, {"hits": [t, i]})] for i, t in enumerate(topics)
    ]
    turns += [[("fetch", {"url": f"https://example.com/{i}"}, f"page {i}")] for i in range(5)]
    # Each step adds the same 1,200 tokens of context.
    steps = [
        dataclasses.replace(
            s, response=response(text=s.response.text, tool_calls=s.response.tool_calls, input_tokens=3000 + 1200 * i)
        )
        for i, s in enumerate(agent_loop(turns))
        if s.response is not None
    ]
    results = await RunSimulator(default_detectors()).run(steps)
    assert not [f for r in results for f in r.findings if f.action == "block"]
    assert not [r.blocked_by for r in results if r.blocked_by]  # every request went upstream, every answer through


async def test_run_state_stays_bounded_whatever_the_run() -> None:
    """A hostile run filling every window and roster: many tools called again and again with long
    arguments and results, long agent names, three new delegations per response."""
    sim = RunSimulator(default_detectors())
    big = " ".join(f"w{i}" for i in range(400))
    prev: list[ToolCall] = []
    for i in range(80):
        calls = [
            call(f"tool_{(12 * i + j) % 80}_" + "t" * 100, {"text": big, "n": i, "j": j}, f"c{i}_{j}")
            for j in range(12)
        ]
        handoffs = [handoff(f"agent-{i}-{k}-" + "y" * 200, HandoffKind.DELEGATE) for k in range(3)]
        step = Step(
            request(
                agent_name=f"agent-{i % 40}-" + "x" * 200,
                prior_calls=prev,
                new_results=[result(c.name, {"data": big, "i": i}, c.call_id) for c in prev],
                message_count=2 * i + 1,
            ),
            response(text=big, tool_calls=calls, handoffs=handoffs, input_tokens=1000 * (i + 1)),
        )
        await sim.step(step)
        prev = calls
    # Every window and roster full: about 14.5 KB, of which `novelty`'s window of 16 turns and `fan_out`'s
    # stored batch are 2.3 KB (a typical run holds 1-2 KB; the target is under 16 KB).
    assert await sim.run_state_bytes() < 15 * 1024


def test_nudge_is_refused_where_the_model_cannot_change_what_the_detector_judges() -> None:
    validate_config("spiral", {"action": "nudge"})
    with pytest.raises(ConfigError, match=r"^retry_cascade\.action: nudge is not available"):
        validate_config("retry_cascade", {"action": "nudge"})
