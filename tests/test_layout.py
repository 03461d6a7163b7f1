"""The tree keeps its shape: every source module has its test module, and none grows past 400 lines.

Tests mirror the source (`proxy/guard/ticket.py` -> `tests/proxy/guard/test_ticket.py`,
`detectors/spiral.py` -> `tests/detectors/test_spiral.py`), so a module's tests
are found without searching and a module without any is seen at once, as
mitmproxy's pairing script does. Small files with one purpose read and review
better: a module over 400 lines is split by purpose, not waved through.
The import layers and the absence of cycles are import-linter's contracts
(`[tool.importlinter]` in pyproject.toml, run by `.ci/run`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("proxy", "detectors", "config")
MAX_LINES = 400
# Alembic's environment and revision scripts: run whole by tests/proxy/store/test_migrate.py.
NOT_MIRRORED = ("proxy/store/migrations/",)


def _modules() -> list[str]:
    """Every Python source file of the three packages, as a path from the repository root."""
    return sorted(str(path.relative_to(ROOT)) for source in SOURCES for path in (ROOT / source).rglob("*.py"))


def _mirrored(module: str) -> str:
    folder, _, name = module.rpartition("/")
    return f"tests/{folder}/test_{name}"


def _lines(module: str) -> int:
    return len((ROOT / module).read_text(encoding="utf-8").splitlines())


def test_the_walk_finds_the_packages_modules() -> None:
    found = _modules()
    assert {"proxy/cli/main.py", "proxy/core/events.py", "detectors/spiral.py", "config/loader.py"} <= set(found)
    assert _mirrored("proxy/guard/ticket.py") == "tests/proxy/guard/test_ticket.py"
    assert _mirrored("detectors/spiral.py") == "tests/detectors/test_spiral.py"


def test_every_module_has_its_mirrored_test_module() -> None:
    """Package markers (`__init__.py`) are left out: they hold a docstring and re-exports, not behaviour."""
    missing = [
        _mirrored(module)
        for module in _modules()
        if not module.endswith("/__init__.py")
        and not module.startswith(NOT_MIRRORED)
        and not (ROOT / _mirrored(module)).is_file()
    ]
    assert not missing, "test modules missing:\n" + "\n".join(missing)


def test_no_module_is_over_400_lines() -> None:
    over = [f"{module}: {_lines(module)} lines" for module in _modules() if _lines(module) > MAX_LINES]
    assert not over, f"split these by purpose (at most {MAX_LINES} lines each):\n" + "\n".join(over)


def test_every_package_folder_is_installed() -> None:
    """A folder missing from pyproject's `packages` works in the editable checkout and is absent from the
    wheel the container installs (setuptools lists the mapped packages by hand)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    names = {"proxy": "runguard.proxy", "detectors": "runguard.detectors", "config": "runguard.config"}
    folders = {
        ".".join([names[source], *init.parent.relative_to(ROOT / source).parts])
        for source in SOURCES
        for init in (ROOT / source).rglob("__init__.py")
    }
    assert folders - listed == set(), "add to [tool.setuptools] packages"
    assert listed - folders == set(), "listed but not a package folder"
