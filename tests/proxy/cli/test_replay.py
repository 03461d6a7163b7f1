"""`runguard-proxy export | replay`: `export` writes what `replay FILE` reads, and both report what
`replay --from-db` reports; a replay shows where a configuration would have stopped the recorded runs,
names a run that is not there, and shows progress on a terminal only; a folder of recorded sessions
(a corpus) is replayed file by file with a report per detector.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
import yaml

from tests.e2e import agents, payloads
from tests.proxy.cli.views import BOLD, LINK, LOOP, PLAIN, T0, Filled, cli, invoke
from tests.support import sessions
from tests.support.processes import console_script
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream


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


@pytest.fixture
def looping_upstream(upstream: FakeUpstream) -> FakeUpstream:
    upstream.script = agents.chat_script(steps=8)
    return upstream


async def test_replay_from_db_shows_where_the_default_config_would_stop(
    tmp_path: Path, looping_upstream: FakeUpstream
) -> None:
    """Traffic recorded in shadow mode (nothing blocked), replayed with the default, blocking config."""
    url = f"sqlite+aiosqlite:///{tmp_path}/recorded.db"
    settings = settings_for(
        looping_upstream.url,
        store={"database_url": url, "record_bodies": True},
        guard={"shadow": True},
    )
    running = await start_proxy(settings)
    try:
        for run_id, tool in (("looping-run", agents.soft_error_tool), ("healthy-run", agents.progressing_tool)):
            sdk = openai.AsyncOpenAI(
                base_url=f"{running.url}/v1",
                api_key="sk-replay-0123456789",
                max_retries=0,
                default_headers={"X-Run-Id": run_id},
            )
            assert await agents.chat_agent(sdk, tool) == "Done."  # shadow mode: the loop ran to its end
            await sdk.close()
    finally:
        await running.stop()

    done = await cli("replay", "--from-db", "--json", database_url=url)
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    runs = {run["run_id"]: run for run in report["runs"]}
    looping, healthy = runs["looping-run"], runs["healthy-run"]
    assert looping["detector"] == "non_progress" and looping["stopped_at"] is not None
    assert looping["avoided_requests"] == 9 - looping["stopped_at"] + 1 and looping["avoided_usd"] > 0
    assert healthy["stopped_at"] is None and healthy["requests"] == 9
    assert report["skipped"] == 0

    done = await cli("replay", "--from-db", "--run", "healthy-run", database_url=url)
    assert done.returncode == 0 and "healthy-run" in done.stdout and "looping-run" not in done.stdout

    strict = tmp_path / "strict.yaml"  # a tighter config stops the healthy run too
    strict.write_text(yaml.safe_dump({"guard": {"detectors": {"max_requests": {"limit": 5}}}}))
    done = await cli("replay", "--from-db", "--json", "--config", str(strict), database_url=url)
    runs = {run["run_id"]: run for run in orjson.loads(done.stdout)["runs"]}
    assert runs["healthy-run"]["detector"] == "max_requests"


async def test_replay_from_db_sees_the_requests_the_proxy_stopped_live(
    tmp_path: Path, looping_upstream: FakeUpstream
) -> None:
    """Recorded while blocking: the stopped request carries the 3rd identical result, so the same config
    replayed stops the loop where it stopped live, and a looser one lets it through unanswered."""
    url = f"sqlite+aiosqlite:///{tmp_path}/recorded.db"
    running = await start_proxy(settings_for(looping_upstream.url, store={"database_url": url, "record_bodies": True}))
    try:
        sdk = openai.AsyncOpenAI(
            base_url=f"{running.url}/v1", api_key="sk-replay-live", max_retries=0, default_headers={"X-Run-Id": "live"}
        )
        with pytest.raises(openai.RateLimitError):
            await agents.chat_agent(sdk, agents.soft_error_tool)
        await sdk.close()
    finally:
        await running.stop()
    assert len(looping_upstream.received) == 3

    done = await cli("replay", "--from-db", "--json", database_url=url)
    assert done.returncode == 0, done.stderr
    (run,) = orjson.loads(done.stdout)["runs"]
    assert (run["detector"], run["stopped_at"], run["requests"], run["unanswered"]) == ("non_progress", 4, 3, 0)

    looser = tmp_path / "looser.yaml"
    looser.write_text(yaml.safe_dump({"guard": {"detectors": {"non_progress": {"action": "off"}}}}))
    done = await cli("replay", "--from-db", "--json", "--config", str(looser), database_url=url)
    (run,) = orjson.loads(done.stdout)["runs"]
    assert (run["stopped_at"], run["requests"], run["unanswered"]) == (None, 4, 1)


async def test_replay_of_a_file(tmp_path: Path) -> None:
    lines = []
    messages = [{"role": "system", "content": "You extract data."}, {"role": "user", "content": "Total?"}]
    for turn in range(6):
        call = (f"call_{turn}", "parse_document", orjson.dumps({"document": "a.pdf", "n": turn}).decode())
        response = payloads.chat_completion(tool_calls=[call])
        lines.append(
            {
                "run_id": "file-run",
                "at": T0 + turn,
                "path": "/v1/chat/completions",
                "request": {"model": "gpt-4o-mini", "messages": list(messages)},
                "response": response,
            }
        )
        messages.append(response["choices"][0]["message"])
        messages.append({"role": "tool", "tool_call_id": call[0], "content": '{"status": "error", "data": null}'})
    lines.append({"run_id": "other", "at": T0 + 50, "path": "/v1/embeddings", "request": {"input": "x"}})
    recorded = tmp_path / "traffic.jsonl"
    recorded.write_bytes(b"\n".join(orjson.dumps(line) for line in lines))
    done = await cli("replay", str(recorded), "--json", database_url="")
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["skipped"] == 1
    (run,) = report["runs"]
    assert run["run_id"] == "file-run" and run["detector"] == "non_progress" and run["avoided_requests"] >= 1
    done = await cli("replay", str(recorded), database_url="")
    assert "file-run" in done.stdout and "non_progress" in done.stdout

    recorded.write_text("{not json\n")
    done = await cli("replay", str(recorded), database_url="")
    assert done.returncode == 1 and "traffic.jsonl:1" in done.stderr
    done = await cli("replay", database_url="")
    assert done.returncode == 2 and "FILE or --from-db" in done.stderr


async def test_replay_of_a_folder_reports_per_detector_what_a_config_would_stop(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "loops").mkdir(parents=True)
    (corpus / "fixing.jsonl").write_bytes(sessions.jsonl(sessions.healthy("fixing", 150)))
    (corpus / "loops" / "looping.jsonl").write_bytes(sessions.jsonl(sessions.runaway("looping", 20)))
    (corpus / "sessions.json").write_text('{"run_id": "fixing", "calls": 150}\n')  # metadata: not read
    config = tmp_path / "permissive.yaml"
    config.write_text(yaml.safe_dump(sessions.PERMISSIVE))

    done = await cli("replay", str(corpus), "--json", "--config", str(config), database_url="")
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    summary = report["summary"]
    assert (summary["sessions"], summary["calls"], summary["sessions_stopped"], summary["files"]) == (2, 170, 1, 2)
    (stop,) = summary["detectors"]["non_progress"]["stops"]
    assert (stop["run_id"], stop["of_calls"], stop["source"]) == ("looping", 20, "loops/looping.jsonl")
    assert summary["responses"] == 150 + stop["at_call"] - 1
    assert {run["run_id"]: run["stopped_at"] for run in report["runs"]} == {"fixing": None, "looping": stop["at_call"]}

    done = await cli("replay", str(corpus), "--config", str(config), database_url="")
    assert done.returncode == 0, done.stderr
    assert "per detector" in done.stdout and "looping" in done.stdout and "fixing" not in done.stdout
    assert "2 sessions, 170 calls: 1 sessions stopped" in " ".join(done.stdout.split())

    (tmp_path / "empty").mkdir()
    done = await cli("replay", str(tmp_path / "empty"), database_url="")
    assert done.returncode == 1 and "no *.jsonl file" in done.stderr


def _on_model(lines: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """The recorded exchanges as asked of, and answered by, `model`."""
    return [
        {**line, "request": {**line["request"], "model": model}, "response": {**line["response"], "model": model}}
        for line in lines
    ]


async def test_replay_counts_requests_with_no_price_apart_and_never_shows_them_as_zero(tmp_path: Path) -> None:
    mixed = sessions.healthy("mixed", 5)
    mixed[1:3] = _on_model(mixed[1:3], "acme-coder-9")
    looping = _on_model(sessions.runaway("unpriced-loop", 12), "acme-coder-9")
    recorded = tmp_path / "traffic.jsonl"
    recorded.write_bytes(sessions.jsonl(mixed + looping))

    done = await cli("replay", str(recorded), "--json", database_url="")
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    runs = {run["run_id"]: run for run in report["runs"]}
    assert (runs["mixed"]["unpriced"], runs["mixed"]["requests"]) == (2, 5) and runs["mixed"]["usd"] > 0
    loop = runs["unpriced-loop"]
    assert loop["stopped_at"] is not None and loop["usd"] == 0 and loop["unpriced"] == loop["requests"]
    assert loop["avoided_unpriced"] == loop["avoided_requests"] > 0 and loop["avoided_usd"] == 0
    assert report["summary"]["unpriced"] == 2 + loop["requests"]

    done = await cli("replay", str(recorded), database_url="")
    shown = " ".join(done.stdout.split())
    assert "+ 2 unpriced" in shown and f"{loop['requests']} unpriced" in shown
    assert f"{loop['avoided_requests']} req, {loop['avoided_unpriced']} unpriced" in shown
    assert "$0.0000" not in shown
