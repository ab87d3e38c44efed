r"""The names a run is read under: template pairs by label, interactions by order band,
format-space templates by their readable ids (part of the run schema, so
:func:`psens.open_run` applies it; also ``psens.ips.labels``), and its models in order
(:func:`model_names`, the one way code reads them).

Every run Dataset (:func:`psens.open_run`, :func:`psens.run`, the synthetic runs) goes
through :func:`label_run`, so these work on all of them::

    ds.sel(pair="ips1|ips4")                        # also "ips4-ips1" (psens.store.pairs)
    ds["I_and"].where(ds.order_band == "low")       # the low-order interactions only
    ds.psens.to_frame().query("order == 'high'")    # the same band names as rows

``order_band(sample, subset)`` names the order band of IPS paper §4.3 of each subset
:math:`S` in the sample's own game of :math:`n` words (``n_vars``):

.. math::
    \mathrm{low}: 1 \le |S| \le \lfloor n/3 \rfloor,\quad
    \mathrm{mid}: \lfloor n/3 \rfloor < |S| \le \lfloor 2n/3 \rfloor,\quad
    \mathrm{high}: |S| > \lfloor 2n/3 \rfloor

and ``""`` for :math:`S = \emptyset` and for subsets beyond the sample's ``n`` (no band; the
values the ``order=`` argument of every IPS function takes are the same names). It is
derived from ``n_vars`` and ``order``, never stored: a lazily opened run gets a lazy
coordinate (one chunk per sample block), computed only where it is used.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from psens._validation import fail
from psens.store.pairs import index_run_pairs

__all__ = [
    "NO_BAND",
    "ORDER_BAND",
    "label_run",
    "model_names",
    "order_band",
    "order_bands",
    "order_of_subsets",
]

#: the coordinate's name (the run's ``order`` is the popcount; the floor's ``band`` dim
#: holds the same names with "all")
ORDER_BAND = "order_band"
#: the band of the empty set and of subsets beyond a sample's ``n``
NO_BAND = ""


def model_names(run: Any) -> list[str]:
    r"""The model names of a run, in the run's order.

    .. math::
        \mathrm{model\_names}(run) = [\mathrm{str}(m_0), \dots, \mathrm{str}(m_{M-1})]

    over the ``model`` coordinate :math:`m_0, \dots, m_{M-1}`; the one place that reads it,
    so every loop over a run's models (tables, charts, widgets, notebooks) names them alike.

    Parameters
    ----------
    run : xarray.Dataset or xarray.DataArray
        A run, a slice of one or a result over models (anything with a ``model``
        coordinate; a scalar one, left by ``ds.sel(model=...)``, gives one name).

    Returns
    -------
    list of str
        The names, in the order of the ``model`` coordinate.

    References
    ----------
    .. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.

    Examples
    --------
    >>> from psens.synthetic import synthetic_run
    >>> model_names(synthetic_run(n_samples=1))[:2]
    ['toy-7b', 'toy-7b-instruct']
    """
    coords = getattr(run, "coords", None)
    if coords is None or "model" not in coords:
        fail(
            "model_names",
            f"a {type(run).__name__} without a model coordinate was given",
            "Pass a run Dataset (or a result with a model dim)",
        )
    return [str(m) for m in np.atleast_1d(np.asarray(coords["model"].values))]


def order_of_subsets(size: int) -> np.ndarray:
    """Popcount ``|S|`` of every bitmask ``0 .. size-1``."""
    idx = np.arange(size, dtype=np.int64)
    order = np.zeros(size, dtype=np.int64)
    while idx.any():
        order += idx & 1
        idx >>= 1
    return order


def order_band(size, n) -> np.ndarray:
    r"""Order band of interactions with :math:`|S|` = ``size`` in games of ``n`` players (§4.3).

    low :math:`|S| \le \lfloor n/3 \rfloor`, mid :math:`\le \lfloor 2n/3 \rfloor`, high above
    (``size`` and ``n`` broadcast).

    Examples
    --------
    >>> order_band(np.arange(1, 7), 6).tolist()
    ['low', 'low', 'mid', 'mid', 'high', 'high']
    """
    k, n = np.asarray(size), np.asarray(n)
    lo, hi = n // 3, (2 * n) // 3
    return np.where(k <= lo, "low", np.where(k <= hi, "mid", "high"))


def order_bands(n_vars: Any, size: int) -> np.ndarray:
    """``[sample, subset]`` object array: the order band of every subset (§4.3) in each
    sample's game of ``n_vars`` players, :data:`NO_BAND` for ∅ and beyond ``n``.

    Examples
    --------
    >>> bands = order_bands([3, 2], 8)
    >>> bands[0].tolist()
    ['', 'low', 'low', 'mid', 'low', 'mid', 'mid', 'high']
    >>> bands[1].tolist()  # n = 2: floor(2/3) = 0, so no low band
    ['', 'mid', 'mid', 'high', '', '', '', '']
    """
    n = np.asarray(n_vars, dtype=np.int64).reshape(-1, 1)
    k = order_of_subsets(size)[None, :]
    out = order_band(k, n).astype(object)
    out[(k == 0) | (np.arange(size)[None, :] >= (1 << n))] = NO_BAND
    return out


def _band_coord(ds) -> Any:
    """The ``order_band`` values of ``ds``: numpy, or dask (one chunk per chunk of ``sample``
    in the run's interactions) when the run is lazily opened."""
    n = np.asarray(ds["n_vars"].values)
    size = ds.sizes["subset"]
    game = ds["I_and"].data if "I_and" in ds else None
    chunks = getattr(game, "chunks", None)
    if chunks is None:
        return order_bands(n, size)
    import dask.array as da

    by_sample = chunks[ds["I_and"].dims.index("sample")]
    lazy_n = da.from_array(n, chunks=(by_sample,))
    return lazy_n.map_blocks(
        lambda block: order_bands(block, size),
        dtype=object,
        chunks=(by_sample, (size,)),
        new_axis=1,
        meta=np.empty((0, 0), dtype=object),
    )


def _readable_templates(ds):
    """``ds`` with format-space templates named by their readable ids: a run written by an
    earlier psens names them by coded ids (``fmt-000010000000``,
    :func:`psens.formats.grammar.format_label`)."""
    if "template" not in ds.coords:
        return ds
    from psens.formats.grammar import format_label

    old = [str(t) for t in ds["template"].values]
    new = {t: format_label(t) for t in old}
    if all(new[t] == t for t in old):
        return ds
    coords = {"template": np.asarray([new[t] for t in old], dtype=object)}
    for name in ("template_a", "template_b"):
        if name in ds.coords:
            values = [new.get(str(t), str(t)) for t in ds[name].values]
            coords[name] = (ds[name].dims, np.asarray(values, dtype=object))
    return ds.assign_coords(coords)


def label_run(ds):
    """``ds`` with pairs labelled ``"a|b"`` and indexed by name
    (:func:`psens.store.pairs.index_run_pairs`: runs written with pair numbers relabelled),
    format-space templates under their readable ids (runs of earlier versions relabelled)
    and the ``order_band(sample, subset)`` coordinate (when the run has ``n_vars``)."""
    ds = index_run_pairs(_readable_templates(ds))
    if {"n_vars", "subset"} <= set(ds.variables) and ORDER_BAND not in ds.coords:
        ds = ds.assign_coords({ORDER_BAND: (("sample", "subset"), _band_coord(ds))})
    return ds
