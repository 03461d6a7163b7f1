"""The packages to build, found rather than listed: every folder with an `__init__.py` under the three source
folders, named under `runguard.` as pyproject's `package-dir` maps them (`proxy/` is `runguard.proxy`, ...).

Everything else about the build is in pyproject.toml; setuptools' own `packages.find` cannot name what it
finds under a prefix, so the list is computed here. tests/test_layout.py checks it against the tree.

Four optional C extensions, each the twin of Python code that gives the same answers: the shingle kernel
(`detectors/support/_shingling.c`) and a call's argument sketch (`_sketching.c`), built where a C compiler and
xxHash's header are there (Debian: `apt-get install libxxhash-dev`), a JSON result's units (`_units.c`) and the
volatile-text stripper (`_volatile.c`), which need a C compiler alone. One that cannot be built is left out with
a warning, and its Python twin runs.
"""

from __future__ import annotations

from setuptools import Extension, find_packages, setup

ROOTS = {"runguard.proxy": "proxy", "runguard.detectors": "detectors", "runguard.config": "config"}


def _kernel(name: str, depends: tuple[str, ...] = ()) -> Extension:
    """`detectors/support/<name>.c` as `runguard.detectors.support.<name>`: optional, so a machine that cannot
    build it (no compiler, no xxhash.h) installs without it and runs its Python twin."""
    return Extension(
        f"runguard.detectors.support.{name}",
        [f"detectors/support/{name}.c"],
        depends=[f"detectors/support/{header}" for header in depends],
        extra_compile_args=["-O2"],
        optional=True,
    )


KERNELS = [
    _kernel("_shingling"),  # twins: shingles.hashes_py, tops_py; needs xxhash.h
    _kernel("_sketching", ("_ascii.h",)),  # twin: sketch._sketch_py; needs xxhash.h
    _kernel("_units"),  # twin: shingles._Units
    _kernel("_volatile", ("_ascii.h",)),  # twin: the normalize._VOLATILE regex
]


def packages() -> list[str]:
    """Each mapped package and its sub-packages, sorted."""
    found = [
        name
        for package, folder in ROOTS.items()
        for name in (package, *(f"{package}.{sub}" for sub in find_packages(folder)))
    ]
    return sorted(found)


if __name__ == "__main__":
    setup(packages=packages(), ext_modules=KERNELS)
