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

from runguard.detectors.base import Detector
from runguard.detectors.registry import DETECTOR_CLASSES

HEADER = """# Detectors

Generated from the code (`runguard-proxy detectors`); do not edit by hand.

Every detector has `action` (`block`, `warn`, `off`) and `response` (`error`: a provider-native 429
the SDK does not retry; `stop`: a normal completion that ends the agent's turn). Set them under
`guard.detectors.<name>` in the config, per API key or model under `guard.overrides`, or make them
stricter for one run with `X-RunGuard-Limit: <name>.<field>=<value>` (fields marked *tightenable*).
`guard.shadow: true` turns every block into a warning, to calibrate on real traffic first.
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


_REASONED = ("Defaults.", "False positives.")


def _section(cls: type[Detector[Any]]) -> str:
    module = inspect.getmodule(cls)
    doc = inspect.cleandoc(module.__doc__ or "") if module else ""
    summary = doc.split("\n\n")[0].replace("\n", " ")
    if cls.per_thread:
        summary += _PER_THREAD
    lines = [f"## `{cls.name}`", "", summary, ""]
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
    return HEADER + "\n" + "\n\n".join(_section(cls) for cls in DETECTOR_CLASSES) + "\n"
