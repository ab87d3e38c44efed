"""psens: measure and explain the prompt sensitivity of language models.

Four methods on one data model: IPS (AND-OR interactions, the centre), PSS (ProSA),
EAS (heuristic vs judge) and DBSA (distribution-based token sensitivity).

``import psens`` loads neither torch nor any UI library; submodules that need them
import them lazily and name the extra to install when it is missing.
"""

from psens import datasets, factors, interactions, ips, models, prompts
from psens.config import RunConfig, load_config
from psens.interactions import SolverSettings, and_or, mobius_and, mobius_or, reconstruct
from psens.runner import run
from psens.store import open_run

__version__ = "0.1.0"

__all__ = [
    "RunConfig",
    "SolverSettings",
    "__version__",
    "and_or",
    "datasets",
    "factors",
    "interactions",
    "ips",
    "load_config",
    "mobius_and",
    "mobius_or",
    "models",
    "open_run",
    "prompts",
    "reconstruct",
    "run",
]
