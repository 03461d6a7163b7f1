"""`runguard-proxy runs | trips` (and `read_store`, which every read command goes through): JSON and
tables; `runs` fits 80 columns with every run id whole, filters, and client text is never rich markup;
a missing or unconfigured store is reported, never created. The store is filled by real traffic through
the proxy (`views.fill_by_traffic`) or by the writer (`views.fill_by_writer`); the commands run
in-process through typer's CliRunner (their width set with COLUMNS as a terminal would), or as a process.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
import yaml

from tests.proxy.cli.views import BOLD, LINK, LOOP, PLAIN, T0, Filled, cli, fill_by_writer, invoke
from tests.proxy.store.conftest import SinkFactory


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


async def test_runs_show_trips_as_json_and_tables(make_sink: SinkFactory, store_url: str) -> None:
    await fill_by_writer(make_sink)
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
    await fill_by_writer(make_sink)
    done = await cli("show", "no-such-run", database_url=store_url)
    assert done.returncode == 1 and "no run 'no-such-run'" in done.stderr
    done = await cli("runs", database_url="")
    assert done.returncode == 1 and "no record store is configured" in done.stderr


async def test_the_config_file_names_the_store(tmp_path: Path, make_sink: SinkFactory, store_url: str) -> None:
    await fill_by_writer(make_sink)
    config = tmp_path / "runguard.yaml"
    config.write_text(yaml.safe_dump({"store": {"database_url": store_url}}))
    done = await cli("runs", "--json", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert {r["run_id"] for r in orjson.loads(done.stdout)} == {"cli-ok", "cli-loop"}
