"""`runguard-proxy runs | show | trips | replay`, run as a user runs them, against a store filled by the writer."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import openai
import orjson
import pytest
import yaml

from tests.e2e import agents, payloads
from tests.proxy.store import factory
from tests.proxy.store.conftest import SinkFactory
from tests.support.processes import console_script
from tests.support.proxy import settings_for, start_proxy
from tests.support.upstream import FakeUpstream

T0 = factory.T0


async def cli(*args: str, database_url: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("RUNGUARD_")}
    if database_url is not None:
        env["RUNGUARD_DATABASE_URL"] = database_url
    return await asyncio.to_thread(
        subprocess.run, [console_script(), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


async def _fill(make_sink: SinkFactory) -> None:
    sink = make_sink()
    for i in range(1, 4):
        sink.submit(factory.request("cli-loop", i, at=T0 + i, verdicts=(factory.verdict(),) if i == 3 else ()))
    sink.submit(factory.trip("cli-loop", at=T0 + 3.5))
    sink.submit(factory.request("cli-loop", 4, at=T0 + 4, blocked_by="non_progress", status=429, usd=0.0))
    sink.submit(factory.request("cli-ok", 1, at=T0 + 10, agent="writer"))
    sink.submit(factory.request("cli-ok", 2, at=T0 + 11, tool_calls=(), finish_reason="stop"))
    await sink.flush()


async def test_runs_show_trips_as_json_and_tables(make_sink: SinkFactory, store_url: str) -> None:
    await _fill(make_sink)
    done = await cli("runs", "--json", database_url=store_url)
    assert done.returncode == 0, done.stderr
    runs = orjson.loads(done.stdout)
    assert [(r["run_id"], r["status"], r["requests"]) for r in runs] == [
        ("cli-ok", "completed", 2),
        ("cli-loop", "tripped:non_progress", 4),
    ]
    assert runs[0]["agents"] == ["writer", "planner"]

    done = await cli("show", "cli-loop", "--json", database_url=store_url)
    detail = orjson.loads(done.stdout)
    assert [step["index"] for step in detail["requests"]] == [1, 2, 3, 4]
    assert detail["requests"][3]["blocked_by"] == "non_progress" and detail["trips"][0]["detector"] == "non_progress"

    done = await cli("trips", "--json", database_url=store_url)
    assert orjson.loads(done.stdout) == [
        {
            "detector": "non_progress",
            "trips": 1,
            "warnings": 0,
            "runs": 1,
            "usd_avoided": pytest.approx(0.097),
            "last_at": T0 + 3.5,
        }
    ]

    tables = [
        await cli(command, *args, database_url=store_url)
        for command, *args in (["runs"], ["show", "cli-loop"], ["trips"])
    ]
    assert all(done.returncode == 0 for done in tables), [done.stderr for done in tables]
    listing, shown, by_detector = (done.stdout for done in tables)
    assert "cli-loop" in listing and "tripped: non_progress" in listing and "completed" in listing
    assert "blocked: non_progress" in shown and "search" in shown and "non_progress:block" in shown
    assert "non_progress" in by_detector and "$0.0970" in by_detector


async def test_missing_store_and_unknown_run_are_reported(
    tmp_path: Path, make_sink: SinkFactory, store_url: str
) -> None:
    done = await cli("runs", database_url=f"sqlite+aiosqlite:///{tmp_path}/absent.db")
    assert done.returncode == 1 and "no record store at" in done.stderr
    assert not (tmp_path / "absent.db").exists()  # the CLI never creates a database
    await _fill(make_sink)
    done = await cli("show", "no-such-run", database_url=store_url)
    assert done.returncode == 1 and "no run 'no-such-run'" in done.stderr
    done = await cli("runs", database_url="")
    assert done.returncode == 1 and "no record store is configured" in done.stderr


async def test_the_config_file_names_the_store(tmp_path: Path, make_sink: SinkFactory, store_url: str) -> None:
    await _fill(make_sink)
    config = tmp_path / "runguard.yaml"
    config.write_text(yaml.safe_dump({"store": {"database_url": store_url}}))
    done = await cli("runs", "--json", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert {r["run_id"] for r in orjson.loads(done.stdout)} == {"cli-ok", "cli-loop"}


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
