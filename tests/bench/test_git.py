"""Reading a fetched git directory: the files a path glob names, without those whose content the
fetched copy lacks (a snapshot can leave its largest files out), so a build never fails on them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.corpus.git import Mirror


def _git(*args: str, cwd: Path) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_a_file_whose_content_is_missing_is_not_listed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "trajs").mkdir(parents=True)
    (work / "trajs" / "a.traj").write_text("kept")
    (work / "trajs" / "b.traj").write_text("too large to have been fetched")
    (work / "README.md").write_text("not a trajectory")
    _git("init", "-q", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "runs", cwd=work)
    commit = _git("rev-parse", "HEAD", cwd=work)
    lost = _git("rev-parse", "HEAD:trajs/b.traj", cwd=work)
    (work / ".git" / "objects" / lost[:2] / lost[2:]).unlink()  # as a snapshot without its largest files

    mirror = Mirror(work / ".git", commit)

    assert mirror.names("trajs/*.traj") == ["trajs/a.traj"]
    assert mirror.read("trajs/a.traj") == b"kept"
    assert mirror.names("nothing/*") == []
