"""`python -m bench.corpus build [--mirrors DIR] [--out DIR] [--only SOURCE ...]` and
`python -m bench.corpus judge REPLAY.json [--markdown] [--before OLD.json] [--verdicts DIR]` and
`python -m bench.corpus sources REPLAY.json [--build DIR]` and
`python -m bench.corpus tail REPLAY.json [--verdicts DIR]` and
`python -m bench.corpus usage [--mirrors DIR] [--source ID ...]` (see README.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.corpus import judge, sources_table, tail, usage_check
from bench.corpus.build import MIRRORS, OUT, build, load_manifest


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.corpus", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="convert the fetched recordings into replayable sessions")
    build_cmd.add_argument("--mirrors", type=Path, default=MIRRORS, help="where the repositories were fetched")
    build_cmd.add_argument("--out", type=Path, default=OUT, help="where the sessions are written")
    build_cmd.add_argument("--only", nargs="*", help="only these source ids (the build's others are kept)")
    judge_cmd = commands.add_parser("judge", help="join a `replay --json` report with the verdicts of its stops")
    judge_cmd.add_argument("report", type=Path, help="the output of `runguard-proxy replay DIR --json`")
    judge_cmd.add_argument("--verdicts", type=Path, default=judge.VERDICTS, help="folder of verdict *.jsonl files")
    judge_cmd.add_argument("--markdown", action="store_true", help="the table docs/detectors.md shows")
    judge_cmd.add_argument("--before", type=Path, help="an earlier report, for the table's before column")
    sources_cmd = commands.add_parser("sources", help="docs/corpus.md's table: each source's sessions, stops, warnings")
    sources_cmd.add_argument("report", type=Path, help="the output of `runguard-proxy replay DIR --json`")
    sources_cmd.add_argument("--build", type=Path, default=OUT, help="the build the report replayed")
    sources_cmd.add_argument("--verdicts", type=Path, default=judge.VERDICTS, help="folder of verdict *.jsonl files")
    tail_cmd = commands.add_parser("tail", help="the calls stuck sessions had left after their stops (costs.TAILS)")
    tail_cmd.add_argument("report", type=Path, help="the output of `runguard-proxy replay DIR --json`")
    tail_cmd.add_argument("--verdicts", type=Path, default=judge.VERDICTS, help="folder of verdict *.jsonl files")
    usage_cmd = commands.add_parser("usage", help="rebuilt usage against recorded usage (usage_check)")
    usage_cmd.add_argument("--mirrors", type=Path, default=MIRRORS, help="where the repositories were fetched")
    usage_cmd.add_argument("--source", nargs="*", default=list(usage_check.SOURCES), help="sources with usage")
    args = parser.parse_args()
    if args.command == "usage":
        print(usage_check.run([s for s in load_manifest() if s["id"] in args.source], args.mirrors))
        return
    if args.command == "tail":
        print(tail.run(args.report, args.verdicts))
        return
    if args.command == "sources":
        print(sources_table.run(args.report, args.build, judge.load_verdicts(args.verdicts)))
        return
    if args.command == "judge":
        print(judge.run(args.report, args.verdicts, args.markdown, args.before))
        return
    sources = [s for s in load_manifest() if not args.only or s["id"] in args.only]
    built = build(sources, args.mirrors, args.out, keep=bool(args.only))
    sessions, calls = sum(b.sessions for b in built), sum(b.calls for b in built)
    print(f"{sessions} sessions, {calls} calls in {args.out}")


if __name__ == "__main__":
    main()
