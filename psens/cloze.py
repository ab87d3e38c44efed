r"""The cloze formulation (CF): each option's text scored as a continuation, and its v.

A run with ``answer = "cloze"`` shows the question without its options
(:func:`psens.prompts.cloze_form`) and scores every option ``o`` as a continuation of each
masked prompt :math:`x_T` (:meth:`psens.models.Scorer.choice_logprobs`):

.. math::

    \ell_o(x_T) = \sum_{j=1}^{|c_o|} \log P(c_{o,j} \mid x_T, c_{o,<j}),

with :math:`c_o` the tokens of the target delimiter and the option's text. The scores are
normalised (``cloze_norm``) as in lm-evaluation-harness and OLMES,

.. math::

    s_o = \ell_o / d_o, \qquad d_o = \begin{cases} 1 & \texttt{"sum"} \text{ (lm-eval
    \texttt{acc})} \\ |c_o| & \texttt{"token"} \text{ (mean per token)} \\ b_o &
    \texttt{"char"} \text{ (per byte of the option's text, lm-eval \texttt{acc\_norm})}
    \end{cases}

and the value function is the log-odds of the correct option ``y`` under the softmax over
the options,

.. math::

    \tilde p = \operatorname{softmax}_o(s_o), \qquad
    v(x_T) = \log \tilde p_y - \log(1 - \tilde p_y)
           = s_y - \log \sum_{o \ne y} e^{s_o},

computed in the second form, which is exact and finite whenever the scores are (no clamp
is needed, unlike the letter formulation's softmax over the whole vocabulary). The
prediction is :math:`\arg\max_o s_o` on the unmasked prompt.

lm-eval's ``acc_norm`` divides by the option's length in characters; psens divides by its
UTF-8 bytes (lm-eval's ``acc_bytes``), the same for ASCII text. The store keeps
:math:`\ell_o` for every mask (``option_loglik``), :math:`|c_o|` (``option_tokens``) and
:math:`b_o` (``option_bytes``), so :func:`rescore` gives v, predictions and accuracy under
any normalisation without a model.

References
----------
.. [1] Gu, Y., Tafjord, O., Kuehl, B., Haddad, D., Dodge, J., and Hajishirzi, H. "OLMES: A
   Standard for Language Model Evaluations." arXiv:2406.08446, 2024.
.. [2] Gao, L., Tow, J., Abbasi, B., et al. "The Language Model Evaluation Harness"
   (lm-evaluation-harness), Zenodo, doi:10.5281/zenodo.10256836, 2024.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "ANSWERS",
    "CLOZE_NORMS",
    "DEFAULT_ANSWER",
    "DEFAULT_CLOZE_NORM",
    "cloze_value",
    "option_probs",
    "option_scores",
    "rescore",
]

from psens.settings import ANSWERS, CLOZE_NORMS, DEFAULT_ANSWER, DEFAULT_CLOZE_NORM, run_settings

_OPTION = "option"


def _check_norm(norm: str, where: str) -> None:
    if norm not in CLOZE_NORMS:
        from psens._validation import fail

        fail(where, f"cloze_norm = {norm!r} is not known", f"Use one of {list(CLOZE_NORMS)}")


def option_scores(loglik: Any, tokens: Any, nbytes: Any, norm: str = DEFAULT_CLOZE_NORM) -> Any:
    """The normalised scores :math:`s_o = \\ell_o / d_o` (module docstring).

    Parameters
    ----------
    loglik : array or DataArray, options on the last axis (a DataArray: dim ``option``)
        Summed log-likelihoods :math:`\\ell_o`; NaN for options an item does not have.
    tokens, nbytes : arrays broadcastable to ``loglik``
        Tokens of each continuation and bytes of each option's text (0 where absent).
    norm : {"sum", "token", "char"}

    Returns
    -------
    Same type as ``loglik``; NaN where an option is absent.
    """
    _check_norm(norm, "psens.cloze.option_scores")
    if norm == "sum":
        return loglik * 1.0
    length = tokens if norm == "token" else nbytes
    with np.errstate(invalid="ignore", divide="ignore"):
        return loglik / length


def option_probs(loglik: Any, tokens: Any, nbytes: Any, norm: str = DEFAULT_CLOZE_NORM):
    """p̃ = softmax over the options of their normalised scores (last axis; absent options,
    NaN, get 0), as a numpy array; the prediction is its argmax."""
    s = np.asarray(option_scores(loglik, tokens, nbytes, norm), dtype=np.float64)
    s = np.where(np.isnan(s), -np.inf, s)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _value(scores: np.ndarray, answer: np.ndarray) -> np.ndarray:
    """``s_y - logsumexp_{o != y} s_o`` over the last axis (NaN scores: absent options)."""
    s = np.where(np.isnan(scores), -np.inf, scores)
    idx = np.broadcast_to(np.asarray(answer, dtype=np.int64)[..., None], (*s.shape[:-1], 1))
    own = np.take_along_axis(s, idx, axis=-1)[..., 0]
    others = s.copy()
    np.put_along_axis(others, idx, -np.inf, axis=-1)
    top = np.max(others, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rest = np.log(np.sum(np.exp(others - top), axis=-1)) + top[..., 0]
        out = own - rest
    return np.where(np.isnan(scores).all(axis=-1), np.nan, out)


def cloze_value(
    loglik: Any,
    tokens: Any,
    nbytes: Any,
    answer: Any,
    norm: str = DEFAULT_CLOZE_NORM,
) -> Any:
    """v(x_T) of the cloze formulation: the log-odds of the correct option (module docstring).

    Parameters
    ----------
    loglik : ndarray (..., options) or DataArray with dim ``option``
        Summed log-likelihoods of the options' continuations (NaN: option absent).
    tokens, nbytes : array-like broadcastable to ``loglik``
        The continuations' token counts and the options' text bytes.
    answer : int or int array broadcastable to ``loglik`` without its option axis
        Position of the correct option.
    norm : {"sum", "token", "char"}
        The normalisation (:data:`CLOZE_NORMS`).

    Returns
    -------
    ndarray (...,) or DataArray without ``option``
        :math:`s_y - \\log \\sum_{o \\ne y} e^{s_o}` (= log p̃ − log(1 − p̃)).

    Examples
    --------
    >>> ll = np.array([[-2.0, -1.0, -3.0]])
    >>> float(cloze_value(ll, [1, 1, 1], [4, 2, 6], answer=1, norm="sum")[0])  # doctest: +ELLIPSIS
    0.68...
    """
    scores = option_scores(loglik, tokens, nbytes, norm)
    try:
        import xarray as xr
    except ImportError:  # pragma: no cover - xarray is a dependency
        xr = None
    if xr is not None and isinstance(scores, xr.DataArray):
        return xr.apply_ufunc(
            _value,
            scores,
            answer,
            input_core_dims=[[_OPTION], []],
            keep_attrs=False,
            dask="parallelized",
            output_dtypes=[np.float64],
        )
    return _value(np.asarray(scores, dtype=np.float64), np.asarray(answer))


def rescore(ds, cloze_norm: str | None = None):
    """v, predictions, correctness and accuracy of a cloze run under a normalisation,
    from its store alone (no model).

    Parameters
    ----------
    ds : xarray.Dataset
        A cloze run (:func:`psens.open_run`), with ``option_loglik``, ``option_tokens``,
        ``option_bytes``, ``option_label`` and ``answer_option``.
    cloze_norm : {"sum", "token", "char"}, optional
        Default: the run's own (:func:`psens.settings.run_settings`).

    Returns
    -------
    xarray.Dataset
        ``v`` (like the run's: NaN beyond a sample's subsets), ``prediction`` (the label of
        the best option on the unmasked prompt), ``correct`` (1.0 / 0.0), ``confidence``
        (:math:`\\max_o \\tilde p_o` on the unmasked prompt: the probability the model gives
        the option it answers), ``accuracy`` (model) the mean of ``correct`` over samples,
        shots and templates; attrs ``cloze_norm``.
    """
    import xarray as xr

    from psens._validation import fail

    where = "psens.cloze.rescore"
    if "option_loglik" not in ds:
        fail(
            where, "the run has no option log-likelihoods", 'Pass a run made with answer = "cloze"'
        )
    norm = run_settings(ds).cloze_norm if cloze_norm is None else cloze_norm
    _check_norm(norm, where)
    ll = ds["option_loglik"]
    v = cloze_value(ll, ds["option_tokens"], ds["option_bytes"], ds["answer_option"], norm)
    full = (2 ** ds["n_vars"]) - 1  # the unmasked prompt of each sample
    last = ll.isel(subset=full).drop_vars(["subset", "order", "order_band"], errors="ignore")
    scores = option_scores(last, ds["option_tokens"], ds["option_bytes"], norm).transpose(
        ..., _OPTION
    )
    filled = scores.fillna(-np.inf)
    best = filled.argmax(_OPTION)
    done = np.isfinite(filled).any(_OPTION)
    labels = ds["option_label"].transpose("sample", _OPTION).values
    sample_axis = list(best.dims).index("sample")
    idx = np.moveaxis(best.values, sample_axis, -1)
    rows = np.arange(labels.shape[0])
    names = np.moveaxis(labels[rows, idx], -1, sample_axis)
    prediction = xr.where(done, xr.DataArray(names, dims=best.dims, coords=best.coords), "")
    correct = xr.where(done, (best == ds["answer_option"]).astype(np.float64), np.nan)
    with np.errstate(invalid="ignore"):  # an item not scored yet: every score -inf
        probs = option_probs(filled.values, 0.0, 0.0, "sum")  # the scores are normalised
    top = xr.DataArray(probs.max(axis=-1), dims=best.dims, coords=best.coords)
    confidence = xr.where(done, top, np.nan)
    keep = [d for d in correct.dims if d != "model"]
    out = xr.Dataset(
        {
            "v": v.where(ds["v"].notnull()),
            "prediction": prediction.astype(object),
            "correct": correct,
            "confidence": confidence,
            "accuracy": correct.mean(keep),
        }
    )
    out.attrs["cloze_norm"] = norm
    return out
