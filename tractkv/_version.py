"""The version of tractkv: in the bottom layer, so any module may read it without importing the package root.

``pyproject.toml`` reads it from here (``[tool.setuptools.dynamic]``): this is the one place to change it.
"""

from __future__ import annotations

__version__ = "0.1.0"
