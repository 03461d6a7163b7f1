"""The read commands as a terminal shows them: `runs` fits 80 columns with every run id whole, filters,
`show` prints the conversation, `export` writes what `replay` reads, client text is never rich markup.

The store is filled by real traffic: the openai SDK through the proxy (bodies recorded) to a scripted
upstream; then one more run through a proxy that records no bodies. The commands run in-process through
typer's CliRunner (a pipe, not a terminal), their width set with COLUMNS as a terminal would.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import openai
import orjson
import pytest
from click.testing import Result
from typer.testing import CliRunner

from runguard.proxy.cli.main import new_app
from tests.e2e import agents
from tests.support.processes import console_script
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream

LOOP = "loop-0123456789abcdef-0123456789abcdef"  # longer than rich would keep in a squeezed column
BOLD = "[bold]x[/bold]"  # client-chosen ids that rich would read as markup
LINK = "[link=https://example.com/]y[/link]:smile:"
PLAIN = "plain-run"  # recorded without bodies


async def invoke(*args: str, url: str, width: int | None = None) -> Result:
    """The CLI in-process, as `runguard-proxy ARGS` with the store at `url` and COLUMNS=`width`."""
    env: dict[str, str | None] = {name: None for name in os.environ if name.startswith("RUNGUARD_")}
    env.update({"RUNGUARD_DATABASE_URL": url, "COLUMNS": str(width) if width else None})
    return await asyncio.to_thread(CliRunner().invoke, new_app(), list(args), env=env)


async def _agent(base_url: str, run_id: str, key: str, tool: agents.Tool) -> None:
    sdk = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, default_headers={"X-Run-Id": run_id})
    try:
        await agents.chat_agent(sdk, tool)
    except openai.RateLimitError:
        pass  # the loop was stopped
    finally:
        await sdk.close()


@dataclass
class Filled:
    url: str
    keys: dict[str, str]  # run id -> its key hash


@pytest.fixture
async def filled(store_url: str, upstream: FakeUpstream) -> Filled:
    upstream.script = agents.chat_script(steps=4)
    recording = settings_for(upstream.url, store={"database_url": store_url, "record_bodies": True})
    running = await start_proxy(recording)
    try:
        await _agent(f"{running.url}/v1", LOOP, "sk-loop-key", agents.soft_error_tool)
        await _agent(f"{running.url}/v1", BOLD, "sk-other-key", agents.progressing_tool)
        await _agent(f"{running.url}/v1", LINK, "sk-other-key", agents.progressing_tool)
    finally:
        await running.stop()
    running = await start_proxy(settings_for(upstream.url, store={"database_url": store_url}))
    try:
        await _agent(f"{running.url}/v1", PLAIN, "sk-other-key", agents.progressing_tool)
    finally:
        await running.stop()
    listed = await invoke("runs", "--json", url=store_url)
    assert listed.exit_code == 0, listed.output
    return Filled(store_url, {run["run_id"]: run["key_hash"] for run in orjson.loads(listed.stdout)})


async def test_runs_fit_the_terminal_and_every_run_id_stays_whole(filled: Filled) -> None:
    assert set(filled.keys) == {LOOP, BOLD, LINK, PLAIN}
    for width in (80, 120):
        done = await invoke("runs", url=filled.url, width=width)
        assert done.exit_code == 0, done.output
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= width, done.stdout
        for run_id in filled.keys:  # whole on one line, markup and emoji codes printed as they are
            assert any(run_id in line for line in lines), (run_id, done.stdout)
        assert "tripped:" in done.stdout and "non_progress" in done.stdout and "completed" in done.stdout
    assert "key" in lines[0].split() and filled.keys[LOOP] in done.stdout  # at 120 the key column is there
    for command in (["trips"], ["show", LOOP], ["show", PLAIN], ["detectors"], ["replay", "--from-db"]):
        done = await invoke(*command, url=filled.url, width=80)
        assert done.exit_code == 0, done.output
        assert max(len(line) for line in done.stdout.splitlines()) <= 80, (command, done.stdout)


async def test_runs_filters(filled: Filled) -> None:
    async def ids(*args: str) -> set[str]:
        done = await invoke("runs", "--json", *args, url=filled.url)
        assert done.exit_code == 0, done.output
        return {run["run_id"] for run in orjson.loads(done.stdout)}

    assert await ids("--status", "tripped") == {LOOP}
    assert await ids("--status", "completed") == {BOLD, LINK, PLAIN}
    assert await ids("--key", filled.keys[LOOP]) == {LOOP}
    assert await ids("--detector", "non_progress") == {LOOP}
    assert await ids("--since", "1h") == await ids("--since", "2020-01-01") == set(filled.keys)
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + 86400))
    assert await ids("--since", tomorrow) == set()
    assert len(await ids("--limit", "2")) == 2
    done = await invoke("trips", "--since", "30m", "--json", url=filled.url)
    assert {row["detector"] for row in orjson.loads(done.stdout)} == {"non_progress", "consecutive_same_tool"}
    done = await invoke("trips", "--since", tomorrow, url=filled.url)
    assert done.exit_code == 0 and done.stdout.strip() == "no trips recorded"
    done = await invoke("runs", "--since", "yesterday", url=filled.url)
    assert done.exit_code == 2 and "30m, 1h, 2d" in done.output
    done = await invoke("runs", "--status", "tripped", "--key", filled.keys[BOLD], url=filled.url)
    assert done.exit_code == 0 and done.stdout.strip() == "no runs match"


async def test_show_prints_the_conversation_when_bodies_were_recorded(filled: Filled) -> None:
    done = await invoke("show", LOOP, url=filled.url, width=100)
    assert done.exit_code == 0, done.output
    text = " ".join(done.stdout.split())  # wrapped lines joined
    assert f"run {LOOP}" in done.stdout
    assert "You extract data. Use parse_document." in text  # the system prompt, first request only
    assert "user: Extract the invoice total." in text
    assert 'tool call parse_document: {"document": "invoice.pdf", "approach"' in text  # the arguments
    assert "tool result call_0: " in text and "partial_parse_error" in text  # the result sent back
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


async def test_export_then_replay_reports_what_replay_from_the_store_reports(filled: Filled, tmp_path: Path) -> None:
    exported = tmp_path / "traffic.jsonl"
    done = await invoke("export", "--output", str(exported), url=filled.url)
    assert done.exit_code == 0, done.output
    assert "exported 14 exchanges of 3 runs" in done.stderr  # 4 + 5 + 5; the plain run has no bodies
    lines = [orjson.loads(line) for line in exported.read_bytes().splitlines()]
    assert {line["run_id"] for line in lines} == {LOOP, BOLD, LINK}
    assert lines[0]["request"]["messages"][1]["content"] == "Extract the invoice total."  # a JSON body as JSON
    stopped = [line for line in lines if line["answered_locally"]]
    assert [(s["run_id"], s["status"], s["response"]) for s in stopped] == [(LOOP, None, "")]

    from_file = await invoke("replay", str(exported), "--json", url=filled.url)
    from_store = await invoke("replay", "--from-db", "--json", url=filled.url)
    assert from_file.exit_code == from_store.exit_code == 0, from_file.output + from_store.output
    assert orjson.loads(from_file.stdout) == orjson.loads(from_store.stdout)
    assert orjson.loads(from_file.stdout)["runs"][0]["detector"] == "non_progress"

    done = await invoke("export", "--run", BOLD, url=filled.url)  # to stdout
    assert {orjson.loads(line)["run_id"] for line in done.stdout.splitlines()} == {BOLD}
    done = await invoke("export", "--since", "2999-01-01", "--output", str(tmp_path / "none.jsonl"), url=filled.url)
    assert done.exit_code == 1 and "no recorded traffic" in done.stderr and not (tmp_path / "none.jsonl").exists()


async def test_replay_names_a_run_that_is_not_there(filled: Filled, tmp_path: Path) -> None:
    exported = tmp_path / "traffic.jsonl"
    assert (await invoke("export", "-o", str(exported), url=filled.url)).exit_code == 0
    done = await invoke("replay", str(exported), "--run", "nope", url=filled.url)
    assert done.exit_code == 1 and f"no run 'nope' in {exported}" in done.stderr
    done = await invoke("replay", str(exported), "--run", BOLD, "--json", url=filled.url)
    assert [run["run_id"] for run in orjson.loads(done.stdout)["runs"]] == [BOLD]
    done = await invoke("replay", "--from-db", "--run", "nope", url=filled.url)
    assert done.exit_code == 1 and "no run 'nope' in the record store" in done.stderr
    done = await invoke("replay", "--from-db", "--run", PLAIN, url=filled.url)
    assert done.exit_code == 1 and "its traffic was not recorded" in done.stderr


async def test_replay_shows_progress_on_a_terminal_only(filled: Filled, tmp_path: Path) -> None:
    exported = tmp_path / "traffic.jsonl"
    assert (await invoke("export", "-o", str(exported), url=filled.url)).exit_code == 0
    lines = exported.read_bytes().splitlines()
    large = tmp_path / "large.jsonl"  # the recorded runs many times over, each copy its own run
    with large.open("wb") as out:
        for copy in range(150):
            for line in lines:
                item = orjson.loads(line)
                item["run_id"] = f"{item['run_id']}-{copy}"
                out.write(orjson.dumps(item) + b"\n")

    def run(stderr_tty: bool) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNGUARD_")}
        leader, follower = os.openpty() if stderr_tty else (None, None)
        done = subprocess.run(
            [console_script(), "replay", str(large), "--json"],
            env={**env, "RUNGUARD_DATABASE_URL": ""},
            stdout=subprocess.PIPE,
            stderr=follower if follower is not None else subprocess.PIPE,
            timeout=120,
            check=False,
        )
        if leader is None or follower is None:
            return done, done.stderr
        os.close(follower)
        seen = b""
        try:
            while chunk := os.read(leader, 65536):
                seen += chunk
        except OSError:
            pass  # the terminal's other end is closed: all read
        os.close(leader)
        return done, seen

    piped, piped_err = await asyncio.to_thread(run, False)
    assert piped.returncode == 0 and piped_err == b""
    on_terminal, terminal_err = await asyncio.to_thread(run, True)
    assert on_terminal.returncode == 0, terminal_err
    assert b"replaying" in terminal_err or b"reading large.jsonl" in terminal_err
    assert orjson.loads(on_terminal.stdout) == orjson.loads(piped.stdout)  # the bar never mixes into stdout
    assert len(orjson.loads(piped.stdout)["runs"]) == 450
