"""The corpus converter: recordings read out of a fetched git directory become the exchanges `replay`
reads, each request the conversation as the agent sent it, each answer the recorded turn with its time
and usage; SWE-agent's elided observations and its own exit note are as the agent sent them; Claude
Code transcripts become Anthropic Messages exchanges; no secret in a recording is written; metadata
says where each session came from."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson

from bench.corpus.build import build
from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.offline.replay import read_file, replay

T0 = 1_800_000_000


def _mini() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You run one bash command per answer."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for turn in range(3):
        response = {"created": T0 + 7 * turn, "model": "vendor/model-1", "usage": {"prompt_tokens": 100 + turn}}
        response["choices"] = [{"finish_reason": "stop"}]
        messages.append(
            {"role": "assistant", "content": f"```bash\nls dir{turn}\n```", "extra": {"response": response}}
        )
        messages.append({"role": "user", "content": f"<output>file{turn}</output>"})
    messages.append({"role": "exit", "content": "Submitted"})
    info = {"config": {"model": {"model_name": "openai/gpt-x"}}, "exit_status": "Submitted"}
    return {"instance_id": "org__repo-1", "info": info, "messages": messages}


def _swe_agent() -> dict[str, Any]:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "SETTING", "agent": "primary"},
        {"role": "user", "content": "demo\nof\nthe interface", "agent": "primary", "is_demo": "True"},
        {"role": "user", "content": "ISSUE: it breaks", "agent": "primary"},
    ]
    for turn in range(8):
        history.append({"role": "assistant", "content": f"DISCUSSION\n```\nopen f{turn}.java\n```", "agent": "primary"})
        history.append({"role": "user", "content": f"[File f{turn}.java]\nline\nline", "agent": "primary"})
    history.append({"role": "assistant", "content": "Exit due to cost limit", "agent": "primary"})
    return {"history": history, "info": {"exit_status": "exit_cost"}, "trajectory": []}


KEY = "sk-ant-api03-" + "Zx9" * 12


def _claude_code() -> bytes:
    usage = {"input_tokens": 4, "cache_read_input_tokens": 21_000, "output_tokens": 30}
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "env"}}
    lines = [
        {"type": "user", "timestamp": "2025-11-19T22:54:00Z", "message": {"role": "user", "content": "Fix it."}},
        {
            "type": "assistant",
            "timestamp": "2025-11-19T22:54:03Z",
            "message": {"id": "m1", "content": [use], "usage": usage},
        },
        {
            "type": "user",
            "timestamp": "2025-11-19T22:54:04Z",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": f"KEY={KEY}"}],
            },
        },
        {
            "type": "assistant",
            "timestamp": "2025-11-19T22:54:09Z",
            "message": {"id": "m2", "content": [], "usage": usage},
        },
    ]
    return b"\n".join(orjson.dumps(line) for line in lines)


def _mirror(tmp_path: Path) -> tuple[Path, str]:
    work = tmp_path / "work"
    (work / "runs" / "task-9" / "agent" / "projects" / "-app").mkdir(parents=True)
    (work / "runs" / "task-9" / "agent" / "projects" / "-app" / "abcd1234-0000.jsonl").write_bytes(_claude_code())
    (work / "trajs").mkdir(parents=True)
    (work / "trajs" / "org__repo-1.traj.json").write_bytes(orjson.dumps(_mini()))
    (work / "java" / "trajs").mkdir(parents=True)
    (work / "java" / "trajs" / "org__lib-7.traj").write_bytes(orjson.dumps(_swe_agent()))
    (work / "java" / "results.json").write_bytes(orjson.dumps({"resolved": ["org__lib-7"], "unresolved_ids": []}))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "recordings"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    mirrors = tmp_path / "mirrors"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirrors / "org+recordings" / "repo")], check=True)
    return mirrors, commit


def _source(commit: str, **more: Any) -> dict[str, Any]:
    return {"repo": "org/recordings", "commit": commit, "licence": "MIT", "pace_seconds": 10, **more}


async def test_recordings_become_the_exchanges_replay_reads(tmp_path: Path) -> None:
    mirrors, commit = _mirror(tmp_path)
    sources = [
        _source(commit, id="mini", family="mini-swe-agent", format="mini-swe-agent", files=["trajs/*.traj.json"]),
        _source(
            commit,
            id="java",
            family="swe-agent",
            format="swe-agent",
            files=["java/trajs/*.traj"],
            model="m-2",
            outcomes={"format": "results", "file": "java/results.json"},
            keep_observations=5,
        ),
        _source(commit, id="absent", family="x", format="tau-bench", files=["*"], repo="org/not-fetched"),
        _source(
            commit,
            id="cli",
            family="claude-code",
            format="claude-code",
            files=["runs/*/agent/projects/*/*.jsonl"],
            instance_dir=1,
        ),
    ]
    out = tmp_path / "build"
    built = build(sources, mirrors, out)
    assert [(b.source, b.sessions, b.calls) for b in built] == [("mini", 1, 3), ("java", 1, 8), ("cli", 1, 2)]

    mini = read_file(out / "mini" / "org__repo-1.jsonl")
    assert [e.at for e in mini] == [T0, T0 + 7, T0 + 14] and {e.run_id for e in mini} == {"mini/org__repo-1"}
    first, last = orjson.loads(mini[0].request), orjson.loads(mini[-1].request)
    assert first["model"] == "gpt-x" and [m["role"] for m in first["messages"]] == ["system", "user"]
    assert len(last["messages"]) == 6 and "extra" not in last["messages"][2]
    answer = orjson.loads(mini[-1].response)
    assert answer["usage"] == {"prompt_tokens": 102} and answer["model"] == "vendor/model-1"
    assert answer["choices"][0]["message"]["content"] == "```bash\nls dir2\n```"

    java = read_file(out / "java" / "org__lib-7.jsonl")
    assert len(java) == 8 and [e.at for e in java[:2]] == [1_700_000_000.0, 1_700_000_010.0]
    sent = [m["content"] for m in orjson.loads(java[-1].request)["messages"] if m["role"] == "user"]
    assert sent[:2] == ["demo\nof\nthe interface", "ISSUE: it breaks"]  # the demonstration and the issue stay
    assert sent[2:4] == ["Old output omitted (3 lines)"] * 2 and sent[4:] == [
        f"[File f{n}.java]\nline\nline" for n in range(2, 7)
    ]
    assert "usage" not in orjson.loads(java[-1].response)

    index = [orjson.loads(line) for line in (out / "sessions.json").read_bytes().splitlines()]
    assert [(s["run_id"], s["calls"], s["outcome"], s["times"]) for s in index] == [
        ("mini/org__repo-1", 3, None, "recorded"),
        ("java/org__lib-7", 8, "resolved", "assumed, 10 s apart"),
        ("cli/task-9__abcd1234", 2, None, "recorded"),
    ]
    written = (out / "cli" / "task-9__abcd1234.jsonl").read_bytes()
    assert KEY.encode() not in written and b"KEY=[redacted]" in written  # no secret is copied
    cli = read_file(out / "cli" / "task-9__abcd1234.jsonl")
    assert [e.path for e in cli] == ["/anthropic/v1/messages"] * 2
    report = await replay([*mini, *java, *cli], Settings(), default_detectors())
    assert report.skipped == 0 and {r.run_id: r.requests for r in report.runs.values()} == {
        "mini/org__repo-1": 3,
        "java/org__lib-7": 8,
        "cli/task-9__abcd1234": 2,
    }


def test_a_partial_rebuild_keeps_the_other_sources(tmp_path: Path) -> None:
    mirrors, commit = _mirror(tmp_path)
    mini = _source(commit, id="mini", family="mini-swe-agent", format="mini-swe-agent", files=["trajs/*.traj.json"])
    cli = _source(
        commit, id="cli", family="claude-code", format="claude-code", files=["runs/*/agent/projects/*/*.jsonl"]
    )
    out = tmp_path / "build"
    build([mini, cli], mirrors, out)
    before = (out / "sessions.json").read_bytes().splitlines()
    build([cli], mirrors, out, keep=True)  # `--only cli`
    after = (out / "sessions.json").read_bytes().splitlines()
    assert sorted(after) == sorted(before) and (out / "mini" / "org__repo-1.jsonl").is_file()
    build([cli], mirrors, out)  # a whole build writes its own sources alone
    assert [orjson.loads(line)["source"] for line in (out / "sessions.json").read_bytes().splitlines()] == ["cli"]
