r"""The papers' claims as measured quantities: one function computes each, with its CI.

Each function returns one table per model with the quantity the claim is about, its
percentile bootstrap CI over items, the claim in words (``claim``), this run's number in
words (``measured``) and a ``verdict`` through the one rule of :func:`psens.stats.is_finding`
(its sentence :func:`psens.stats.change_verdict`): a CI strictly on one side of 0 and, where
there is a test, ``p < 0.05``. A model whose IPS is not a finding
(:func:`psens.ips.verdicts.findings` of :func:`psens.ips.headline.headline`: not above its
noise floor, one majority answer, accuracy at or below chance, …) keeps its numbers but gets
the verdict ``"cannot test: <reason>"``. ``holds`` is True for a finding in the claim's
direction, False otherwise (within noise, undefined or the opposite) and None when the claim
cannot be tested.

* :func:`order_claim` — fig. 9 of [1]_: low-order interactions are the least sensitive and
  high-order ones the most. Per item :math:`x`, with :math:`\mathrm{IPS}_b(x)` the IPS (eq. 3)
  over the salient interactions of order band :math:`b` (:func:`psens.ips.sample_ips`),

  .. math::
      d_{\mathrm{high}}(x) = \mathrm{IPS}_{\mathrm{high}}(x) - \mathrm{IPS}_{\mathrm{low}}(x),
      \qquad d_{\mathrm{mid}}(x) = \mathrm{IPS}_{\mathrm{mid}}(x) - \mathrm{IPS}_{\mathrm{low}}(x),

  over the items where both bands are defined; :math:`\bar d` with its bootstrap CI and the
  two-sided sign-flip p-value (:func:`psens.stats.paired_test`).
* :func:`few_shot_claim` — fig. 8 of [1]_: few-shot prompts lower IPS. Per model and
  :math:`k > 0`, the relative change :math:`\Delta\mathrm{IPS} = (\mathrm{IPS}_k -
  \mathrm{IPS}_0) / \mathrm{IPS}_0` of the model's IPS over its items (templates 1 and 4, as
  the paper; :func:`psens.ips.factors.few_shot` with that one model), its bootstrap CI over
  items and the paired sign-flip p. Models are never averaged together, and a model whose
  answer letter follows the few-shot examples (:func:`psens.ips.verdicts.answer_confound`)
  says so in ``caveats``: its ΔIPS is the change of the letter it copies.
* :func:`same_answer_claim` — §1 and fig. 1 of [1]_: unstable interactions exist even when
  the model's output stays the same. For template pairs :math:`(T, \hat T)` of item
  :math:`x` whose predictions agree (set :math:`A`), the excess of pair IPS over the noise
  floor of the same pair,

  .. math::
      \bar e_A = \frac{\sum_{(x,T,\hat T)\in A}\left[\mathrm{IPS}(x|T,\hat T)
      - \tfrac12\left(\mathrm{floor}(x,T) + \mathrm{floor}(x,\hat T)\right)\right]}{|A|},

  pooled over (item, pair), with an item-level bootstrap CI (items resampled, each with all
  its pairs); the same for pairs whose predictions differ (:math:`\bar e_D`) and
  :math:`\bar e_A - \bar e_D` on the same resamples.
* :func:`accuracy_relation` — across items, the rank correlation (Spearman) of an item's IPS
  (the mean over template pairs) with its accuracy :math:`\frac1{|T|}\sum_T \mathbb
  1[\hat y(x|T) = y(x)]`, with a bootstrap CI over items (:func:`psens.stats.correlation_ci`)
  and a permutation p (:func:`psens.stats.correlation_test`); ``across="templates"``: the
  same across templates (a template's IPS over the pairs it is in against its accuracy,
  items resampled for the CI, template labels permuted for p).
  [1]_ makes no claim here; ProSA [2]_ reports that more accurate (and more confident)
  instances are less sensitive by its PSS. The table states this run's measurement beside
  ProSA's claim, which is about PSS, not IPS.

Each table's ``attrs["pools"]`` says what its numbers pool (the shot setting, the templates
and pairs, the items; one model at a time).

Only blocks that are done count (pending and failed blocks are NaN), so a run still in
progress gives its partial numbers. Numbers of different shot settings are never pooled.

References
----------
.. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International Conference
   on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
.. [2] Zhuo, J., Zhang, S., Fang, X., Duan, H., Lin, D., and Chen, K. "ProSA: Assessing and
   Understanding the Prompt Sensitivity of LLMs." Findings of the Association for
   Computational Linguistics: EMNLP 2024, pp. 1950–1976. arXiv:2410.12405.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from psens._charts import mark_synthetic
from psens._validation import check_in_interval, check_positive_int, fail
from psens.ips.metric import block_status, sample_ips, template_pairs
from psens.settings import tau_of
from psens.stats import (
    bootstrap_means,
    change_verdict,
    check_correlation_args,
    correlation_ci,
    correlation_test,
    is_finding,
    paired_test,
    percentile_ci,
    rank_correlation,
    resample_counts,
)
from psens.store import DONE
from psens.store.labels import model_names

__all__ = [
    "CANNOT_TEST",
    "ORDER_CLAIMS",
    "accuracy_relation",
    "few_shot_claim",
    "order_claim",
    "same_answer_claim",
]

#: How the verdict of a model that is not a finding begins.
CANNOT_TEST = "cannot test"
#: The contrasts of :func:`order_claim`: (name, band, baseline band, the claim).
ORDER_CLAIMS: tuple[tuple[str, str, str, str], ...] = (
    ("high − low", "high", "low", "the paper: high > low (fig. 9)"),
    ("mid − low", "mid", "low", "the paper: mid > low (fig. 9)"),
)
FEW_SHOT = "the paper: few-shot prompts lower IPS, most from 0 to 1 shot (fig. 8)"
#: ``change_verdict`` words of the few-shot claim: a CI below 0 supports it.
LOWERS = ("the claim does not hold here (the opposite)", "the claim holds here")
SAME_ANSWER = "the paper: IPS above the noise floor when the answer stays the same (§1, fig. 1)"
ACCURACY = (
    "ProSA (Zhuo et al., 2024): more accurate → less sensitive (its PSS); "
    "the IPS paper makes no claim"
)
#: ``change_verdict`` words of a claim: a CI above 0 supports it, below 0 is the opposite.
HOLDS = ("the claim holds here", "the claim does not hold here (the opposite)")


def _num(x: float, fmt: str = ".3f") -> str:
    return format(float(x), fmt) if np.isfinite(float(x)) else "n/a"


def _prepare(ds, shot: int | None, tau: float | None, where: str, need: tuple[str, ...] = ()):
    """The run at one shot setting (a scalar ``shot`` coordinate), its τ and the shot used."""
    import xarray as xr

    if not isinstance(ds, xr.Dataset):
        fail(where, f"ds is a {type(ds).__name__}", "Pass a run Dataset (psens.open_run)")
    if not all(v in ds.variables for v in ("I_and", "I_or")) or ds.sizes.get("subset", 0) < 2:
        fail(
            where,
            "the run has no interactions (no I_and/I_or over subsets), so no order bands",
            "Pass a run with input variables (n_vars > 0), not a predictions-only PSS run",
        )
    missing = [v for v in need if v not in ds.variables]
    if missing:
        fail(where, f"the run has no {missing[0]!r} variable", "Pass a run that stores it")
    if tau is not None:
        check_in_interval(tau, where, "tau", 0.0, 1.0)
    if "shot" in ds.dims:
        have = [int(s) for s in ds["shot"].values]
        shot = have[0] if shot is None else shot
        if shot not in have:
            fail(where, f"shot = {shot!r} is not in the run", f"Use one of {have}")
        ds = ds.sel(shot=shot)
    elif shot is not None:
        scalar = ds.coords.get("shot")
        have = int(scalar.values) if scalar is not None and scalar.ndim == 0 else None
        if have != shot:
            fail(where, f"shot = {shot!r} is not in the run", f"Use shot = {have}")
    if "shot" in ds.coords and ds["shot"].ndim == 0:
        shot = int(ds["shot"].values)
    return ds, float(tau_of(ds, tau)), shot


def _reasons(ds, shot, reasons: Mapping[str, str] | None) -> dict[str, str]:
    """Per model why its IPS is not a finding (``""``: it is), from its headline."""
    if reasons is not None:
        return {str(k): str(v or "") for k, v in reasons.items()}
    from psens.ips.headline import headline
    from psens.ips.verdicts import findings

    return findings(headline(ds, shot=shot))


def _pools(run, shot, what: str) -> str:
    """What a claim's table pools: the headline's ``pools`` (shot, templates, pairs, items)
    and ``what`` the claim computes from them."""
    from psens.ips.headline import _pools as pooled
    from psens.ips.headline import _pools_text

    return f"{_pools_text(pooled(run, shot))}; {what}; one model at a time"


def _verdict(model: str, why: dict[str, str], lo, hi, p=None, words=HOLDS) -> tuple[str, Any]:
    """``(verdict, holds)`` of one row: "cannot test" for a model that is not a finding, else
    :func:`psens.stats.change_verdict` (the rule :func:`psens.stats.is_finding`)."""
    if why.get(model, "not in the headline"):
        return f"{CANNOT_TEST}: {why.get(model, 'not in the headline')}", None
    holds = bool(is_finding(lo, hi, p)) and float(lo) > 0
    return change_verdict(lo, hi, p, words=words), holds


def _done(ds) -> np.ndarray:
    """``[model, sample]``: the blocks that are done (all, for a run without a status)."""
    status = block_status(ds)
    n = (ds.sizes["model"], ds.sizes["sample"])
    return np.ones(n, bool) if status is None else status == DONE


def _finish(rows: list[dict], ds, **attrs) -> pd.DataFrame:
    out = pd.DataFrame(rows)
    out["holds"] = pd.Series([r["holds"] for r in rows], dtype=object)  # True/False/None
    out.attrs.update(attrs)
    return mark_synthetic(out, ds)


def order_claim(
    ds,
    *,
    shot: int | None = None,
    tau: float | None = None,
    n_boot: int = 2000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    reasons: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    r"""Fig. 9 of [1]_ as a measurement: per model, per-item IPS of the high (and mid) band
    minus the low band, with a bootstrap CI over items and a paired sign-flip p-value.

    For each model and contrast :math:`(b, \mathrm{low})` of :data:`ORDER_CLAIMS`:
    :math:`d(x) = \mathrm{IPS}_b(x) - \mathrm{IPS}_{\mathrm{low}}(x)` over the items where
    both bands have a salient interaction in some template pair (eq. 3 restricted to the
    band, :func:`psens.ips.sample_ips`; bands as :func:`psens.store.labels.order_band`);
    :math:`\bar d`, its percentile bootstrap CI and the two-sided sign-flip p-value of
    :func:`psens.stats.paired_test` (drawn from ``default_rng(seed)`` per model and contrast).

    Parameters
    ----------
    ds : xarray.Dataset
        A run (:func:`psens.open_run`), finished or not.
    shot : int, optional
        Shot setting of a run with a ``shot`` dim (default: the first).
    tau : float, optional
        Salience threshold (default: the run's, :func:`psens.settings.run_settings`).
    n_boot, n_perm, ci, seed
        Bootstrap resamples, sign flips, CI level and seed.
    reasons : mapping, optional
        Per model why its IPS is not a finding (``""``: it is); default
        :func:`psens.ips.verdicts.findings` of :func:`psens.ips.headline.headline` at ``shot``.

    Returns
    -------
    pandas.DataFrame
        One row per model × contrast: ``model, shot, contrast, band, base, ips_band, ips_base,
        diff, lo, hi, p_value, n, claim, measured, verdict, holds``; ``attrs``: ``tau``,
        ``ci``, ``pools`` (what the numbers pool).

    References
    ----------
    .. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining
       Prompt Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International
       Conference on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
    """
    where = "order_claim"
    check_positive_int(n_boot, where, "n_boot")
    check_positive_int(n_perm, where, "n_perm")
    check_in_interval(ci, where, "ci", 0.0, 1.0)
    run = ds
    ds, tau, shot = _prepare(ds, shot, tau, where)
    why = _reasons(run, shot, reasons)
    bands = sample_ips(ds, tau, orders=("low", "mid", "high")).transpose("model", "order", ...)
    values = np.asarray(bands.values, dtype=float)  # [model, order, sample]
    index = {str(o): k for k, o in enumerate(bands["order"].values)}
    rows = []
    for m, model in enumerate(model_names(bands)):
        for name, band, base, claim in ORDER_CLAIMS:
            a, b = values[m, index[band]], values[m, index[base]]
            both = np.isfinite(a) & np.isfinite(b)
            a, b = a[both], b[both]
            n = int(both.sum())
            res = {k: np.nan for k in ("mean_a", "mean_b", "diff", "diff_lo", "diff_hi")}
            res["p_value"] = np.nan
            if n:
                res = paired_test(a, b, n_boot=n_boot, n_perm=n_perm, ci=ci, seed=seed)
            d, lo, hi, p = (float(res[k]) for k in ("diff", "diff_lo", "diff_hi", "p_value"))
            verdict, holds = _verdict(model, why, lo, hi, p)
            rows.append(
                {
                    "model": model,
                    "shot": shot,
                    "contrast": name,
                    "band": band,
                    "base": base,
                    "ips_band": float(res["mean_a"]),
                    "ips_base": float(res["mean_b"]),
                    "diff": d,
                    "lo": lo,
                    "hi": hi,
                    "p_value": p,
                    "n": n,
                    "claim": claim,
                    "measured": f"{name} {_num(d, '+.3f')} [{_num(lo)}, {_num(hi)}], "
                    f"p = {_num(p, '.3g')} (n = {n} items)",
                    "verdict": verdict,
                    "holds": holds,
                }
            )
    what = "per item IPS of the band minus IPS of the low band, the items' differences averaged"
    return _finish(rows, run, tau=tau, ci=ci, pools=_pools(run, shot, what))


def _pct(x: float) -> str:
    """``-0.0734`` → ``"−7.3"`` (a percentage with a true minus sign)."""
    return f"{100 * float(x):.1f}".replace("-", "−") if np.isfinite(float(x)) else "n/a"


def _confound_words(conf: pd.DataFrame, model: str, shot: int) -> str:
    """``"answer follows the few-shot examples: C on 98 % at 1 shot (examples answer C)"``
    when ``model``'s letter follows the examples' at ``shot`` (:func:`answer_confound`)."""
    from psens.ips.headline import FOLLOWS_EXAMPLES

    rows = conf[(conf["model"] == model) & (conf["shot"] == shot) & conf["follows_examples"]]
    return "; ".join(
        f"{FOLLOWS_EXAMPLES}: {r.majority_answer} on {100 * r.majority_share:.0f} % at {shot} "
        f"shot{'s' if shot != 1 else ''} (examples answer {', '.join(r.examples)}) — its "
        "ΔIPS is the change of the letter it copies"
        for r in rows.itertuples()
    )


def few_shot_claim(
    ds,
    *,
    templates: Any = "paper",
    tau: float | None = None,
    n_boot: int = 1000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    reasons: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    r"""Fig. 8 of [1]_ as a measurement: per model and k-shot setting, the relative change of
    the model's IPS against 0 shots, with a bootstrap CI over items and a paired sign-flip p.

    For each model (alone: models are never averaged) and each :math:`k > 0` of the run's
    ``shot`` dim, :func:`psens.ips.factors.few_shot` with that one model gives
    :math:`\Delta\mathrm{IPS} = (\overline{\mathrm{IPS}}_k - \overline{\mathrm{IPS}}_0) /
    \overline{\mathrm{IPS}}_0` over the model's items (pooled: the mean over items of the
    per-item IPS of the templates' pairs), its percentile bootstrap CI (items resampled) and
    the two-sided sign-flip p of the per-item differences. The claim holds for a model when
    the CI lies below 0 and ``p < 0.05`` (:func:`psens.stats.is_finding`).

    Parameters
    ----------
    ds : xarray.Dataset
        A run with a ``shot`` dim that has 0 and some :math:`k > 0`.
    templates : sequence of str or None or "paper", optional
        Templates whose pairs enter IPS: ``"paper"`` (default) the paper's templates 1 and 4
        (appendix E.6; all of the run's when it lacks them), None all of the run's.
    tau : float, optional
        Salience threshold (default: the run's, :func:`psens.settings.run_settings`).
    n_boot, n_perm, ci, seed
        Bootstrap resamples, sign flips, CI level and seed.
    reasons : mapping, optional
        Per model why its IPS is not a finding (``""``: it is), for every row. Default: per
        k, :func:`psens.ips.verdicts.findings_models` at 0 and k shots — a model enters the
        (k, 0) comparison only when it is a finding at both.

    Returns
    -------
    pandas.DataFrame
        One row per model × k: ``model, shot, contrast, ips_shot, ips_zero, diff,
        rel_change, lo, hi, p_value, n, claim, measured, caveats, verdict, holds`` (``lo``,
        ``hi``: the CI of ``rel_change``; ``caveats``: the answer confound at k shots, ``""``
        when there is none); ``attrs``: ``tau``, ``ci``, ``templates``, ``pools`` (what one
        row pools, in words).

    References
    ----------
    .. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining
       Prompt Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International
       Conference on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
    """
    from psens.ips.factors import few_shot
    from psens.ips.factors.pairings import FEW_SHOT_TEMPLATES
    from psens.ips.headline import headlines
    from psens.ips.verdicts import answer_confound, findings_across

    where = "few_shot_claim"
    check_positive_int(n_boot, where, "n_boot")
    check_positive_int(n_perm, where, "n_perm")
    check_in_interval(ci, where, "ci", 0.0, 1.0)
    if "shot" not in getattr(ds, "dims", ()):
        fail(where, "the run has no shot dim", "Make the run with shots=[0, 1, 3]")
    shots = [int(k) for k in ds["shot"].values]
    if 0 not in shots or len(shots) < 2:
        fail(where, f"the run has shots {shots}", "Include 0 and at least one k > 0")
    if isinstance(templates, str) and templates == "paper":
        templates = FEW_SHOT_TEMPLATES
    tau = float(tau_of(ds, tau))
    heads = headlines(ds, tau=tau) if reasons is None else {}
    conf = answer_confound(ds)
    rows = []
    for model in model_names(ds):
        res = few_shot(
            ds,
            [model],
            templates=templates,
            tau=tau,
            n_boot=n_boot,
            n_perm=n_perm,
            ci=ci,
            seed=seed,
        )
        used = res.settings["templates"]
        pairs = res.pairs[res.pairs["order"] == "all"].set_index("group")
        summary = res.summary[res.summary["order"] == "all"].set_index("group")
        for k in (k for k in shots if k > 0):
            why = (
                {str(m): str(v or "") for m, v in reasons.items()}
                if reasons is not None
                else findings_across({0: heads[0], k: heads[k]})
            )
            s, pr = summary.loc[f"{k}-shot"], pairs.loc[f"{k}-shot"]
            rel, lo, hi, p = (float(s[c]) for c in ("rel_change", "rel_lo", "rel_hi", "p_value"))
            verdict, holds = _verdict(model, why, lo, hi, p, words=LOWERS)
            if holds is not None:
                holds = bool(is_finding(lo, hi, p)) and hi < 0
            n = int(pr["n_samples"])
            rows.append(
                {
                    "model": model,
                    "shot": k,
                    "contrast": f"{k}-shot vs 0-shot",
                    "ips_shot": float(pr["ips_a"]),
                    "ips_zero": float(pr["ips_b"]),
                    "diff": float(s["diff"]),
                    "rel_change": rel,
                    "lo": lo,
                    "hi": hi,
                    "p_value": p,
                    "n": n,
                    "claim": FEW_SHOT,
                    "measured": f"{k}-shot {_pct(rel)} % ({_pct(lo)} … {_pct(hi)} %, "
                    f"p = {_num(p)}), {n} items",
                    "caveats": _confound_words(conf, model, k),
                    "verdict": verdict,
                    "holds": holds,
                }
            )
    pools = (
        f"one model at a time, templates {', '.join(used)}, its items pooled; models are "
        "never averaged together"
    )
    return _finish(rows, ds, tau=tau, ci=ci, templates=list(used), pools=pools)


def _pair_floor(ds, tau: float) -> np.ndarray:
    """``[model, sample, pair]``: the noise floor of a template pair, the mean of its two
    templates' floors (all orders; :func:`psens.ips.floor.noise_floor`)."""
    from psens.ips.floor import noise_floor

    fl = noise_floor(ds, tau=tau, orders=["all"]).sel(order="all", drop=True)
    fl = np.asarray(fl.transpose("model", "sample", "template").values, dtype=float)
    i, j = template_pairs(fl.shape[-1])
    return (fl[..., i] + fl[..., j]) / 2


def _predictions(ds) -> np.ndarray:
    """``[model, sample, template]`` answers as stripped strings, ``""`` for none or a block
    that is not done."""
    pred = ds["prediction"].transpose("model", "sample", "template").values
    text = np.vectorize(lambda v: "" if v is None or v != v else str(v).strip(), otypes=[object])
    out = text(np.asarray(pred, dtype=object))
    out[~_done(ds)] = ""
    return out


def same_answer_claim(
    ds,
    *,
    shot: int | None = None,
    tau: float | None = None,
    n_boot: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    reasons: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    r"""§1 / fig. 1 of [1]_ as a measurement: IPS above the noise floor on template pairs
    whose predictions agree, and on those whose predictions differ.

    For each model, with :math:`e(x, T, \hat T) = \mathrm{IPS}(x|T,\hat T) -
    \frac12(\mathrm{floor}(x,T) + \mathrm{floor}(x,\hat T))` (pair IPS of eq. 3 over all
    orders, :func:`psens.ips.sample_ips` with ``per_pair=True``; floor
    :func:`psens.ips.floor.noise_floor`), and :math:`A` / :math:`D` the (item, pair)s whose
    two predictions are the same / differ (both answered, pair IPS defined):

    .. math::
        \bar e_A = \frac{\sum_x s_A(x)}{\sum_x c_A(x)}, \quad
        s_A(x) = \sum_{(T,\hat T): (x,T,\hat T)\in A} e(x,T,\hat T), \quad
        c_A(x) = |\{(T,\hat T): (x,T,\hat T)\in A\}|,

    the same for :math:`D`, and :math:`\bar e_A - \bar e_D`. The CI resamples items (the
    multinomial counts :math:`W` of :func:`psens.stats.resample_counts` over the items with a
    defined pair, drawn from ``default_rng(seed)`` per model): :math:`\bar e^{(b)}_A = W_b
    s_A / W_b c_A` (:func:`psens.stats.bootstrap_means`), the three figures on the same
    resamples. There is no test: the CI alone decides (:func:`psens.stats.is_finding`). A
    group with pairs in fewer than two items has no CI (NaN: its resamples would all repeat
    one item), nor then has the difference.

    Parameters
    ----------
    ds : xarray.Dataset
        A run with ``prediction`` (:func:`psens.open_run`), finished or not.
    shot, tau, n_boot, ci, seed, reasons
        As :func:`order_claim`.

    Returns
    -------
    pandas.DataFrame
        Three rows per model (``group``: ``"same answer"``, ``"different answers"``, ``"same −
        different"``): ``model, shot, group, ips, floor, excess, lo, hi, n_items, n_pairs,
        claim, measured, verdict, holds`` (``ips`` and ``floor`` pooled as ``excess``, NaN on
        the difference row; ``n_items``: the items with a pair of the group, on the
        difference row the items resampled). Only the ``"same answer"`` row is the paper's
        claim; the other two are this run's measurements (their verdict says positive /
        negative). ``attrs``: ``tau``, ``ci``, ``pools``.

    References
    ----------
    .. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining
       Prompt Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International
       Conference on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
    """
    where = "same_answer_claim"
    check_positive_int(n_boot, where, "n_boot")
    check_in_interval(ci, where, "ci", 0.0, 1.0)
    run = ds
    ds, tau, shot = _prepare(ds, shot, tau, where, need=("prediction",))
    why = _reasons(run, shot, reasons)
    pair_ips = sample_ips(ds, tau, orders="all", per_pair=True)
    ips_v = np.asarray(pair_ips.transpose("model", "sample", "pair").values, dtype=float)
    floor_v = _pair_floor(ds, tau)
    pred = _predictions(ds)
    i, j = template_pairs(pred.shape[-1])
    answered = (pred[..., i] != "") & (pred[..., j] != "")
    same = answered & (pred[..., i] == pred[..., j])
    excess = ips_v - floor_v
    usable = answered & np.isfinite(excess)
    rows = []
    for m, model in enumerate(model_names(pair_ips)):
        keep = usable[m].any(axis=-1)  # items with a defined pair
        groups = {"same answer": same[m] & usable[m], "different answers": ~same[m] & usable[m]}
        sums, ips_s, floor_s, cnt = [], [], [], []
        for mask in groups.values():
            mask = mask[keep]
            cnt.append(mask.sum(axis=-1).astype(float))
            sums.append(np.where(mask, excess[m][keep], 0.0).sum(axis=-1))
            ips_s.append(np.where(mask, ips_v[m][keep], 0.0).sum(axis=-1))
            floor_s.append(np.where(mask, floor_v[m][keep], 0.0).sum(axis=-1))
        sums, ips_s, floor_s, cnt = map(np.array, (sums, ips_s, floor_s, cnt))  # [group, item]
        n_items = int(keep.sum())
        total = cnt.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            est = sums.sum(axis=-1) / total
            ips_mean, floor_mean = ips_s.sum(axis=-1) / total, floor_s.sum(axis=-1) / total
        est = np.append(est, est[0] - est[1])
        lo = hi = np.full(3, np.nan)
        if n_items:
            counts = resample_counts(n_items, n_boot, np.random.default_rng(seed))
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = bootstrap_means(sums, counts) / bootstrap_means(cnt, counts)  # [b, group]
            boot = np.concatenate([boot, boot[:, :1] - boot[:, 1:2]], axis=1)
            lo, hi = percentile_ci(boot, ci)
        present = (cnt > 0).sum(axis=-1)  # items with a pair of the group
        present = np.append(present, min(present))
        lo, hi = np.where(present >= 2, lo, np.nan), np.where(present >= 2, hi, np.nan)
        names = [*groups, "same − different"]
        for g, group in enumerate(names):
            claim = SAME_ANSWER if g == 0 else "psens: a measurement (no claim in the paper)"
            words = HOLDS if g == 0 else ("positive", "negative")
            verdict, holds = _verdict(model, why, lo[g], hi[g], words=words)
            holds = holds if g == 0 else None
            label = "IPS − floor" if g < 2 else "difference of IPS − floor"
            n_pairs = int(total[g]) if g < 2 else int(total.sum())
            n_g = int(present[g]) if g < 2 else n_items
            rows.append(
                {
                    "model": model,
                    "shot": shot,
                    "group": group,
                    "ips": float(ips_mean[g]) if g < 2 else np.nan,
                    "floor": float(floor_mean[g]) if g < 2 else np.nan,
                    "excess": float(est[g]),
                    "lo": float(lo[g]),
                    "hi": float(hi[g]),
                    "n_items": n_g,
                    "n_pairs": n_pairs,
                    "claim": claim,
                    "measured": f"{group}: {label} {_num(est[g], '+.3f')} "
                    f"[{_num(lo[g])}, {_num(hi[g])}] (n = {n_pairs} pairs of {n_g} items)",
                    "verdict": verdict,
                    "holds": holds,
                }
            )
    what = "(item, template pair)s pooled by whether the pair's answers agree, items resampled"
    return _finish(rows, run, tau=tau, ci=ci, pools=_pools(run, shot, what))


def _template_ips(pair_ips: np.ndarray, n_templates: int) -> np.ndarray:
    """``[..., template]``: a template's IPS, the mean of the (defined) pair IPS of the pairs
    it is in, from ``pair_ips [..., pair]`` in :func:`template_pairs` order."""
    i, j = template_pairs(n_templates)
    member = np.zeros((i.size, n_templates))
    member[np.arange(i.size), i] = member[np.arange(i.size), j] = 1.0
    ok = np.isfinite(pair_ips)
    total = np.where(ok, pair_ips, 0.0) @ member
    count = ok.astype(float) @ member
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, np.nan)


def _across_templates(
    ips_t: np.ndarray,
    acc_t: np.ndarray,
    *,
    method: str,
    n_boot: int,
    n_perm: int,
    ci: float,
    seed: int,
) -> dict[str, float]:
    """:func:`accuracy_relation` across templates of one model: ``ips_t``, ``acc_t``
    ``[item, template]`` over its done items."""
    n_items, n_t = ips_t.shape
    out = {"n": n_t, "r": np.nan, "lo": np.nan, "hi": np.nan, "n_boot_valid": 0}
    out["p_value"] = np.nan
    if n_items == 0 or n_t < 3:
        return out
    x, y = np.nanmean(ips_t, axis=0), np.nanmean(acc_t, axis=0)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return out
    rng = np.random.default_rng(seed)
    out["r"] = float(rank_correlation(x, y, method=method))
    counts = resample_counts(n_items, n_boot, rng)
    boot = rank_correlation(
        bootstrap_means(ips_t.T, counts), bootstrap_means(acc_t.T, counts), method=method
    )
    out["n_boot_valid"] = valid = int(np.isfinite(boot).sum())
    if valid:
        out["lo"], out["hi"] = (float(v[0]) for v in percentile_ci(boot[:, None], ci))
    out["p_value"] = correlation_test(x, y, method=method, n_perm=n_perm, seed=rng)
    return out


def accuracy_relation(
    ds,
    *,
    shot: int | None = None,
    tau: float | None = None,
    across: str = "items",
    method: str = "spearman",
    n_boot: int = 2000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    reasons: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    r"""The rank correlation of IPS with accuracy, per model, across items or across templates.

    ``across="items"``: :math:`r = \rho_S\big(\mathrm{IPS}(x), \mathrm{acc}(x)\big)` over the
    items of the model that are done, with :math:`\mathrm{IPS}(x)` the mean over template
    pairs of eq. 3 of [1]_ (:func:`psens.ips.sample_ips`) and :math:`\mathrm{acc}(x) =
    \frac1{|T|}\sum_T \mathrm{correct}(x, T)`; the percentile bootstrap CI over items of
    :func:`psens.stats.correlation_ci` and its permutation p (items' accuracies permuted
    against their IPS, :func:`psens.stats.correlation_test`), both drawn from
    ``default_rng(seed)`` per model.

    ``across="templates"``: :math:`r = \rho_S\big(\mathrm{IPS}(T), \mathrm{acc}(T)\big)` over
    the templates, with

    .. math::
        \mathrm{IPS}(T) = \frac1{|X|}\sum_x \frac{1}{|P_T|}\sum_{\hat T \ne T}
        \mathrm{IPS}(x|T,\hat T), \qquad \mathrm{acc}(T) = \frac1{|X|}\sum_x
        \mathrm{correct}(x, T),

    (:math:`P_T` the pairs with :math:`T`, undefined pairs skipped); the CI resamples the
    items (:func:`psens.stats.resample_counts`, both means and the correlation recomputed on
    each resample) and p permutes the template labels
    (:func:`psens.stats.correlation_test`). With :math:`|T|` templates no p falls below
    :math:`2/|T|!` (0.083 for four), so four templates can never give a finding.

    [1]_ makes no claim about either; ProSA [2]_ reports that more accurate instances are
    less sensitive by its PSS (a negative :math:`r`), which this states as ProSA's, beside
    this run's IPS measurement. The verdict is :func:`psens.stats.is_finding` of the CI and p.

    Parameters
    ----------
    ds : xarray.Dataset
        A run with ``correct`` (:func:`psens.open_run`), finished or not.
    across : {"items", "templates"}
        What the correlation runs over.
    method : {"spearman", "pearson"}
        The correlation (:func:`psens.stats.rank_correlation`).
    n_perm : int
        Permutations of the test.
    shot, tau, n_boot, ci, seed, reasons
        As :func:`order_claim`.

    Returns
    -------
    pandas.DataFrame
        One row per model: ``model, shot, across, n, n_items, r, lo, hi, p_value,
        n_boot_valid, accuracy, ips, claim, measured, verdict, holds`` (``n``: the items or
        templates correlated; ``holds``: True for a finding in ProSA's direction,
        ``r < 0``); ``attrs``: ``tau``, ``ci``, ``method``, ``across``, ``pools``.

    References
    ----------
    .. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining
       Prompt Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International
       Conference on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
    .. [2] Zhuo, J., Zhang, S., Fang, X., Duan, H., Lin, D., and Chen, K. "ProSA: Assessing
       and Understanding the Prompt Sensitivity of LLMs." Findings of the Association for
       Computational Linguistics: EMNLP 2024, pp. 1950–1976. arXiv:2410.12405.
    """
    where = "accuracy_relation"
    check_correlation_args(where, method, n_boot, n_perm, ci)
    if across not in ("items", "templates"):
        fail(where, f"across = {across!r}", 'Use "items" or "templates"')
    run = ds
    ds, tau, shot = _prepare(ds, shot, tau, where, need=("correct",))
    why = _reasons(run, shot, reasons)
    item_ips = sample_ips(ds, tau, orders="all")
    ips_v = np.asarray(item_ips.transpose("model", "sample").values, dtype=float)
    pair_ips = sample_ips(ds, tau, orders="all", per_pair=True)
    pair_v = np.asarray(pair_ips.transpose("model", "sample", "pair").values, dtype=float)
    corr = np.asarray(ds["correct"].transpose("model", "sample", "template").values, float)
    corr = np.where(_done(ds)[..., None], corr, np.nan)
    answered = np.isfinite(corr).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(answered > 0, np.nansum(corr, axis=-1) / answered, np.nan)
    ips_t = _template_ips(pair_v, corr.shape[-1])  # [model, sample, template]
    words = ("positive: more accurate items are more sensitive", "negative: as ProSA reports")
    if across == "templates":
        words = (
            "positive: more accurate templates are more sensitive",
            "negative: as ProSA reports",
        )
    rows = []
    for m, model in enumerate(model_names(pair_ips)):
        both = np.isfinite(ips_v[m]) & np.isfinite(acc[m])
        x, y = ips_v[m][both], acc[m][both]
        if across == "items":
            res = correlation_ci(
                x, y, method=method, n_boot=n_boot, ci=ci, seed=seed, n_perm=n_perm
            )
            unit = "items"
        else:
            res = _across_templates(
                ips_t[m][both],
                corr[m][both],
                method=method,
                n_boot=n_boot,
                n_perm=n_perm,
                ci=ci,
                seed=seed,
            )
            unit = f"templates, {x.size} items resampled"
        p = res["p_value"]
        verdict, holds = _verdict(model, why, res["lo"], res["hi"], p, words=words)
        if holds is not None:
            holds = bool(is_finding(res["lo"], res["hi"], p)) and res["hi"] < 0
        rows.append(
            {
                "model": model,
                "shot": shot,
                "across": across,
                "n": res["n"],
                "n_items": int(x.size),
                "r": res["r"],
                "lo": res["lo"],
                "hi": res["hi"],
                "p_value": p,
                "n_boot_valid": res["n_boot_valid"],
                "accuracy": float(y.mean()) if y.size else np.nan,
                "ips": float(x.mean()) if x.size else np.nan,
                "claim": ACCURACY,
                "measured": f"{method} r(IPS, accuracy) across {across} "
                f"{_num(res['r'], '+.3f')} [{_num(res['lo'])}, {_num(res['hi'])}], "
                f"p = {_num(p, '.3g')} (n = {res['n']} {unit})",
                "verdict": verdict,
                "holds": holds,
            }
        )
    what = {
        "items": "per item its IPS (mean over the template pairs) and its accuracy (mean over "
        "the templates), correlated over the items",
        "templates": "per template its IPS (mean over its pairs and the items) and its "
        "accuracy (mean over the items), correlated over the templates, items resampled",
    }[across]
    return _finish(
        rows, run, tau=tau, ci=ci, method=method, across=across, pools=_pools(run, shot, what)
    )
