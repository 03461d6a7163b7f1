"""Packages' public faces: every name of a face is the object its module defines, the face lists each name the
same way three times (`TYPE_CHECKING` imports, `HOMES`, `__all__`), and importing a package imports none of its
modules."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from runguard.proxy.core.faces import lazy_face

ROOT = Path(__file__).resolve().parents[3]
FOLDERS = {"proxy": "runguard.proxy", "detectors": "runguard.detectors", "config": "runguard.config"}


def _faces() -> dict[str, Path]:
    """Every package whose `__init__.py` is a lazy face, by its dotted name."""
    found = {}
    for folder, package in FOLDERS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            if "lazy_face(" in init.read_text(encoding="utf-8"):
                parts = init.parent.relative_to(ROOT / folder).parts
                found[".".join((package, *parts))] = init
    return found


FACES = _faces()


def _typed_names(init: Path) -> dict[str, str]:
    """The names the face imports for the type checker, with the module each comes from."""
    names = {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for item in node.body:
                assert isinstance(item, ast.ImportFrom) and item.module
                names.update({alias.name: item.module for alias in item.names})
    return names


def test_the_tree_has_faces() -> None:
    assert {"runguard.proxy.guard", "runguard.proxy.state", "runguard.config", "runguard.detectors.registry"} <= set(
        FACES
    )


@pytest.mark.parametrize("package", sorted(FACES))
def test_a_face_names_each_of_its_names_once_and_each_is_its_module_s(package: str) -> None:
    face = importlib.import_module(package)
    typed = _typed_names(FACES[package])
    assert sorted(face.HOMES) == sorted(face.__all__) == sorted(typed)
    for name, home in face.HOMES.items():
        module = f"{package}.{home}"
        assert typed[name] == module
        assert getattr(face, name) is getattr(importlib.import_module(module), name)


def test_importing_a_face_imports_none_of_its_modules() -> None:
    probe = (
        "import sys\n"
        f"faces = {sorted(FACES)!r}\n"
        "for face in faces: __import__(face)\n"
        "print(sorted(m for m in sys.modules if any(m.startswith(face + '.') for face in faces)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", "a face imported modules of its package at once"


def test_a_name_off_the_face_is_an_attribute_error_and_a_submodule_still_imports() -> None:
    getattr_ = lazy_face("runguard.proxy.state", {"MemoryState": "memory"})
    assert getattr_("MemoryState").__name__ == "MemoryState"
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        getattr_("Nothing")
    from runguard.proxy.state import bounds  # a module, not a name of the face

    assert bounds.__name__ == "runguard.proxy.state.bounds"


def _module_name(path: Path) -> str:
    folder, *parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join((FOLDERS[folder], *parts))


def _off_face(path: Path) -> list[str]:
    """The imports in `path` that name a module behind another package's face for names the face offers (a
    package's own modules import each other directly)."""
    faces = {package: importlib.import_module(package).HOMES for package in FACES}
    own = _module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        for package, homes in faces.items():
            if own.startswith(package + "."):
                continue
            home = node.module.removeprefix(package + ".")
            if home != node.module and all(homes.get(alias.name) == home for alias in node.names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {package} import ...")
    return found


def test_every_package_reads_the_others_through_their_faces() -> None:
    paths = [path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
    behind = [line for path in paths for line in _off_face(path)]
    assert not behind, "import these through the package's face:\n" + "\n".join(behind)
