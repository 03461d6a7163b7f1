"""Claude Code sessions exported to Markdown (claude-code-exporter, Full Conversation) become the
Anthropic Messages calls the CLI made: a run of assistant sections is one answer, the conversation
before it the request (from the last compaction on), the recorded times; a resumed session's copy of
earlier turns is not sent twice; a subagent's missing prompt is marked, a Warmup is no session; the
build scrubs secrets from what it writes and the proxy reads every exchange."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson

from bench.corpus.build import build
from bench.corpus.claude_export import COMPACTED, MISSING_PROMPT, read
from bench.corpus.readers import Context
from bench.corpus.session import Session, exchanges
from runguard.config.settings import Settings
from runguard.detectors.registry import default_detectors
from runguard.proxy.guard.offline.replay import read_file, replay

KEY = "sk-ant-api03-" + "Qw7" * 12


def _section(role: str, second: int, content: Any) -> str:
    body = content if isinstance(content, str) else orjson.dumps(content, option=orjson.OPT_INDENT_2).decode()
    return f"### {role}\n> 12/1/2025, 10:57:{second:02d} PM\n\n{body}\n\n---\n\n"


def _use(tool_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}


def _result(tool_id: str, text: str) -> dict[str, Any]:
    return {"tool_use_id": tool_id, "type": "tool_result", "content": text, "is_error": False}


def _export(session_id: str, sections: list[str]) -> bytes:
    head = f"# Claude Session Export\n\n## Session Information\n\n- **Session ID**: `{session_id}`\n"
    head += "- **Export Mode**: Full Conversation\n\n---\n\n## Conversation\n\n"
    return (head + "".join(sections)).encode()


def _main_session() -> bytes:
    thinking = {"type": "thinking", "thinking": "Run the tests first.", "signature": "c2ln"}
    return _export(
        "5f1c2d3e-0000-4000-8000-000000000000",
        [
            _section("User", 1, "Fix the failing test.\n\n### User\nnot a section: no time line follows"),
            _section("Assistant", 3, [thinking]),
            _section("Assistant", 4, [{"type": "text", "text": "Looking."}]),
            _section("Assistant", 4, [_use("t1", "pytest -q"), _use("t2", "env")]),
            _section("User", 6, [_result("t1", "1 failed")]),
            _section("User", 6, [_result("t2", f"KEY={KEY}")]),
            _section("Assistant", 2, [_use("t1", "pytest -q")]),  # the resumed session's copy: older
            _section("User", 9, [_result("t2", f"KEY={KEY}")]),  # a copy: nothing new in it
            _section("Assistant", 9, [_use("t3", "sed -i s/a/b/ f.py")]),
            _section("User", 10, [_result("t3", "")]),
            _section("User", 12, f"{COMPACTED}. Summary: the test was fixed."),
            _section("Assistant", 15, [{"type": "text", "text": "Done."}]),
            _section("Assistant", 15, [{"type": "text", "text": "Done."}]),  # the same block written twice
        ],
    )


def _session(raw: bytes) -> list[Session]:
    return list(read(raw, Context("cc", "claude-code", None, {}), "file-stem"))


def test_each_run_of_assistant_sections_is_one_call_with_the_conversation_before_it() -> None:
    [session] = _session(_main_session())
    assert session.id == "cc/5f1c2d3e" and session.model == "unknown" and len(session.turns) == 3
    [first, second, third] = list(exchanges(session, pace=10))
    assert first["path"] == "/anthropic/v1/messages" and first["run_id"] == "cc/5f1c2d3e"
    prompt = first["request"]["messages"]
    assert len(prompt) == 1 and prompt[0]["content"].startswith("Fix the failing test.\n\n### User\nnot a section")
    assert [b["type"] for b in first["response"]["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert first["response"]["stop_reason"] == "tool_use" and first["usage_reconstructed"] is True  # not recorded
    results = second["request"]["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in results] == ["t1", "t2"]  # one answer's results go back together
    assert [b["input"]["command"] for b in second["response"]["content"]] == ["sed -i s/a/b/ f.py"]
    assert len(second["request"]["messages"]) == 3  # the copied turns are not sent again
    assert third["request"]["messages"] == [{"role": "user", "content": f"{COMPACTED}. Summary: the test was fixed."}]
    assert third["response"]["content"] == [{"type": "text", "text": "Done."}]
    assert [e["at"] for e in (first, second, third)] == [1764629821.0, 1764629826.0, 1764629832.0]
    assert first["request"]["tools"] == [{"name": "Bash", "input_schema": {"type": "object"}}]


def test_a_subagent_export_marks_its_missing_prompt_and_a_warmup_is_no_session() -> None:
    subagent = _export(
        "agent-1234abcd",
        [
            _section("Assistant", 1, [_use("t1", "grep -rn load_config .")]),
            _section("User", 2, [_result("t1", "app.py:3")]),
            _section("Assistant", 3, [{"type": "text", "text": "app.py"}]),
        ],
    )
    [session] = _session(subagent)
    assert session.id == "cc/agent-1234abcd" and session.meta["subagent"] is True and len(session.turns) == 2
    first = next(exchanges(session, pace=10))
    assert first["request"]["messages"] == [{"role": "user", "content": MISSING_PROMPT}]
    warmup = _export("agent-0", [_section("Assistant", 1, [{"type": "text", "text": "Ready."}])])
    assert _session(warmup) == []


def _mirror(tmp_path: Path) -> tuple[Path, str]:
    work = tmp_path / "work"
    (work / "claude-prompts").mkdir(parents=True)
    (work / "claude-prompts" / "5f1c2d3e-fix-the-test-full.md").write_bytes(_main_session())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "exports"]):
        subprocess.run([*git, *step], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    mirrors = tmp_path / "mirrors"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirrors / "org+exports" / "repo")], check=True)
    return mirrors, commit


async def test_the_build_scrubs_secrets_and_the_proxy_reads_every_call(tmp_path: Path) -> None:
    mirrors, commit = _mirror(tmp_path)
    source = {
        "id": "exports", "repo": "org/exports", "commit": commit, "licence": "none stated", "family": "claude-code",
        "format": "claude-code-export", "files": ["claude-prompts/*-full.md"], "pace_seconds": 10,
    }  # fmt: skip
    out = tmp_path / "build"
    [built] = build([source], mirrors, out)
    assert (built.sessions, built.calls) == (1, 3)
    written = (out / "exports" / "5f1c2d3e.jsonl").read_bytes()
    assert KEY.encode() not in written and b"KEY=[redacted]" in written  # no secret is copied
    recorded = read_file(out / "exports" / "5f1c2d3e.jsonl")
    report = await replay(recorded, Settings(), default_detectors())
    assert report.skipped == 0 and report.runs["exports/5f1c2d3e"].requests == 3
