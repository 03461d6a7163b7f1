"""What a block answers each client family: its detector's answer unless `auto`, else the family's."""

from __future__ import annotations

import pytest

from runguard.config.settings import GuardSettings
from runguard.detectors.support.base import ResponseKind
from runguard.proxy.guard.client_answers import resolved


@pytest.mark.parametrize(
    ("client", "answer"),
    [
        ("vercel_ai", "refuse"),
        ("codex", "refuse"),
        ("langchain_google", "refuse"),
        ("smolagents", "refuse"),
        ("crewai", "stop"),
        ("claude_code", "error"),
        ("other", "error"),
        ("new", "error"),
    ],
)
def test_auto_answers_each_family_as_it_was_measured_to_end(client: str, answer: str) -> None:
    assert resolved(ResponseKind.AUTO, client, {}) is ResponseKind(answer)


def test_a_family_s_configured_answer_replaces_its_default() -> None:
    configured = GuardSettings(client_answers={"codex": "stop"}).client_answers
    assert resolved(ResponseKind.AUTO, "codex", configured) is ResponseKind.STOP
    assert resolved(ResponseKind.AUTO, "vercel_ai", configured) is ResponseKind.REFUSE


@pytest.mark.parametrize("kind", [ResponseKind.ERROR, ResponseKind.REFUSE, ResponseKind.STOP])
def test_a_detector_that_names_its_answer_gets_it_whatever_the_client(kind: ResponseKind) -> None:
    assert resolved(kind, "vercel_ai", {"vercel_ai": "stop"}) is kind


def test_an_unknown_family_in_the_config_is_refused_at_start_with_its_name() -> None:
    with pytest.raises(ValueError, match="unknown client family codx"):
        GuardSettings(client_answers={"codx": "refuse"})
