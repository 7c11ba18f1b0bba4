"""A script of the repository (``scripts/``, ``bench/``) or a generated ``model.py``
imported as a module by its path, for the tests that call its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str, register: bool = False) -> ModuleType:
    """``path`` executed as module ``name`` (``register``: put in ``sys.modules`` first,
    as dataclasses and pickling in it may need)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
