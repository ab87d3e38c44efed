r"""The ``ds.psens`` accessor: a run Dataset read as an analyst would — words, pairs, tidy rows.

Registered on every :class:`xarray.Dataset` when :mod:`psens` is imported::

    ds = psens.open_run("runs/demo.zarr")
    ds.psens.words(0b101, sample="q1")          # ['lay', 'NOT']: the words of subset S
    ds.psens.labels(sample="q1")                # label of every subset: '{lay, NOT}'
    ds.psens.sel_pair("ips1", "ips4")           # the run at one template pair, by name
    ds.psens.to_frame(salient_only=True, order="low")   # one row per interaction
    ds.psens.headline()                         # IPS by order, floor, accuracy, caveats

Interactions in :meth:`PsensAccessor.to_frame` carry the quantities of the IPS paper [1]_:
the raw effect :math:`I(S)`, the normalised :math:`\tilde I(S)` (§3.2, per game over all AND
and OR interactions with :math:`S \neq \emptyset`), salience :math:`|\tilde I(S)| > \tau` and
the order band of §4.3.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from psens._validation import check_in_interval, fail
from psens.ips.metric import (
    ORDER_LEVELS,
    n_players,
    normalize,
    order_band,
    order_masks,
    order_of_subsets,
    select_solver,
)
from psens.ips.tables import subset_label
from psens.settings import run_settings, tau_of
from psens.store.labels import model_names
from psens.store.pairs import pair_label, resolve_pair

__all__ = ["PsensAccessor", "PsensArrayAccessor", "tidy_frame"]

_KINDS = ("AND", "OR")


def _check_run(ds: xr.Dataset, where: str, need: Sequence[str]) -> None:
    missing = [n for n in need if n not in ds.variables]
    if missing:
        fail(where, f"the Dataset has no {missing}", "Pass a psens run (psens.open_run)")


@xr.register_dataset_accessor("psens")
class PsensAccessor:
    """Analyst's helpers on a psens run Dataset (``ds.psens``)."""

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    # ------------------------------------------------------------------------- words

    def _words_of(self, sample: Any) -> list[str]:
        ds = self._ds
        _check_run(ds, "ds.psens.words", ["word"])
        word = ds["word"]
        if "sample" in word.dims:
            if sample is None:
                if ds.sizes.get("sample", 1) != 1:
                    fail("ds.psens.words", "the run has several samples", "Pass sample=<id>")
                word = word.isel(sample=0)
            else:
                have = [str(s) for s in ds["sample"].values]
                if str(sample) not in have:
                    fail("ds.psens.words", f"sample {sample!r} is not in the run", "Check the id")
                word = word.isel(sample=have.index(str(sample)))
        words = [str(w) for w in np.asarray(word.values).ravel()]
        n = sum(1 for w in words if w)
        return words[:n]

    def words(self, subset: int, sample: Any = None) -> list[str]:
        """The words of the interaction ``S`` = ``subset`` (bit i = word i) of ``sample``."""
        words = self._words_of(sample)
        subset = int(subset)
        if subset < 0 or subset >= 1 << len(words):
            fail(
                "ds.psens.words",
                f"subset {subset} is outside the sample's {len(words)} words",
                f"Use 0 <= subset < {1 << len(words)}",
            )
        return [w for i, w in enumerate(words) if (subset >> i) & 1]

    def labels(self, sample: Any = None) -> xr.DataArray:
        """The label ``'{w1, w2}'`` of every subset of ``sample``'s own words (``subset`` dim)."""
        words = self._words_of(sample)
        size = 1 << len(words)
        bits = (np.arange(size)[:, None] >> np.arange(len(words))) & 1
        text = [
            "{" + ", ".join(w for w, b in zip(words, row, strict=True) if b) + "}" for row in bits
        ]
        return xr.DataArray(
            np.asarray(text, dtype=object), dims="subset", coords={"subset": np.arange(size)}
        )

    # ------------------------------------------------------------------------- pairs

    def pair(self, a: str | tuple[str, str], b: str | None = None) -> int:
        """Index of the unordered template pair ``{a, b}`` on the ``pair`` dim.

        Either two template names (``pair("ips4", "ips1")``) or one pair name in either order
        with ``|`` or ``-`` (``pair("ips1|ips4")``, ``pair("ips4-ips1")``); see
        :func:`psens.store.pairs.resolve_pair`.
        """
        ds = self._ds
        _check_run(ds, "ds.psens.pair", ["template_a", "template_b"])
        query = a if b is None else (str(a), str(b))
        return resolve_pair(
            query, ds["template_a"].values, ds["template_b"].values, "ds.psens.pair"
        )

    def sel_solver(self, solver: str | None = None) -> xr.Dataset:
        """The run with one solver's interactions (default: the first);
        :func:`psens.ips.select_solver`."""
        return select_solver(self._ds, solver)

    def sel_pair(self, a: str | tuple[str, str], b: str | None = None) -> xr.Dataset:
        """The run at the template pair ``{a, b}`` (variables over ``pair``), by name:
        ``sel_pair("ips1", "ips4")`` or ``sel_pair("ips1-ips4")``."""
        return self._ds.isel(pair=self.pair(a, b))

    def pair_labels(self) -> list[str]:
        """``"a|b"`` labels of the ``pair`` dim: the names under which IPS results
        (:func:`psens.ips.ips_pairs`, :func:`psens.ips.interaction_classes`) index it."""
        ds = self._ds
        _check_run(ds, "ds.psens.pair_labels", ["template_a", "template_b"])
        return [
            pair_label(x, y)
            for x, y in zip(ds["template_a"].values, ds["template_b"].values, strict=True)
        ]

    # ------------------------------------------------------------------------- headline

    def headline(self, **kwargs: Any) -> pd.DataFrame:
        """The run's headline per model and order band, with what it pools, the noise floor,
        accuracy and caveats: :func:`psens.ips.headline.headline` (keywords as there)."""
        from psens.ips.headline import headline

        return headline(self._ds, **kwargs)

    # ------------------------------------------------------------------------- tidy rows

    def to_frame(
        self,
        tau: float | None = None,
        *,
        salient_only: bool = False,
        order: str | None = None,
        words: bool = True,
        solver: str | None = None,
    ) -> pd.DataFrame:
        r"""One row per model × sample × [shot ×] template × interaction (AND or OR, ``S≠∅``;
        ``S = ∅`` too in a run with ``normalization = "all"``), normalised as the run says.

        Parameters
        ----------
        tau : float in (0, 1)
            Salience threshold on :math:`|\tilde I|` (IPS paper §4.1); default: the run's
            own (:func:`psens.settings.tau_of`).
        salient_only : bool
            Keep only salient interactions.
        order : {"all", "low", "mid", "high"}, optional
            Keep only interactions of this order band (§4.3; ``n`` the sample's own).
        words : bool
            Add the ``words`` column (the subset's words, ``'{w1, w2}'``).
        solver : str, optional
            Whose interactions, in a run with several (default: the first;
            :func:`psens.ips.select_solver`).

        A Dataset that is not a run (a result such as
        :func:`psens.ips.interaction_classes`) gives :func:`tidy_frame` rows instead.

        Returns
        -------
        pandas.DataFrame
            Columns ``model, sample, [shot,] template, kind, subset, size, order, value,
            normalized, salient[, words]``; the prompts and other per-block data are not
            repeated (join on ``sample``/``template`` when needed). Pending and failed blocks
            (NaN interactions) give no rows.
        """
        tau = tau_of(self._ds, tau)
        ds = self._ds
        where = "ds.psens.to_frame"
        if not {"I_and", "I_or"} & set(ds.variables) and ds.data_vars:
            return tidy_frame(ds)  # a result (e.g. interaction_classes), not a run
        _check_run(ds, where, ["I_and", "I_or"])
        ds = select_solver(ds, solver)
        check_in_interval(tau, where, "tau", 0.0, 1.0)
        if order is not None and order not in ORDER_LEVELS:
            fail(where, f"order={order!r} is unknown", f"Use one of {ORDER_LEVELS} or None")
        a_da = ds["I_and"].transpose(..., "template", "subset")
        o_da = ds["I_or"].transpose(..., "template", "subset")
        dims = [d for d in a_da.dims[:-1] if d != "model"]  # of one model's block
        frames = []
        normalization = run_settings(ds).normalization
        blocks = a_da.sizes.get("model", 1)
        for m in range(blocks):  # one model at a time: a lazily opened run is not loaded whole
            sel = {"model": m} if "model" in a_da.dims else {}
            a = np.asarray(a_da.isel(sel).values, dtype=float)
            o = np.asarray(o_da.isel(sel).values, dtype=float)
            na, no = normalize(a, o, normalization)
            size = a.shape[-1]
            n = n_players(a)  # per game
            band = None if order in (None, "all") else order
            inside = order_masks(n, size, band, normalization)  # within n, of the band
            for kind, raw, norm in (("AND", a, na), ("OR", o, no)):
                keep = inside & np.isfinite(raw)
                if salient_only:
                    keep &= np.abs(norm) > tau
                idx = np.nonzero(keep)
                frame = {
                    d: np.asarray(a_da[d].values)[idx[k]] if d in a_da.coords else idx[k]
                    for k, d in enumerate(dims)
                }
                row = {"model": model_names(ds)[m]} if "model" in a_da.dims else {}
                frames.append(
                    pd.DataFrame(
                        {
                            **row,
                            **frame,
                            "kind": kind,
                            "subset": idx[-1],
                            "value": raw[idx],
                            "normalized": norm[idx],
                        }
                    )
                )
        out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if out.empty:
            return out
        sizes = order_of_subsets(int(out["subset"].max()) + 1)
        out.insert(out.columns.get_loc("subset") + 1, "size", sizes[out["subset"].to_numpy()])
        out["order"] = _band(out, ds)
        out["salient"] = np.abs(out["normalized"].to_numpy()) > tau
        for col in ("sample", "template"):
            if col in out:
                out[col] = out[col].astype(str)
        if words and "word" in ds.variables:
            out["words"] = _word_labels(out, ds)
        cols = [c for c in ("model", "sample", "shot", "template") if c in out]
        rest = [c for c in out.columns if c not in cols]
        return out[cols + rest]


def tidy_frame(obj: xr.DataArray | xr.Dataset, *, metadata: bool = False) -> pd.DataFrame:
    """Rows of a result: one per element, a column per dim (its labels) and one per variable.

    Unlike xarray's ``to_dataframe``, coordinates that are not dims are left out: a result
    keeps the run's model metadata (``family, series, kind, arch, params, active_params``)
    and a pair's ``pair_a``/``pair_b`` along its dims, and those would repeat on every row;
    ``metadata=True`` keeps them. An unnamed DataArray's column is ``value``.

    Examples
    --------
    >>> import xarray as xr
    >>> da = xr.DataArray([[1.0, 2.0]], dims=("model", "pair"), name="ips",
    ...     coords={"model": ["m"], "family": ("model", ["F"]), "pair": ["a|b", "a|c"]})
    >>> tidy_frame(da).columns.tolist()
    ['model', 'pair', 'ips']
    """
    if isinstance(obj, xr.DataArray):
        obj = obj.to_dataset(name=obj.name if obj.name is not None else "value")
    if not metadata:
        obj = obj.drop_vars([c for c in obj.coords if c not in obj.dims])
    if not obj.dims:
        return pd.DataFrame({k: [v.item()] for k, v in obj.data_vars.items()})
    return obj.to_dataframe().reset_index()


@xr.register_dataarray_accessor("psens")
class PsensArrayAccessor:
    """Helpers on a result DataArray (``res.psens``), e.g. of :func:`psens.ips.ips_pairs`."""

    def __init__(self, da: xr.DataArray) -> None:
        self._da = da

    def to_frame(self, *, metadata: bool = False) -> pd.DataFrame:
        """One row per element, a column per dim and the values, without the metadata
        coordinates xarray's ``to_dataframe`` repeats on every row (:func:`tidy_frame`)::

            psens.ips.ips_pairs(ds, tau=0.1).psens.to_frame()
            # columns model, sample, [shot,] pair, ips
        """
        return tidy_frame(self._da, metadata=metadata)


def _band(frame: pd.DataFrame, ds: xr.Dataset) -> np.ndarray:
    """The order band (low/mid/high) of each row, from the sample's own ``n``."""
    if "n_vars" in ds.variables and "sample" in frame:
        n_of = {
            str(s): int(n) for s, n in zip(ds["sample"].values, ds["n_vars"].values, strict=True)
        }
        n = frame["sample"].map(n_of).to_numpy()
    else:
        n = np.full(len(frame), int(np.log2(ds.sizes["subset"])))
    return order_band(frame["size"].to_numpy(), n)


def _word_labels(frame: pd.DataFrame, ds: xr.Dataset) -> np.ndarray:
    """``'{w1, w2}'`` of each row's subset, built once per (sample, subset)."""
    acc = ds.psens
    out = np.empty(len(frame), dtype=object)
    keys = frame["sample"].to_numpy() if "sample" in frame else np.zeros(len(frame))
    subsets = frame["subset"].to_numpy()
    for sample, rows in pd.Series(keys).groupby(keys, sort=False).indices.items():
        words = acc._words_of(sample if "sample" in frame else None)
        uniq, inverse = np.unique(subsets[rows], return_inverse=True)  # label each subset once
        text = np.array([subset_label(int(u), words) for u in uniq], dtype=object)
        out[rows] = text[inverse]
    return out
