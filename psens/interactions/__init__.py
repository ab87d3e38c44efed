"""AND-OR interactions: fast Möbius transforms, solvers and converters (IPS paper §3.1).

References
----------
.. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International Conference
   on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
.. [2] Li, M., and Zhang, Q. "Defining and Quantifying AND-OR Interactions for Faithful and
   Concise Explanation of DNNs." arXiv:2304.13312, 2023.
"""

from psens.interactions.and_or import AndOrResult, SolverSettings, and_or, l1_objective
from psens.interactions.canonical import VertexResult, optimal_vertices, vertex_directions
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
    "VertexResult",
    "and_or",
    "inverse_mobius_and",
    "inverse_mobius_or",
    "l1_objective",
    "mobius_and",
    "mobius_and_transpose",
    "mobius_or",
    "mobius_or_transpose",
    "optimal_vertices",
    "reconstruct",
    "vertex_directions",
]
