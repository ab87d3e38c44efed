"""Converters between psens' bitmask order and other interaction libraries.

* psens: index ``sum_i 2**i`` over kept players ``i`` (player 0 = least significant bit).
* The interaction group's public code: player 0 in the **most** significant bit
  (:func:`to_msb_order` / :func:`from_msb_order`).
* shapiq: :class:`shapiq.InteractionValues` with ``index="Moebius"`` (optional dependency,
  ``pip install psens[interop]``).

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

import numpy as np

from psens._validation import check_game, fail

__all__ = ["bit_reversal", "from_msb_order", "from_shapiq", "to_msb_order", "to_shapiq"]


def bit_reversal(n: int) -> np.ndarray:
    """Permutation ``p`` with ``p[i]`` = ``i`` with its ``n`` bits reversed (an involution)."""
    idx = np.arange(1 << n, dtype=np.int64)
    out = np.zeros_like(idx)
    for bit in range(n):
        out |= ((idx >> bit) & 1) << (n - 1 - bit)
    return out


def to_msb_order(x) -> np.ndarray:
    """Reorder the last axis from psens' LSB-first bitmasks to MSB-first (player 0 = top bit).

    Examples
    --------
    >>> to_msb_order([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).tolist()
    [0.0, 4.0, 2.0, 6.0, 1.0, 5.0, 3.0, 7.0]
    """
    a = np.asarray(x)
    n = check_game(a, "to_msb_order", name="x", allow_nan=True)
    return a[..., bit_reversal(n)]


def from_msb_order(x) -> np.ndarray:
    """Inverse of :func:`to_msb_order` (the same permutation: bit reversal is an involution)."""
    return to_msb_order(x)


def _shapiq():
    try:
        import shapiq
    except ImportError:  # pragma: no cover - depends on the environment
        fail(
            "to_shapiq",
            "shapiq is not installed",
            "Install it with `pip install psens[interop]` (or `pip install shapiq`)",
            ImportError,
        )
    return shapiq


def to_shapiq(I_and, *, estimated: bool = False):
    """One game's AND (Möbius) interactions as ``shapiq.InteractionValues(index="Moebius")``.

    Parameters
    ----------
    I_and : array_like, shape (2**n,)
        Möbius coefficients in psens' bitmask order (e.g. ``mobius_and(v)``).
    """
    shapiq = _shapiq()
    a = np.asarray(I_and, dtype=float)
    if a.ndim != 1:
        fail("to_shapiq", f"I_and has shape {a.shape}", "Convert one game at a time (1-D array)")
    n = check_game(a, "to_shapiq", name="I_and")
    masks = np.arange(1 << n)
    players = [tuple(i for i in range(n) if m >> i & 1) for m in masks]
    lookup = {p: k for k, p in enumerate(players)}
    return shapiq.InteractionValues(
        values=a.copy(),
        index="Moebius",
        max_order=n,
        min_order=0,
        n_players=n,
        interaction_lookup=lookup,
        estimated=estimated,
        baseline_value=float(a[0]),
    )


def from_shapiq(values) -> np.ndarray:
    """A ``shapiq.InteractionValues`` (any index) as a psens bitmask array ``[2**n]``.

    Coalitions missing from the object (e.g. beyond its ``max_order``) are 0.
    """
    n = int(values.n_players)
    out = np.zeros(1 << n)
    for coalition, pos in values.interaction_lookup.items():
        out[sum(1 << int(i) for i in coalition)] = values.values[pos]
    return out
