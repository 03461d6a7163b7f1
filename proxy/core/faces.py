"""A package's public face, imported on first use: `__getattr__ = lazy_face(__name__, HOMES)` in its `__init__.py`.

A face names what the layers above use (`__all__`) and the module each name lives in (`HOMES`, relative to
the package); `from runguard.proxy.guard import Guard` imports `guard.guard` only then. So a face costs
nothing to import and makes no cycle: a CLI command that reads the store does not pull in the guard's
detectors and providers because it formats a spend. For the type checker the `__init__.py` imports the
same names under `TYPE_CHECKING` (`tests/proxy/core/test_faces.py` keeps the three lists equal).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_face(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """The module `__getattr__` of `package`: each name of `homes` from its module, any other an AttributeError
    (which also lets `from package import submodule` import the submodule)."""

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return __getattr__
