"""`runguard-proxy show RUN`: the conversation when bodies were recorded, what is missing (and how to
record it) when not; client text is never rich markup. The store is filled by real SDK traffic through
the proxy (`views.fill_by_traffic`); the command runs in-process through typer's CliRunner.
"""

from __future__ import annotations

import orjson

from tests.proxy.cli.views import BOLD, LOOP, PLAIN, Filled, invoke


async def test_show_prints_the_conversation_when_bodies_were_recorded(filled: Filled) -> None:
    done = await invoke("show", LOOP, url=filled.url, width=100)
    assert done.exit_code == 0, done.output
    text = " ".join(done.stdout.split())  # wrapped lines joined
    assert f"run {LOOP}" in done.stdout
    assert "You extract data. Use parse_document." in text  # the system prompt, first request only
    assert "user: Extract the invoice total." in text
    assert 'tool call parse_document: {"document": "invoice.pdf", "approach"' in text  # the arguments
    assert "tool result parse_document: " in text and "partial_parse_error" in text  # the result sent back
    assert "blocked: non_progress" in text and "trip at request 4: non_progress (block)" in text
    assert "store.record_bodies" not in text

    detail = orjson.loads((await invoke("show", LOOP, "--json", url=filled.url)).stdout)
    assert detail["bodies_recorded"] == len(detail["requests"]) == 4
    first = detail["requests"][0]["content"]
    assert [e["kind"] for e in first["sent"]] == ["system", "user"]
    assert [e["kind"] for e in first["answered"]] == ["tool call"]
    assert [t["detector"] for t in detail["trips"]] == ["consecutive_same_tool", "non_progress"]

    done = await invoke("show", BOLD, url=filled.url, width=80)
    assert done.exit_code == 0 and f"run {BOLD}" in done.stdout and "assistant: Done." in done.stdout


async def test_show_without_bodies_says_what_is_missing_and_how_to_record_it(filled: Filled) -> None:
    done = await invoke("show", PLAIN, url=filled.url, width=120)
    assert done.exit_code == 0, done.output
    text = " ".join(done.stdout.split())
    assert "Message content was not recorded" in text and "store.record_bodies: true" in text
    assert "RUNGUARD_RECORD_BODIES=1" in text and "parse_document" in text  # the tool names are still there
    detail = orjson.loads((await invoke("show", PLAIN, "--json", url=filled.url)).stdout)
    assert detail["bodies_recorded"] == 0 and all(step["content"] is None for step in detail["requests"])
    done = await invoke("show", "no-such-run", url=filled.url)
    assert done.exit_code == 1 and "no run 'no-such-run'" in done.stderr
