"""The detectors the proxy runs, in order, and validation of their settings.

The list is explicit: a new detector file is added here by hand (a test
checks that every detector module is listed and that names are unique).
Order matters only for which verdict of one request is reported first:
budgets, then progress, then multi-agent, context, per-response, upstream
health and output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from runguard.detectors.budget import Budget
from runguard.detectors.consecutive_same_tool import ConsecutiveSameTool
from runguard.detectors.context_growth import ContextGrowth
from runguard.detectors.context_window import ContextWindow
from runguard.detectors.delegation import Delegation
from runguard.detectors.duplicate_request import DuplicateRequest
from runguard.detectors.fan_out import FanOut
from runguard.detectors.handoff_cycle import HandoffCycle
from runguard.detectors.max_requests import MaxRequests
from runguard.detectors.max_tokens import MaxTokens
from runguard.detectors.non_progress import NonProgress
from runguard.detectors.novelty import Novelty
from runguard.detectors.oscillation import Oscillation
from runguard.detectors.over_spawn import OverSpawn
from runguard.detectors.parallel_calls import ParallelCalls
from runguard.detectors.repeat_call import RepeatCall
from runguard.detectors.retry_cascade import RetryCascade
from runguard.detectors.session_bloat import SessionBloat
from runguard.detectors.spend_rate import SpendRate
from runguard.detectors.spiral import Spiral
from runguard.detectors.stagnation import Stagnation
from runguard.detectors.structured_output import StructuredOutput
from runguard.detectors.support import Detector, DetectorConfig
from runguard.detectors.text_loop import TextLoop
from runguard.detectors.timeout import Timeout
from runguard.detectors.tool_storm import ToolStorm
from runguard.proxy.core.errors import ConfigError

DETECTOR_CLASSES: tuple[type[Detector[Any]], ...] = (
    # run budgets
    Budget,
    SpendRate,
    MaxRequests,
    MaxTokens,
    Timeout,
    # progress
    NonProgress,
    Spiral,
    Novelty,
    TextLoop,
    RepeatCall,
    ToolStorm,
    ConsecutiveSameTool,
    Stagnation,
    Oscillation,
    # multi-agent
    HandoffCycle,
    Delegation,
    OverSpawn,
    # context and cost growth
    ContextGrowth,
    ContextWindow,
    SessionBloat,
    # per response
    ParallelCalls,
    FanOut,
    # upstream health
    RetryCascade,
    DuplicateRequest,
    # output
    StructuredOutput,
)


def default_detectors() -> list[Detector[Any]]:
    """A fresh instance of every detector, in the order above."""
    return [cls() for cls in DETECTOR_CLASSES]


def config_model(name: str) -> type[DetectorConfig]:
    """The config model of the detector called `name`; ConfigError if there is none."""
    for cls in DETECTOR_CLASSES:
        if cls.name == name:
            return cls.Config
    known = ", ".join(sorted(cls.name for cls in DETECTOR_CLASSES))
    raise ConfigError(f"{name}: unknown detector (known: {known})")


def validate_config(name: str, values: Mapping[str, Any]) -> None:
    """Validate one detector's settings; ConfigError names the field, e.g. "spiral.threshold: ..."."""
    model = config_model(name)
    if values.get("action") == "nudge" and not next(c for c in DETECTOR_CLASSES if c.name == name).nudges:
        raise ConfigError(f"{name}.action: nudge is not available for {name} (the model cannot change what it judges)")
    try:
        model.model_validate(dict(values))
    except ValidationError as exc:
        problems = "; ".join(
            f"{name}.{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}"
            for error in exc.errors()
        )
        raise ConfigError(problems) from exc
