"""`runguard-proxy key-hash` as a subprocess: the hash the proxy knows a key by, the key read from stdin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runguard.proxy.runs.keys import KeyHasher, load_salt


def _key_hash(stdin: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RUNGUARD_")}
    return subprocess.run(
        [sys.executable, "-m", "runguard.proxy.cli.main", "key-hash"],
        input=stdin,
        check=False,
        capture_output=True,
        text=True,
        env={**clean, "RUNGUARD_HOME": str(home), **env},
        timeout=60,
    )


def test_key_hash_prints_the_hash_the_proxy_uses_and_never_the_key(tmp_path: Path) -> None:
    done = _key_hash("sk-one\n\nsk-two\n", tmp_path)
    salt = load_salt(None, tmp_path)  # the install's salt, created by the command's first run
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [KeyHasher(salt).hash("sk-one"), KeyHasher(salt).hash("sk-two")]
    assert "sk-one" not in done.stdout + done.stderr
    configured = _key_hash("sk-one\n", tmp_path, RUNGUARD_KEY_SALT="test-salt")
    assert configured.stdout.strip() == KeyHasher(b"test-salt").hash("sk-one")


def test_key_hash_without_a_key_says_how_to_give_one(tmp_path: Path) -> None:
    done = _key_hash("", tmp_path)
    assert done.returncode == 2 and "standard input" in done.stderr
