"""psens: measure and explain the prompt sensitivity of language models.

Four methods on one data model, a package each: :mod:`psens.ips` (AND-OR interactions,
the centre; its numerical core is :mod:`psens.interactions`), :mod:`psens.pss` (ProSA),
:mod:`psens.eas` (heuristic vs judge) and :mod:`psens.dbsa` (distribution-based token
sensitivity). Shared layers below them: :mod:`psens.datasets`, :mod:`psens.prompts`,
:mod:`psens.variants`, :mod:`psens.models`, :mod:`psens.backends`, :mod:`psens.store`,
:mod:`psens.runner`; :mod:`psens.cloze` scores options as continuations (the cloze
formulation of a run).

``import psens`` loads neither torch nor any UI library; submodules that need them
import them lazily and name the extra to install when it is missing.
"""

import importlib as _importlib
import os as _os
import sys as _sys

# OpenMP threads (torch, BLAS) wait at barriers by sleeping, not spinning: beside another
# CPU-bound process a run then degrades in proportion to the CPU it gets (spinning made a
# 2-core run 3x slower next to one busy process instead of ~2x). Set before torch is loaded;
# an explicit OMP_WAIT_POLICY in the environment wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# psens.plan is a module and callable: psens.plan(config) resolves a run (psens.plan.resolve)
from psens import cloze, datasets, formats, interactions, ips, models, plan, prompts
from psens._version import __version__
from psens.config import RunConfig, load_config
from psens.interactions import (
    SolverSettings,
    and_or,
    mobius_and,
    mobius_or,
    reconstruct,
)
from psens.ips import factors
from psens.pipeline import run
from psens.settings import DEFAULT_TAU, RunSettings, run_settings
from psens.store import open_run

# ``psens.factors`` (and its submodules) is the name the factor analyses had before they
# moved under ``psens.ips``: both names are the same module objects.
_sys.modules["psens.factors"] = factors
_FACTOR_MODULES = ("compare", "consistency", "meta", "pairings", "perturbation")
for _name in (*_FACTOR_MODULES, "representation", "threshold"):
    _sys.modules[f"psens.factors.{_name}"] = _importlib.import_module(f"psens.ips.factors.{_name}")
# the statistics moved to psens.stats (shared by IPS, EAS and the noise floor): old names
from psens import stats  # noqa: E402

factors.stats = stats
_sys.modules["psens.factors.stats"] = _sys.modules["psens.stats"] = stats

__all__ = [
    "DEFAULT_TAU",
    "RunConfig",
    "RunSettings",
    "SolverSettings",
    "__version__",
    "and_or",
    "cloze",
    "datasets",
    "factors",
    "formats",
    "interactions",
    "ips",
    "load_config",
    "mobius_and",
    "mobius_or",
    "models",
    "open_run",
    "plan",
    "prompts",
    "reconstruct",
    "run",
    "run_settings",
]
