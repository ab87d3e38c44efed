r"""AND / OR interaction transforms of games on the subset lattice (IPS paper §3.1, app. B–D).

Conventions (docs/conventions.md): a game of ``n`` players is an array ``v[..., 2**n]``
indexed by bitmask, bit ``i`` set = player ``i`` kept (unmasked); leading axes
are batch axes. All transforms cost :math:`O(n 2^n)` per game (in-place
butterflies, :mod:`psens.interactions._kernels`), never a dense
:math:`2^n \times 2^n` matrix.

* AND (Möbius / Harsanyi, paper eq. 2):
  :math:`I_{and}(S) = \sum_{T \subseteq S} (-1)^{|S|-|T|} v(T)`.
* OR (paper app. D): :math:`I_{or}(S) = -\sum_{T \subseteq S} (-1)^{|S|-|T|}
  v(N \setminus T)` for :math:`S \neq \emptyset`, and :math:`I_{or}(\emptyset) = v(\emptyset)`.
* Universal matching (theorem 3.1) with :math:`v = v_{and} + v_{or}`:
  :math:`v(T) = I_{and}(\emptyset) + I_{or}(\emptyset) + \sum_{\emptyset \neq S \subseteq T}
  I_{and}(S) + \sum_{S \cap T \neq \emptyset} I_{or}(S)`.

Every function returns a new array unless ``out=`` is given (``out`` may be the
input itself for an in-place transform). float32 stays float32; any other real
dtype becomes float64. A :class:`xarray.DataArray` with a ``subset`` dimension is
accepted and returned labelled.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
.. [2] Li and Zhang, arXiv:2304.13312, 2023; the full reference is in :mod:`psens.interactions`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from psens._validation import check_game, check_same_shape, fail
from psens.interactions import _kernels

__all__ = [
    "inverse_mobius_and",
    "inverse_mobius_or",
    "mobius_and",
    "mobius_and_transpose",
    "mobius_or",
    "mobius_or_transpose",
    "reconstruct",
]

SUBSET_DIM = "subset"


def _labelled(func: Callable) -> Callable:
    """Let ``func(v, *, out=None)`` take a DataArray with a ``subset`` dim (returned labelled)."""

    @functools.wraps(func)
    def wrapper(v, *, out=None):
        if type(v).__name__ == "DataArray":
            if out is not None:
                fail(func.__name__, "out= is not supported for DataArray input", "Drop out=")
            if SUBSET_DIM not in v.dims:
                fail(
                    func.__name__,
                    f"the DataArray has dims {v.dims} but no {SUBSET_DIM!r} dim",
                    f"Name the 2**n axis {SUBSET_DIM!r}",
                )
            moved = v.transpose(..., SUBSET_DIM)
            return moved.copy(data=func(moved.values)).transpose(*v.dims)
        return func(v, out=out)

    return wrapper


def _work(v, out, where: str, name: str = "v") -> tuple[np.ndarray, np.ndarray, int]:
    """Validate ``v``; return (result array, its 2-D C-contiguous view, n)."""
    a = np.asarray(v)
    n = check_game(a, where, name=name)
    dtype = np.float32 if a.dtype == np.float32 else np.float64
    if out is None:
        res = np.array(a, dtype=dtype, order="C", copy=True)
    else:
        if not isinstance(out, np.ndarray) or out.shape != a.shape or out.dtype != dtype:
            fail(
                where,
                f"out= must be a {dtype.__name__} array of shape {a.shape}",
                "Pass an array like np.empty_like(v, dtype=float)",
            )
        if not out.flags.c_contiguous:
            fail(where, "out= is not C-contiguous", "Pass np.ascontiguousarray(out)")
        if out is not a:
            out[...] = a
        res = out
    return res, res.reshape(-1, res.shape[-1]), n


@_labelled
def mobius_and(v, *, out: np.ndarray | None = None) -> np.ndarray:
    r"""AND interactions (Möbius transform): :math:`I(S) = \sum_{T\subseteq S}(-1)^{|S|-|T|}v(T)`.

    Parameters
    ----------
    v : array_like, shape (..., 2**n)
        Games indexed by bitmask (bit i = player i kept).
    out : ndarray, optional
        Where to write the result; may be ``v`` itself.

    Returns
    -------
    ndarray, shape (..., 2**n)

    Examples
    --------
    >>> mobius_and([0.0, 1.0, 2.0, 5.0])  # v(∅), v({0}), v({1}), v({0,1})
    array([0., 1., 2., 2.])
    """
    res, flat, n = _work(v, out, "mobius_and")
    _kernels.butterfly(flat, n, -1.0, False)
    return res


@_labelled
def inverse_mobius_and(I_and, *, out: np.ndarray | None = None) -> np.ndarray:
    r"""Zeta transform, the inverse of :func:`mobius_and`: :math:`v(T)=\sum_{S\subseteq T}I(S)`.

    Examples
    --------
    >>> inverse_mobius_and([0.0, 1.0, 2.0, 2.0])
    array([0., 1., 2., 5.])
    """
    res, flat, n = _work(I_and, out, "inverse_mobius_and", "I_and")
    _kernels.butterfly(flat, n, 1.0, False)
    return res


@_labelled
def mobius_and_transpose(g, *, out: np.ndarray | None = None) -> np.ndarray:
    r"""Transpose of :func:`mobius_and` (superset Möbius transform).

    .. math:: (M^\top g)(T) = \sum_{S\supseteq T}(-1)^{|S|-|T|}g(S)


    Used for the subgradient of :math:`\sum_S |I_{and}(S)|` (paper eq. 12).
    """
    res, flat, n = _work(g, out, "mobius_and_transpose", "g")
    _kernels.butterfly(flat, n, -1.0, True)
    return res


@_labelled
def mobius_or(v, *, out: np.ndarray | None = None) -> np.ndarray:
    r"""OR interactions (paper app. D).

    .. math::
        I_{or}(S) = -\sum_{T\subseteq S}(-1)^{|S|-|T|}\, v(N\setminus T)\quad (S\neq\emptyset),
        \qquad I_{or}(\emptyset) = v(\emptyset).

    Computed as a superset-Möbius butterfly followed by the complement map
    :math:`S \mapsto N \setminus S` (a reversal of the bitmask axis).

    Examples
    --------
    >>> mobius_or([0.0, 1.0, 1.0, 1.0]) + 0.0  # v = 1 once any player is present: OR of {0,1}
    array([0., 0., 0., 1.])
    """
    res, flat, n = _work(v, out, "mobius_or")
    _kernels.or_rows(flat, n, 0)
    return res


@_labelled
def inverse_mobius_or(I_or, *, out: np.ndarray | None = None) -> np.ndarray:
    r"""Inverse of :func:`mobius_or`.

    .. math:: v(T) = I(\emptyset) + \sum_{S\cap T\neq\emptyset} I(S)


    Examples
    --------
    >>> inverse_mobius_or([0.0, 0.0, 0.0, 1.0])
    array([0., 1., 1., 1.])
    """
    res, flat, n = _work(I_or, out, "inverse_mobius_or", "I_or")
    _kernels.or_rows(flat, n, 2)
    return res


@_labelled
def mobius_or_transpose(g, *, out: np.ndarray | None = None) -> np.ndarray:
    r"""Transpose of :func:`mobius_or` (for the subgradient of :math:`\sum_S |I_{or}(S)|`).

    With :math:`L_{or} v = P(-R\,M^\top v) + e_\emptyset v(\emptyset)` (``R`` the complement
    map, ``P`` zeroing the empty set), :math:`L_{or}^\top g = -M R P g + e_\emptyset g(\emptyset)`.
    """
    res, flat, n = _work(g, out, "mobius_or_transpose", "g")
    _kernels.or_rows(flat, n, 1)
    return res


def reconstruct(I_and, I_or) -> np.ndarray:
    r"""The logical model's output on every subset (universal matching, theorem 3.1).

    .. math::
        \phi(T) = I_{and}(\emptyset) + I_{or}(\emptyset)
        + \sum_{\emptyset\neq S\subseteq T} I_{and}(S) + \sum_{S\cap T\neq\emptyset} I_{or}(S)

    ``reconstruct(mobius_and(v_and), mobius_or(v_or)) == v_and + v_or`` to float precision.
    DataArrays with a ``subset`` dim are accepted.
    """
    if type(I_and).__name__ == "DataArray":
        return inverse_mobius_and(I_and) + inverse_mobius_or(I_or)
    check_same_shape(np.asarray(I_and), np.asarray(I_or), "reconstruct", ("I_and", "I_or"))
    return inverse_mobius_and(I_and) + inverse_mobius_or(I_or)
