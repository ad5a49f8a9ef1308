"""A package facade whose names are imported when first used (PEP 562).

Mirrors nothing in RocketMQ. A package __init__ that imported its modules at module level to
re-export them would run before any of them and import them all: every module of the package
that imports a sibling would be on an import cycle with it (tests/unit/test_layers.py), and
importing one pure module would load the whole package. A lazy facade lists where each name
lives; `from package import Name` imports that module then. The package's
`if TYPE_CHECKING:` block imports the same names for the type checker (a test checks that
both lists agree).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, tuple[str, ...]]
                 ) -> tuple[Callable[[str], Any], list[str]]:  # fmt: skip
    """(the package's `__getattr__`, its `__all__`) for `homes`: module -> the names it
    exports through the package. A name is imported once, then kept in the package."""
    where = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__, sorted(where)
