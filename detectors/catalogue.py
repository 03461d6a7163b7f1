"""The detector catalogue as Markdown, generated from the registry.

Each detector's module docstring (first paragraph) says what it catches; its
config model's field descriptions and defaults are the settings reference.
`docs/detectors.md` is this output (a test keeps the two equal), and
`runguard-proxy detectors` prints it.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from pydantic.fields import FieldInfo

from runguard.detectors import guide
from runguard.detectors.base import Detector
from runguard.detectors.registry import DETECTOR_CLASSES

HEADER = """# Detectors

Generated from the code (`runguard-proxy detectors`); do not edit by hand.

Every detector has `action` (`block`, `warn`, `off`) and `response` (`error`: a provider-native 429
the SDK does not retry; `stop`: a normal completion that ends the agent's turn). Set them under
`guard.detectors.<name>` in the config, per API key or model under `guard.overrides`, or make them
stricter for one run with `X-RunGuard-Limit: <name>.<field>=<value>` (fields marked *tightenable*).
`guard.shadow: true` turns every block into a warning, to calibrate on real traffic first.
`action: nudge` first sends the model a note, then blocks if the pattern goes on (see Nudge, below).
"""


def _default(info: FieldInfo) -> str:
    value: Any = info.get_default(call_default_factory=True)
    if hasattr(value, "value"):
        value = value.value
    return f"`{json.dumps(value, default=str)}`"


_PER_THREAD = (
    " Judges each conversation on its own: a thread nested in a run (a sub-agent a tool call started,"
    " without `X-Run-Id`; with it, a task a leader delegated to a member or an agent tool) keeps its own state"
    " for it, while the run's caps count every thread."
)


_STAYS_STOPPED = (
    "A run it stops stays stopped until it is reset or forgotten: every later request of the run, a client's"
    " retry after any wait included, gets the same answer locally (see Breakers)."
)
_HEALS = "Its breaker closes by itself: after the cooldown, one probe request is let through (see Breakers)."
_NO_NUDGE = " `nudge` is not available (the model cannot change what it judges)."


def _after(cls: type[Detector[Any]]) -> str:
    """What follows a block by this detector (see the Breakers and Nudge sections)."""
    return (_STAYS_STOPPED if cls.stays_stopped else _HEALS) + ("" if cls.nudges else _NO_NUDGE)


_REASONED = ("Defaults.", "False positives.")


def _section(cls: type[Detector[Any]]) -> str:
    module = inspect.getmodule(cls)
    doc = inspect.cleandoc(module.__doc__ or "") if module else ""
    summary = doc.split("\n\n")[0].replace("\n", " ")
    if cls.per_thread:
        summary += _PER_THREAD
    lines = [f"## `{cls.name}`", "", summary, "", _after(cls), ""]
    # Paragraphs of the docstring that reason about the defaults and false positives are reference too.
    for paragraph in doc.split("\n\n")[1:]:
        if paragraph.startswith(_REASONED):
            lines += [paragraph.replace("\n", " "), ""]
    lines += ["| setting | default | |", "|---|---|---|"]
    for name, info in cls.Config.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        tight = " *tightenable*" if extra.get("tighten") else ""
        description = (info.description or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{name}` | {_default(info)} | {description}{tight} |")
    return "\n".join(lines)


def render() -> str:
    sections = [_section(cls) for cls in DETECTOR_CLASSES]
    return HEADER + "\n" + "\n\n".join(sections) + "\n\n" + "\n".join((guide.NUDGE, guide.BREAKERS, guide.EVIDENCE))
