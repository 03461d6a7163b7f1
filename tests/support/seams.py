"""An import-linter contract type: a container whose sub-packages are sealed (pyproject's `provider-seam`).

`providers/` holds shared modules (`spec`, `registry`, `framing`, ... and the `common/` package) and one
sub-package per provider. Nothing outside the container may import a provider's sub-package, directly: the
core reaches a provider through its spec. A stock `forbidden` contract would have to list the providers by
name (a new provider would then edit pyproject); this one finds them, so adding a provider touches nothing
here. Loaded by `lint-imports` from the repository root (`[tool.importlinter] contract_types`).
"""

from __future__ import annotations

from typing import Any

from importlinter import Contract, ContractCheck, fields, output


class SealedSubpackages(Contract):
    """`container`: the package; `shared`: the names of its sub-packages anyone may import."""

    container = fields.StringField()
    shared = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        container = str(self.container)  # type: ignore[attr-defined]
        shared = {str(name) for name in (self.shared or [])}  # type: ignore[attr-defined]
        sealed = sorted(
            child
            for child in graph.find_children(container)
            if graph.find_children(child) and child.rpartition(".")[2] not in shared
        )
        broken: list[dict[str, Any]] = []
        for package in sealed:
            inside = {package, *graph.find_descendants(package)}
            for module in sorted(inside):
                for importer in sorted(graph.find_modules_that_directly_import(module)):
                    if importer == container or importer.startswith(container + "."):
                        continue
                    lines = [d["line_number"] for d in graph.get_import_details(importer=importer, imported=module)]
                    broken.append({"importer": importer, "imported": module, "lines": lines})
        return ContractCheck(kept=not broken, metadata={"broken": broken, "sealed": sealed})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for found in check.metadata["broken"]:
            lines = ", ".join(f"l.{line}" for line in found["lines"])
            output.print_error(f"{found['importer']} imports {found['imported']} ({lines}): reach it through its spec")
            output.new_line()
