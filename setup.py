"""The packages to build, found rather than listed: every folder with an `__init__.py` under the three source
folders, named under `runguard.` as pyproject's `package-dir` maps them (`proxy/` is `runguard.proxy`, ...).

Everything else about the build is in pyproject.toml; setuptools' own `packages.find` cannot name what it
finds under a prefix, so the list is computed here. tests/test_layout.py checks it against the tree.
"""

from __future__ import annotations

from setuptools import find_packages, setup

ROOTS = {"runguard.proxy": "proxy", "runguard.detectors": "detectors", "runguard.config": "config"}


def packages() -> list[str]:
    """Each mapped package and its sub-packages, sorted."""
    found = [
        name
        for package, folder in ROOTS.items()
        for name in (package, *(f"{package}.{sub}" for sub in find_packages(folder)))
    ]
    return sorted(found)


if __name__ == "__main__":
    setup(packages=packages())
