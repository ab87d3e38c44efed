"""AND-OR interactions: fast Möbius transforms, solvers and converters (IPS paper §3.1)."""

from psens.interactions.and_or import AndOrResult, SolverSettings, and_or, l1_objective
from psens.interactions.transforms import (
    inverse_mobius_and,
    inverse_mobius_or,
    mobius_and,
    mobius_and_transpose,
    mobius_or,
    mobius_or_transpose,
    reconstruct,
)

__all__ = [
    "AndOrResult",
    "SolverSettings",
    "and_or",
    "inverse_mobius_and",
    "inverse_mobius_or",
    "l1_objective",
    "mobius_and",
    "mobius_and_transpose",
    "mobius_or",
    "mobius_or_transpose",
    "reconstruct",
]
