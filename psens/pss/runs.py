r"""ProSA analyses of a stored PSS run: instance sensitivity, decoding confidence, shots.

A PSS run is a ``psens run`` with ``n_vars = 0`` (no masked prompts): for every (model,
sample, shot, template) the store holds the answer's correctness ``correct``, the decoding
confidence ``confidence`` (top next-token probability over the full vocabulary) and
``p_target``. An IPS run stores the same for its unmasked prompts, so PSS across its
templates is defined there too (:func:`instance_table` takes either: any run with
``correct`` and at least two templates; a cloze run's formats or templates are its prompt
variants). From it:

* :func:`instance_table` — per (model, shot, sample) the instance sensitivity
  :math:`S_i` (ProSA eq. 1, over the run's templates), the instance confidence
  :math:`\mathcal C_i = \frac1{|P|}\sum_p \max_t P(t\mid p)` (eq. 3) and the accuracy;
* :func:`confidence_relation` — the correlation between :math:`S_i` and
  :math:`\mathcal C_i` over instances (Spearman by default) with a percentile bootstrap CI
  over instances (:func:`psens.stats.correlation_ci`) and a permutation p
  (:func:`psens.stats.correlation_test`; §5.2: the paper reports that higher confidence
  goes with lower PSS), a model that answers one option or at chance left out of the
  verdict (:func:`psens.ips.headline.answer_caveats`);
* :func:`pss_by_shot` — PSS per shot count with a bootstrap CI, and each shot count
  against zero shots: the paired difference of :math:`S_i`, its CI and sign-flip p-value
  (:func:`psens.stats.paired_test`); a difference that is not a finding (its CI contains 0,
  or the paired test does not reject: :func:`psens.pss.verdicts.is_finding`) is flagged
  ``within_noise`` (§3.4 reports that shots lower PSS);
* :func:`summary_lines` — what ``psens summary`` prints for such a run.

Blocks that are not done are left out (NaN), as everywhere in psens.

The bootstrap and the paired test are psens's addition: the paper reports point values.

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from psens._validation import check_in_interval, fail
from psens.pss.metric import instance_pss
from psens.pss.verdicts import change_verdict, is_finding
from psens.settings import run_settings
from psens.stats import (
    check_correlation_args,
    correlation_ci,
    correlation_test,
    rank_correlation,
)
from psens.store.labels import model_names

__all__ = [
    "answer_confidence",
    "chance_pss",
    "confidence_relation",
    "instance_table",
    "is_pss_run",
    "pss_by_shot",
    "rank_correlation",
    "summary_lines",
]

WHERE = "psens.pss.runs"


def chance_pss(accuracy: float) -> float:
    r"""Expected :math:`S_i` of answers that are right independently under each prompt with
    probability ``accuracy``: :math:`E[S_i] = 2a(1-a)` for any number of prompts (with
    :math:`K` right of :math:`m`, :math:`S_i = K(m-K)/\binom m2` and
    :math:`E[K(m-K)] = m(m-1)a(1-a)`). A model guessing uniformly among ``k`` options has
    ``chance_pss(1 / k)`` (0.375 for four options): PSS near it says the answers carry no
    stable preference, not that the prompts matter."""
    check_in_interval(accuracy, "psens.pss.chance_pss", "accuracy", 0.0, 1.0, closed="both")
    return 2.0 * accuracy * (1.0 - accuracy)


def is_pss_run(ds: xr.Dataset) -> bool:
    """Whether ``ds`` is a predictions-only run (``n_vars = 0``: no input variables)."""
    return "var" in ds.dims and ds.sizes["var"] == 0 and "correct" in ds


def _check(ds: xr.Dataset, where: str) -> xr.Dataset:
    """The run's answers over its templates, blocks that are not done NaN: a PSS run or an
    IPS run (its unmasked prompts), with ``correct`` and at least two templates."""
    if (
        not isinstance(ds, xr.Dataset)
        or "correct" not in ds
        or "template" not in ds.dims
        or ds.sizes["template"] < 2
        or ("option_loglik" not in ds and "confidence" not in ds)
    ):
        fail(
            where,
            "the run has no answers under two or more templates ('correct' per template)",
            "Open a run with several templates or formats (e.g. data/runs/pss-arc.nc)",
        )
    done = ds["status"] == 1  # store.DONE
    keep = {"correct": ds["correct"].where(done)}
    if "confidence" in ds:
        keep["confidence"] = ds["confidence"].where(done)
    return ds.assign(keep).load()


def answer_confidence(ds: xr.Dataset) -> xr.DataArray:
    """The confidence of each stored answer (:func:`instance_table` says which): the stored
    decoding confidence, or in a cloze run the chosen option's probability; NaN where a
    block is not done."""
    if run_settings(ds).answer != "cloze":
        return ds["confidence"]
    from psens.cloze import rescore

    return rescore(ds)["confidence"].where(ds["correct"].notnull())


def _with_shot(da: xr.DataArray) -> xr.DataArray:
    return da if "shot" in da.dims else da.expand_dims(shot=[0])


def instance_table(ds: xr.Dataset, *, correct: xr.DataArray | None = None) -> pd.DataFrame:
    r"""Per (model, shot, sample): ``S_i`` (eq. 1 over the templates), ``confidence``
    (eq. 3: the mean over templates of the answer's confidence), ``accuracy`` (mean
    correctness over templates) and ``n_templates`` (templates with a value).

    The answer's confidence is ProSA's decoding confidence, the top next-token probability
    over the full vocabulary, in a lettered run (the answer is one token). In a cloze run
    (``answer = "cloze"``) the answer is an option's whole text, so it is the probability the
    model gives the option it answers, :math:`\max_o \tilde p_o` under the run's
    ``cloze_norm`` (:func:`psens.cloze.rescore`); the next token after a cloze prompt is the
    first word of any continuation and says nothing about the answer.

    Parameters
    ----------
    ds
        A run with answers under two or more templates: a PSS run (:func:`is_pss_run`), a
        cloze format run or an IPS run (the answers to its unmasked prompts).
    correct
        Another correctness array of the run's layout (e.g. read from the stored
        ``generated`` text); default the stored ``correct``.

    Returns
    -------
    DataFrame with columns ``model, shot, sample, S_i, confidence, accuracy, n_templates``.
    """
    ds = _check(ds, "psens.pss.instance_table")
    y = _with_shot(ds["correct"] if correct is None else correct)
    c = _with_shot(answer_confidence(ds))
    y = y.transpose("model", "shot", "sample", "template")
    c = c.transpose("model", "shot", "sample", "template")
    s_i = instance_pss(y, dim="template")
    with np.errstate(invalid="ignore"):
        frame = xr.Dataset(
            {
                "S_i": s_i,
                "confidence": c.mean("template", skipna=True),
                "accuracy": y.mean("template", skipna=True),
                "n_templates": y.notnull().sum("template"),
            }
        )
    df = frame.to_dataframe().reset_index()
    df["model"] = df["model"].astype(str)
    df["sample"] = df["sample"].astype(str)
    return df[["model", "shot", "sample", "S_i", "confidence", "accuracy", "n_templates"]]


#: ProSA's claim :func:`confidence_relation` tests.
CONFIDENCE = (
    "ProSA (Zhuo et al., 2024, §5.2, fig. 7): higher confidence → lower PSS "
    "(more accurate → less sensitive)"
)

#: ``change_verdict`` words of :func:`confidence_relation`: a CI below 0 is ProSA's direction.
RELATION_WORDS = ("positive: against ProSA's claim", "negative: as ProSA reports")


def confidence_relation(
    ds: xr.Dataset,
    *,
    method: str = "spearman",
    n_boot: int = 2000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    correct: xr.DataArray | None = None,
) -> pd.DataFrame:
    r"""Instance-level correlation of ``S_i`` with decoding confidence, per model and shot.

    ProSA §5.2 [1]_ reports that instances with higher decoding confidence have lower PSS
    (fig. 7, CommonsenseQA). Here:

    .. math::
        r = \rho\big(S_i, \mathcal C_i\big), \qquad
        S_i = \binom{|P|}{2}^{-1}\sum_{p<q} |y_{i,p} - y_{i,q}|, \qquad
        \mathcal C_i = \frac1{|P|}\sum_p c_{i,p},

    the correlation (:func:`psens.stats.rank_correlation`) over the instances with both
    defined (:func:`instance_table`: the prompts :math:`P` are the run's templates, the
    confidence :math:`c_{i,p}` that of the answer), its percentile bootstrap CI: ``n_boot``
    resamples of the instances with replacement (one index matrix per row, drawn in turn
    from ``default_rng(seed)``), the correlation recomputed on each (ranks recomputed for
    Spearman; resamples where one variable is constant are skipped,
    :func:`psens.stats.percentile_ci`), and the two-sided permutation p of
    :func:`psens.stats.correlation_test` (its permutations from a generator of its own,
    spawned from ``seed``, so the CIs do not depend on ``n_perm``).

    The verdict is the one rule (:func:`psens.pss.verdicts.is_finding`: the CI strictly on
    one side of 0 and ``p < 0.05``), except for a model whose answers at that shot setting
    carry a caveat (:func:`psens.ips.headline.answer_caveats`: one answer on more than
    80 % of the prompts, accuracy at or below chance, the few-shot examples' letter): its
    numbers are kept and its verdict is ``"cannot test: <caveats>"`` — its :math:`S_i`
    counts how often the prompts move it off its preferred answer, not how it reads the
    question.

    Parameters
    ----------
    ds : xarray.Dataset
        A run with answers under two or more templates (:func:`instance_table`).
    method : {"spearman", "pearson"}
        The correlation.
    n_boot, n_perm, ci, seed
        Bootstrap resamples, permutations, CI level and seed.
    correct : xarray.DataArray, optional
        As :func:`instance_table`.

    Returns
    -------
    DataFrame
        ``model, shot, n, r, lo, hi, p_value, n_boot_valid, within_noise, accuracy,
        confidence, pss, caveats, claim, measured, verdict, holds``: ``within_noise`` is True
        exactly when the row is not a finding by the rule (the CI contains 0 or is
        undefined, or ``p >= 0.05``); ``verdict`` is ``"cannot test: …"`` for a model with a
        caveat, else :func:`psens.pss.verdicts.change_verdict` of the CI and p (with
        :data:`RELATION_WORDS`, ending in "not a finding" exactly when ``within_noise``);
        ``holds``: True for a finding in ProSA's direction (:math:`r < 0`), False otherwise,
        None when it cannot be tested. ``attrs["pools"]`` says what the rows pool.

    References
    ----------
    .. [1] Zhuo, J., Zhang, S., Fang, X., Duan, H., Lin, D., and Chen, K. "ProSA: Assessing
       and Understanding the Prompt Sensitivity of LLMs." Findings of the Association for
       Computational Linguistics: EMNLP 2024, pp. 1950–1976. arXiv:2410.12405.
    """
    from psens.ips.headline import answer_caveats

    where = "psens.pss.confidence_relation"
    check_correlation_args(where, method, n_boot, n_perm, ci)
    table = instance_table(ds, correct=correct)
    rng = np.random.default_rng(seed)
    perm_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    caveats = {}
    if "prediction" in ds:
        shots = [int(k) for k in ds["shot"].values] if "shot" in ds.dims else [None]
        caveats = {k: answer_caveats(ds, shot=k) for k in shots}
    rows = []
    for (model, shot), g in table.groupby(["model", "shot"], sort=False):
        g = g.dropna(subset=["S_i", "confidence"])
        x, y = g["S_i"].to_numpy(), g["confidence"].to_numpy()
        r = correlation_ci(x, y, method=method, n_boot=n_boot, ci=ci, seed=rng)
        lo, hi = r["lo"], r["hi"]
        p = correlation_test(x, y, method=method, n_perm=n_perm, seed=perm_rng)
        why = caveats.get(int(shot), caveats.get(None, {})).get(str(model), "")
        found = is_finding(lo, hi, p)
        if why:
            verdict, holds = f"cannot test: {why}", None
        else:
            verdict = change_verdict(lo, hi, p, words=RELATION_WORDS)
            holds = bool(found) and hi < 0
        rows.append(
            {
                "model": model,
                "shot": int(shot),
                "n": r["n"],
                "r": r["r"],
                "lo": lo,
                "hi": hi,
                "p_value": p,
                "n_boot_valid": r["n_boot_valid"],
                "within_noise": not found,
                "accuracy": float(g["accuracy"].mean()) if len(g) else np.nan,
                "confidence": float(np.mean(y)) if y.size else np.nan,
                "pss": float(np.mean(x)) if x.size else np.nan,
                "caveats": why,
                "claim": CONFIDENCE,
                "measured": f"{method} r(S_i, confidence) {r['r']:+.3f} [{lo:.3f}, {hi:.3f}], "
                f"p = {p:.3g} (n = {r['n']} items)",
                "verdict": verdict,
                "holds": holds,
            }
        )
    out = pd.DataFrame(rows)
    if len(out):
        out["holds"] = pd.Series([row["holds"] for row in rows], dtype=object)
    n_t = ds.sizes["template"]
    kind = "formats" if any(str(t).startswith("fmt-") for t in ds["template"].values) else ""
    out.attrs["pools"] = (
        f"per model and shot setting, one instance per item: S_i over its {n_t} "
        f"{kind or 'templates'} (ProSA eq. 1) and the mean confidence of its answers (eq. 3), "
        "correlated over the items"
    )
    return out


def pss_by_shot(
    ds: xr.Dataset,
    *,
    n_boot: int = 2000,
    n_perm: int = 2000,
    ci: float = 0.95,
    seed: int = 0,
    correct: xr.DataArray | None = None,
) -> pd.DataFrame:
    r"""PSS per model and shot count, and each shot count against the run's first (0).

    ``pss`` is the mean of :math:`S_i` over the instances (eq. 2) with a percentile
    bootstrap CI over instances (``lo``, ``hi``). ``diff`` is :math:`\mathrm{PSS}_k -
    \mathrm{PSS}_0` on the instances defined at both, with its paired bootstrap CI
    (``diff_lo``, ``diff_hi``) and the two-sided sign-flip p-value (``p_value``) of
    :func:`psens.stats.paired_test`. ``verdict`` says whether the change is a finding
    (:func:`psens.pss.verdicts.change_verdict`: the CI excludes 0 and ``p_value < 0.05``) and
    ``within_noise`` is True exactly when it is not (:func:`psens.pss.verdicts.is_finding`):
    the two never disagree. The first shot count's row compares nothing: ``diff`` NaN,
    ``within_noise`` False, ``verdict`` ``"baseline"``. ProSA §3.4 reports that few-shot
    examples lower PSS, most from 0 to 1 shot.

    Returns
    -------
    DataFrame ``model, shot, n, pss, lo, hi, diff, diff_lo, diff_hi, p_value, within_noise,
    verdict``.
    """
    from psens.stats import (
        bootstrap_means,
        paired_test,
        percentile_ci,
        resample_counts,
    )

    table = instance_table(ds, correct=correct)
    rows = []
    for model, g in table.groupby("model", sort=False):
        wide = g.pivot(index="sample", columns="shot", values="S_i")
        shots = list(wide.columns)
        s = wide.to_numpy().T  # [shot, sample]
        counts = resample_counts(s.shape[1], n_boot, seed)
        lo, hi = percentile_ci(bootstrap_means(s, counts), ci)
        base = np.broadcast_to(s[0], s.shape)
        test = paired_test(s, base, n_boot=n_boot, n_perm=n_perm, ci=ci, seed=seed)
        for k, shot in enumerate(shots):
            first = k == 0
            d_lo, d_hi = float(test["diff_lo"][k]), float(test["diff_hi"][k])
            p = float(test["p_value"][k])
            rows.append(
                {
                    "model": model,
                    "shot": int(shot),
                    "n": int(np.isfinite(s[k]).sum()),
                    "pss": float(np.nanmean(s[k])) if np.isfinite(s[k]).any() else np.nan,
                    "lo": float(lo[k]),
                    "hi": float(hi[k]),
                    "diff": np.nan if first else float(test["diff"][k]),
                    "diff_lo": np.nan if first else d_lo,
                    "diff_hi": np.nan if first else d_hi,
                    "p_value": np.nan if first else p,
                    "within_noise": (not first) and not is_finding(d_lo, d_hi, p),
                    "verdict": "baseline" if first else change_verdict(d_lo, d_hi, p),
                }
            )
    return pd.DataFrame(rows)


def summary_lines(ds: xr.Dataset, head: str, notes: Sequence[str] = ()) -> str:
    """``psens summary`` of a PSS run: per model and shot the PSS, accuracy and decoding
    confidence over the done blocks, followed by that model's entry of ``notes`` (e.g.
    how many blocks are not done)."""
    table = instance_table(ds)
    lines = [head]
    for m, name in enumerate(model_names(ds)):
        g = table[table["model"] == str(name)]
        parts = [
            f"{int(shot)}-shot PSS {r['S_i'].mean():.3f} (accuracy {r['accuracy'].mean():.2f}, "
            f"confidence {r['confidence'].mean():.2f})"
            for shot, r in g.groupby("shot")
        ]
        note = notes[m] if m < len(notes) else ""
        lines.append(f"  {name}: " + "; ".join(parts) + (f"; {note}" if note else ""))
    n_t = ds.sizes["template"]
    lines.append(
        f"PSS over {n_t} templates and {ds.sizes['sample']} samples (ProSA eq. 1-2); "
        "psens.pss.runs has the confidence relation and the shot comparison with CIs"
    )
    return "\n".join(lines)
