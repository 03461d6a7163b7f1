"""Reading files out of a fetched repository's git directory (no work tree), by path glob."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path


class Mirror:
    """One fetched repository: its git directory, read at one commit."""

    def __init__(self, git_dir: Path, commit: str) -> None:
        self.git_dir = git_dir
        self.commit = commit

    def _git(self, *args: str) -> bytes:
        return subprocess.run(["git", f"--git-dir={self.git_dir}", *args], check=True, capture_output=True).stdout

    def names(self, pattern: str) -> list[str]:
        """The files of the commit whose path matches the glob `pattern` (`*` crosses folders)."""
        listed = self._git("ls-tree", "-r", "--name-only", "-z", self.commit).decode().split("\0")
        return sorted(name for name in listed if name and fnmatch.fnmatch(name, pattern))

    def read(self, name: str) -> bytes:
        return self._git("show", f"{self.commit}:{name}")
