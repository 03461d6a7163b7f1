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

    def _git(self, *args: str, given: bytes | None = None) -> bytes:
        command = ["git", f"--git-dir={self.git_dir}", *args]
        return subprocess.run(command, input=given, check=True, capture_output=True).stdout

    def names(self, pattern: str) -> list[str]:
        """The files of the commit whose path matches the glob `pattern` (`*` crosses folders), leaving
        out a file whose content the fetched copy lacks (a snapshot can leave out its largest files)."""
        listed = self._git("ls-tree", "-r", "-z", self.commit).decode().split("\0")
        blobs = {}
        for entry in listed:
            meta, _, name = entry.partition("\t")
            if name and fnmatch.fnmatch(name, pattern) and meta.split(" ")[1:2] == ["blob"]:
                blobs[name] = meta.split(" ")[2]
        if not blobs:
            return []
        checked = self._git("cat-file", "--batch-check", given="\n".join(blobs.values()).encode() + b"\n")
        missing = {line.split(" ")[0] for line in checked.decode().splitlines() if line.endswith(" missing")}
        return sorted(name for name, sha in blobs.items() if sha not in missing)

    def read(self, name: str) -> bytes:
        return self._git("show", f"{self.commit}:{name}")
