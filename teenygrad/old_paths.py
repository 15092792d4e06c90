"""Module paths from before the compiler became one package, mapped to where each module lives now.

A learner's `mine/NN-name.py` holds the notebook's setup cell as it was when the part passed, so a file recorded
before the move still says `from teenygrad import passes` or `from teenygrad.codegen import index_expr`. Those
imports keep working: each old name is the new module itself (not a copy), imported on first use.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

MOVED = {  # old module path -> the module that holds its contents now
    "teenygrad.lazy": "teenygrad.compiler.capture.lazy",
    "teenygrad.lazy_ops": "teenygrad.compiler.capture.ops",
    "teenygrad.lazy_views": "teenygrad.compiler.capture.views",
    "teenygrad.lazy_nn": "teenygrad.compiler.capture.nn",
    "teenygrad.ir": "teenygrad.compiler.ir",
    "teenygrad.passes": "teenygrad.compiler.passes",
    "teenygrad.schedule": "teenygrad.compiler.schedule",
    "teenygrad.triangles": "teenygrad.compiler.schedule.triangles",
    "teenygrad.codegen": "teenygrad.compiler.codegen",
    "teenygrad.codegen_program": "teenygrad.compiler.codegen",
    "teenygrad.backend": "teenygrad.compiler.backend",
}


class OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An import finder that answers an old path with the module now at its new one."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        pass  # already imported by create_module


def install() -> None:
    if not any(isinstance(f, OldPaths) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPaths())  # before the path finders: the old files are gone, the old names stay
