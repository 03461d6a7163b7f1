"""What reads as a job still running: a status and nothing more."""

from __future__ import annotations

import pytest

from runguard.detectors.support.waiting import still_running
from runguard.proxy.core.events import ToolResult


@pytest.mark.parametrize(
    "content",
    [
        "<status>running</status>\n\n<timestamp>2025-11-29T22:24:35.383Z</timestamp>",
        '{"status": "running"}',
        '{"status": "pending", "id": "j-1", "updated_at": "2025-12-01T04:48:27Z"}',
        '{"state": "IN_PROGRESS"}',
        "Job is still running",
        "Status: queued",
        # A command job's status over what it printed so far (a log is silent during a long step).
        "<status>running</status>\n\n<stdout>\nFound 51 files to process\n"
        + "Stored: 710 vectors\n" * 40
        + "</stdout>",
    ],
)
def test_a_status_that_only_says_the_job_has_not_finished_is_still_running(content: str) -> None:
    assert still_running(ToolResult("job_status", "c1", content))


@pytest.mark.parametrize(
    "content",
    [
        '{"status": "running", "progress": 20}',  # how far it got: judged as any answer
        "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<stdout>\nDone\n</stdout>",
        "Command running in background with ID: a63b8e",  # the job started
        "Shell a63b8e is not running, so cannot be killed (status: completed)",
        "Error: job failed",
        '{"status": "failed"}',
        "",
        "running " + "x" * 400,
    ],
)
def test_an_answer_that_says_more_is_not(content: str) -> None:
    assert not still_running(ToolResult("job_status", "c1", content))
