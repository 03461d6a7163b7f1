"""`python -m bench.corpus build`: the sources of sources.json, read from their fetched git directories,
written as one JSON-lines file of recorded exchanges per session (`<source>/<session>.jsonl`, the
format `runguard-proxy replay` reads) plus `sessions.json` (JSON lines too, one line of metadata
per session: not `.jsonl`, so a replay of the folder reads only the sessions) under the output folder."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.corpus import claude_code, claude_export, codex
from bench.corpus.git import Mirror
from bench.corpus.readers import READERS, Context, Reader
from bench.corpus.redact import scrub
from bench.corpus.session import Session, exchanges

HERE = Path(__file__).parent
MANIFEST = HERE / "sources.json"
MIRRORS = Path("/work/.mirror")
OUT = HERE / "build"
FORMATS: dict[str, Reader] = {
    **READERS,
    "claude-code": claude_code.read,
    "claude-code-export": claude_export.read,
    "codex": codex.read,
}


@dataclass(frozen=True, slots=True)
class Built:
    source: str
    sessions: int
    calls: int


def load_manifest(path: Path = MANIFEST) -> list[dict[str, Any]]:
    sources: list[dict[str, Any]] = orjson.loads(path.read_bytes())["sources"]
    return sources


def git_dir(mirrors: Path, repo: str) -> Path:
    return mirrors / repo.replace("/", "+") / "repo"


def _outcomes(mirror: Mirror, spec: dict[str, Any] | None) -> dict[str, str]:
    """Instance id -> outcome, from the source's own evaluation files."""
    if not spec:
        return {}
    found: dict[str, str] = {}
    if spec["format"] == "summary":  # {"instances": [{"instance_id", "resolved"}]}
        for item in orjson.loads(mirror.read(spec["file"]))["instances"]:
            found[item["instance_id"]] = "resolved" if item["resolved"] else "unresolved"
    elif spec["format"] == "results":  # {"resolved": [ids], "unresolved_ids": [ids]}
        doc = orjson.loads(mirror.read(spec["file"]))
        found |= {i: "unresolved" for i in doc.get("unresolved_ids", [])}
        found |= {i: "resolved" for i in doc.get("resolved", []) if isinstance(i, str)}
    elif spec["format"] == "reports":  # one report.json per instance: {id: {"resolved": bool}}
        for name in mirror.names(spec["glob"]):
            for instance, report in orjson.loads(mirror.read(name)).items():
                found[instance] = "resolved" if report.get("resolved") else "unresolved"
    return found


def _selected(sessions: list[Session], select: dict[str, Any] | None) -> list[Session]:
    """The source's sessions kept: every one of `min_calls` calls or more, then every `every`-th other one."""
    if not select:
        return sessions
    long = [s for s in sessions if len(s.turns) >= select.get("min_calls", 10**9)]
    others = [s for s in sessions if s not in long][:: select.get("every", 1)]
    return sorted(long + others, key=lambda s: s.id)


def read_source(source: dict[str, Any], mirrors: Path) -> Iterator[Session]:
    mirror = Mirror(git_dir(mirrors, source["repo"]), source["commit"])
    outcomes = _outcomes(mirror, source.get("outcomes"))
    ctx = Context(
        source["id"], source["family"], source.get("model"), outcomes, source.get("keep_observations"),
        source.get("instance_dir"),
    )  # fmt: skip
    reader = FORMATS[source["format"]]
    names = [n for pattern in source["files"] for n in mirror.names(pattern)]
    names = [n for n in names if not any(fnmatch.fnmatch(n, x) for x in source.get("exclude", []))]
    sessions: list[Session] = []
    seen: set[str] = set()
    for name in names:
        stem = Path(name).name.split(".")[0]
        ctx.path = name
        for session in reader(mirror.read(name), ctx, stem):
            while session.id in seen:  # the same instance recorded twice (another config)
                session.id += "+"
            seen.add(session.id)
            sessions.append(session)
    yield from _selected(sessions, source.get("select"))


def _meta(session: Session, source: dict[str, Any], file: Path, out: Path) -> dict[str, Any]:
    return {
        "run_id": session.id,
        "file": str(file.relative_to(out)),
        "source": source["id"],
        "repo": source["repo"],
        "licence": source["licence"],
        "family": session.family,
        "protocol": session.protocol,
        "model": session.model,
        "calls": len(session.turns),
        "times": "recorded" if session.timed else f"assumed, {source['pace_seconds']} s apart",
        "outcome": session.outcome,
        **{k: v for k, v in session.meta.items() if v is not None},
    }


def _others(index: Path, sources: list[dict[str, Any]]) -> list[bytes]:
    """The index lines of the sessions of other sources than `sources` (kept by a partial rebuild)."""
    ids = {source["id"] for source in sources}
    lines = index.read_bytes().splitlines() if index.is_file() else []
    return [line for line in lines if line.strip() and orjson.loads(line).get("source") not in ids]


def build(sources: list[dict[str, Any]], mirrors: Path = MIRRORS, out: Path = OUT, keep: bool = False) -> list[Built]:
    """Convert every source (skipping, with a note, one whose repository was not fetched). `keep`: the
    build's other sources stay, with their lines in sessions.json (`--only` rebuilds some sources)."""
    out.mkdir(parents=True, exist_ok=True)
    built = []
    kept = _others(out / "sessions.json", sources) if keep else []
    with (out / "sessions.json").open("wb") as index:
        index.writelines(line + b"\n" for line in kept)
        for source in sources:
            if not git_dir(mirrors, source["repo"]).is_dir():
                print(f"skipped {source['id']}: {source['repo']} is not fetched under {mirrors}")
                continue
            folder = out / source["id"]
            folder.mkdir(exist_ok=True)
            count = calls = 0
            for session in read_source(source, mirrors):
                file = folder / (session.id.split("/", 1)[1].replace("/", "_") + ".jsonl")
                with file.open("wb") as lines:
                    for exchange in exchanges(session, source["pace_seconds"]):
                        lines.write(scrub(orjson.dumps(exchange)) + b"\n")
                index.write(orjson.dumps(_meta(session, source, file, out)) + b"\n")
                count, calls = count + 1, calls + len(session.turns)
            built.append(Built(source["id"], count, calls))
            print(f"{source['id']}: {count} sessions, {calls} calls")
    return built
