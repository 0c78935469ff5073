"""Size limits that can be lowered on a package and take effect in the module that reads them.

The analysis and the lowering keep their size limits in a ``limits`` module, read as
``limits.NAME`` at call time.  Tests lower a limit on the package
(``monkeypatch.setattr(analysis, "DOMAIN_CAP", 20)``) to reach the past-the-limit paths on small
inputs; ``forward_limits`` passes such an assignment on to ``limits``.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any


def forward_limits(package: str, limits: ModuleType) -> None:
    """Make ``setattr(package, NAME, value)`` set ``limits.NAME`` too, for each upper-case name
    that ``limits`` defines (other attributes are set on the package alone)."""
    module = sys.modules[package]

    class Package(type(module)):  # type: ignore[misc]
        def __setattr__(self, name: str, value: Any) -> None:
            if name.isupper() and hasattr(limits, name):
                setattr(limits, name, value)
            super().__setattr__(name, value)

    module.__class__ = Package
