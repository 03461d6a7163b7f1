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

import importlib.util
import shutil
import subprocess
import sys
import zipfile
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


def _package_folders() -> set[str]:
    """Every folder with an `__init__.py` under the three sources, as the package name it installs as."""
    names = {"proxy": "runguard.proxy", "detectors": "runguard.detectors", "config": "runguard.config"}
    return {
        ".".join([names[source], *init.parent.relative_to(ROOT / source).parts])
        for source in SOURCES
        for init in (ROOT / source).rglob("__init__.py")
    }


def _setup_packages() -> list[str]:
    spec = importlib.util.spec_from_file_location("runguard_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not as __main__: only `packages()` is defined
    found: list[str] = module.packages()
    return found


def test_the_build_finds_every_package_folder_and_the_editable_install_imports_each_from_it() -> None:
    """No list is kept by hand (setup.py finds the packages): each folder is a package of the build, and the
    editable install imports it from this checkout."""
    folders = _package_folders()
    assert set(_setup_packages()) == folders
    assert "runguard.proxy.store.migrations.versions" in folders  # a folder with no module a test imports
    for name in sorted(folders):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None and Path(spec.origin).is_relative_to(ROOT), name


def test_a_wheel_built_from_the_tree_holds_every_package_and_its_data(tmp_path: Path) -> None:
    """What the container installs (`pip install .`: a wheel), built from a copy of the sources."""
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    for source in SOURCES:
        shutil.copytree(ROOT / source, tmp_path / source, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", "dist", "."],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.removesuffix("/__init__.py").replace("/", ".") for name in names if name.endswith("/__init__.py")}
    assert packages == _package_folders()
    assert {
        "runguard/proxy/state/batch.lua",
        "runguard/proxy/store/alembic.ini",
        "runguard/config/pricing.yaml",
    } <= set(names)
    assert not [name for name in names if name.startswith("tests/") or "forgiving" in name]
