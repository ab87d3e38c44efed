"""Shared test set-up: never reach a model hub; hypothesis keeps no example database."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _hypothesis_profile() -> None:
    """Hypothesis without its example database (``.hypothesis/``): a failure found once is
    reported with the blob that reproduces it (``@reproduce_failure``), and is not replayed
    by every later test run of the clone. A failing example worth keeping goes into the test
    as ``@example``."""
    from hypothesis import settings

    settings.register_profile("psens", database=None, print_blob=True)
    settings.load_profile("psens")


_hypothesis_profile()


def _checkout_widgets() -> None:
    """Import ``psens.widgets`` from this checkout's ``widgets/`` folder.

    An editable install maps ``psens.widgets`` to the folder of the checkout it was
    installed from; a second checkout (a git worktree sharing the venv) would otherwise test
    that other checkout's widgets against its own ``psens``.
    """
    import importlib.util
    import sys
    from pathlib import Path

    import psens

    folder = Path(__file__).resolve().parents[1] / "widgets"
    if "psens.widgets" in sys.modules or Path(psens.__file__).parent != folder.parent / "psens":
        return
    spec = importlib.util.spec_from_file_location(
        "psens.widgets", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["psens.widgets"] = module
    spec.loader.exec_module(module)
    psens.widgets = module


_checkout_widgets()
