r"""The headline of a run: per model, IPS overall and by order with its CI, what it pools,
the noise floor, accuracy and the caveats that say when a number is not a finding.

One function, :func:`headline` (also ``ds.psens.headline()``), computes it; ``psens
summary``, the HTML report, the notebooks and the README print it through
:func:`headline_lines`, so every surface shows the same numbers.

For each model :math:`m` at one shot count (default: the run's first, the IPS paper's
0-shot setting):

* IPS by order band :math:`b` — the mean over items of the per-item IPS (eq. 3 of [1]_ over
  all template pairs), with a percentile bootstrap CI over items
  (:func:`psens.ips.tables.order_ips_table`);
* the noise floor and the paired test of IPS against it (:func:`psens.ips.floor.noise_floor`,
  :func:`psens.ips.floor.floor_test`);
* accuracy :math:`\frac{1}{|X||T|}\sum_{x,t} \mathbb 1[\hat y(x|t) = y(x)]`, the chance level
  :math:`\frac{1}{|X|}\sum_x 1/k_x` (:math:`k_x` options of item :math:`x`), the majority
  answer and its share of all (item, template) predictions, and output consistency (the
  share of items answered the same under every template, fig. 4b of [1]_).

Caveats, from the data (the ``caveats`` column, ``""`` when none):

* ``"not above the noise floor"`` when the lower end of the CI of IPS − floor (all orders)
  is at or below 0: the template effect is not told apart from numerical noise, so neither
  it nor the model's factor effects are findings;
* ``"majority answer X on N %"`` when one answer is more than :data:`MAJORITY_SHARE` of the
  predictions: output consistency is then an artefact of always answering X;
* ``"accuracy at or below chance"``;
* ``"answer follows the few-shot examples (C)"`` at k > 0 shots when the majority answer
  moved to the letter the examples answer (:func:`psens.ips.verdicts.answer_confound`).

A model with any caveat is not a finding (:func:`psens.ips.verdicts.findings`): every
surface prints the verdict line of :func:`headline_lines`.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from psens._charts import is_synthetic, mark_synthetic
from psens.ips.floor import FLOOR_ALPHA, exceeds_floor
from psens.ips.metric import ORDER_LEVELS, block_status
from psens.settings import run_config, run_settings, tau_of
from psens.stats import majority_answer
from psens.store import DONE
from psens.store.labels import model_names

__all__ = [
    "FLOOR_ALPHA",
    "FOLLOWS_EXAMPLES",
    "MAJORITY_SHARE",
    "NOT_ABOVE_FLOOR",
    "above_floor",
    "answer_caveats",
    "answer_confound",
    "chance_level",
    "example_answers",
    "headline",
    "headline_lines",
    "headlines",
]

#: A model whose most frequent answer exceeds this share of its predictions is flagged.
MAJORITY_SHARE = 0.8
#: The caveat of a model whose IPS is not above its noise floor.
NOT_ABOVE_FLOOR = "not above the noise floor"
BELOW_CHANCE = "accuracy at or below chance"

_OPTION = re.compile(r"^\s*\(?([A-Za-z]|\d{1,2})[.):]", flags=re.M)


def _listed_options(prompt: str) -> int:
    """How many options the item's own list in ``prompt`` has: the last run of option
    markers whose labels count up from the first (``A B C``, ``a b c``, ``1 2 3``; one per
    line, as ``A.``, ``a)``, ``(A)``, ``1:``), so few-shot examples' lists before it and
    blank lines between the options do not count; 0 when the prompt lists none."""
    labels = _OPTION.findall(prompt)

    def step(a: str, b: str) -> bool:
        if a.isdigit() and b.isdigit():
            return int(b) == int(a) + 1
        return not a.isdigit() and not b.isdigit() and ord(b) == ord(a) + 1

    end = len(labels)
    while end > 0:  # from the end: the run of counting labels that ends at `end`
        start = end - 1
        while start > 0 and step(labels[start - 1], labels[start]):
            start -= 1
        if labels[start] in ("A", "a", "1"):
            return end - start
        end = start
    return 0


def chance_level(ds, shot: int | None = None) -> float:
    """Mean over items of :math:`1/k_x`, :math:`k_x` the options of item :math:`x` as its
    prompt lists them (:func:`_listed_options`: the last list of counting labels, i.e. the
    item's own, not a few-shot example's); NaN for open-ended items.
    In a cloze run (``answer = "cloze"``: the prompt lists no options) :math:`k_x` is the
    number of options scored as continuations (the non-empty ``option_label`` of item
    :math:`x`)."""
    from psens.ips.tables import at_shot

    if "option_label" in ds.coords:
        labels = ds["option_label"].transpose("sample", ...).values
        ks = np.array([sum(bool(str(x)) for x in row) for row in labels])
        return float(np.mean(1.0 / ks[ks > 0])) if (ks > 0).any() else float("nan")
    if "prompt" not in ds.variables:
        return float("nan")
    prompt = at_shot(ds["prompt"], shot)
    if "template" in prompt.dims:
        prompt = prompt.isel(template=0)
    ks = np.array([_listed_options(str(p)) for p in prompt.values.ravel()])
    return float(np.mean(1.0 / ks[ks > 0])) if (ks > 0).any() else float("nan")


def _scalar_shot(ds) -> int | None:
    shot = ds.coords.get("shot")
    return int(shot.values) if shot is not None and shot.ndim == 0 else None


def _pools(ds, shot: Any) -> dict:
    cfg = run_config(ds)
    n_t = int(ds.sizes.get("template", 0))
    done = block_status(ds)
    return {
        "shot": None if shot is None else int(shot),
        "templates": n_t,
        "pairs": n_t * (n_t - 1) // 2,
        "items": int(ds.sizes.get("sample", 0)),
        "items_done": None if done is None else int((done == DONE).any(axis=0).sum()),
        "dataset": str(ds.attrs.get("dataset", cfg.get("dataset", "")) or ""),
        "split": str(cfg.get("split") or ""),
    }


def _pools_text(p: dict) -> str:
    parts = [] if p["shot"] is None else [f"{p['shot']}-shot"]
    parts.append(f"{p['templates']} templates ({p['pairs']} pairs)")
    where = " ".join(x for x in (p["dataset"], p["split"]) if x)
    parts.append(f"{p['items']} items" + (f" of {where}" if where else ""))
    return ", ".join(parts)


#: The caveat of a model whose majority answer at k > 0 shots is a few-shot example's answer
#: it did not give at 0 shots (or gives far more often): it copies the examples' letter.
FOLLOWS_EXAMPLES = "answer follows the few-shot examples"
#: A rise of the examples' letter's share (k shots against 0 shots) that counts as following.
FOLLOW_RISE = 0.2

# "Answer: C", "ANSWER:: C", "Answer: (C)" on a line of its own: an example's answer.
_EXAMPLE = re.compile(r"(?im)^\W*answers?\W*:+\s*\(?([A-Z])\)?\s*$")


def example_answers(prompt: str) -> list[str]:
    """The answer letters of the few-shot examples written in ``prompt`` (in order).

    The item's own answer cue (``Answer:`` with nothing after it) is not an example.

    Examples
    --------
    >>> example_answers("Q: x\\nAnswer: C\\n\\nQ: y\\nANSWER:: A\\n\\nQ: z\\nAnswer:")
    ['C', 'A']
    """
    return _EXAMPLE.findall(str(prompt))


def _examples_by_shot(ds) -> dict[int, list[str]]:
    """Per shot setting, the example letters of the run's prompts (first template)."""
    if "prompt" not in ds.variables or "shot" not in ds.dims:
        return {}
    out = {}
    for shot in ds["shot"].values:
        prompt = ds["prompt"].sel(shot=shot)
        if "template" in prompt.dims:
            prompt = prompt.isel(template=0)
        letters: list[str] = []
        for p in np.ravel(prompt.values):
            for a in example_answers(p):
                if a not in letters:
                    letters.append(a)
        out[int(shot)] = letters
    return out


def answer_confound(ds) -> pd.DataFrame:
    """The answers per model and shot setting beside the few-shot examples' answers.

    Parameters
    ----------
    ds : xarray.Dataset
        A run with ``prediction`` (and a ``shot`` dim for the few-shot check).

    Returns
    -------
    pandas.DataFrame
        One row per model × shot: ``majority_answer``, ``majority_share``, ``examples`` (the
        letters the k examples answer, ``""`` at 0 shots), ``examples_share`` (the share of
        predictions that are one of those letters), ``rise`` (that share minus the same
        letters' share at 0 shots) and ``follows_examples``: the majority answer is an example
        letter and it either was not the 0-shot majority answer or its share rose by at least
        :data:`FOLLOW_RISE`.
    """
    examples = _examples_by_shot(ds)
    shots = [int(s) for s in ds["shot"].values] if "shot" in ds.dims else [None]
    rows = []
    for model in model_names(ds):
        pred = ds["prediction"].sel(model=model)
        zero = None
        for shot in shots:
            at = pred if shot is None else pred.sel(shot=shot)
            answers = [str(a).strip() for a in np.ravel(at.values) if a == a and a is not None]
            answers = [a for a in answers if a]
            letter, share, _ = majority_answer(answers)
            ex = examples.get(shot, []) if shot else []
            n = max(len(answers), 1)
            ex_share = sum(a in ex for a in answers) / n if ex else float("nan")
            if shot == 0 or shot is None:
                zero = (letter, answers)
            rise = float("nan")
            if ex and zero is not None:
                rise = ex_share - sum(a in ex for a in zero[1]) / max(len(zero[1]), 1)
            follows = bool(
                ex
                and letter in ex
                and (
                    zero is None or letter != zero[0] or (np.isfinite(rise) and rise >= FOLLOW_RISE)
                )
            )
            rows.append(
                {
                    "model": str(model),
                    "shot": shot,
                    "majority_answer": letter,
                    "majority_share": share,
                    "examples": "".join(ex),
                    "examples_share": ex_share,
                    "rise": rise,
                    "follows_examples": follows,
                }
            )
    return pd.DataFrame(rows)


def above_floor(head: pd.DataFrame) -> dict[str, bool]:
    """Per model of a :func:`headline`: is its IPS (all orders) above its noise floor?

    A model that is not has no findings — neither its template effect nor its factor
    effects (few-shot, instruction tuning, scale) are told apart from numerical noise — so
    the notebooks and widgets leave it out of every verdict.
    """
    rows = head[head["order"] == "all"]
    pairs = zip(rows["model"], rows["caveats"], strict=True)
    return {str(m): NOT_ABOVE_FLOOR not in str(c) for m, c in pairs}


def _answers(ds, shot: Any) -> pd.DataFrame:
    """Accuracy, majority answer and its share per model, over done blocks at ``shot``."""
    from psens.ips.tables import at_shot

    status = block_status(ds)
    pred = at_shot(ds["prediction"], shot).transpose("model", "sample", "template")
    text = np.vectorize(lambda v: "" if v is None or v != v else str(v).strip(), otypes=[object])(
        np.asarray(pred.values, dtype=object)
    )
    correct = None
    if "correct" in ds.variables:
        correct = at_shot(ds["correct"], shot).transpose("model", "sample", "template")
        correct = np.asarray(correct.values, dtype=float)
    rows = []
    for m, name in enumerate(model_names(ds)):
        keep = np.ones(text.shape[1], bool) if status is None else status[m] == DONE
        answer, share, given = majority_answer(text[m, keep])
        acc = np.nan
        if correct is not None and keep.any():
            c = correct[m, keep]
            acc = float(np.nanmean(c)) if np.isfinite(c).any() else np.nan
        rows.append(
            {
                "model": str(name),
                "accuracy": acc,
                "majority_answer": answer,
                "majority_share": share,
                "n_answers": given,
            }
        )
    return pd.DataFrame(rows)


def _answer_table(ds, shot: Any) -> pd.DataFrame:
    """:func:`_answers` with ``chance`` and ``answer_caveats`` (the caveats of
    :func:`answer_caveats`, joined with ``"; "``)."""
    answers = _answers(ds, shot)
    answers["chance"] = chance_level(ds, shot)
    follows = {}
    if shot:  # k > 0 shots: does the answer letter follow the examples'?
        conf = answer_confound(ds)
        conf = conf[(conf["shot"] == shot) & conf["follows_examples"]]
        follows = {r.model: f"{FOLLOWS_EXAMPLES} ({r.examples})" for r in conf.itertuples()}
    caveats = []
    for r in answers.itertuples():
        found = []
        if np.isfinite(r.majority_share) and r.majority_share > MAJORITY_SHARE:
            found.append(f"majority answer {r.majority_answer} on {100 * r.majority_share:.0f} %")
        if np.isfinite(r.accuracy) and np.isfinite(r.chance) and r.accuracy <= r.chance:
            found.append(BELOW_CHANCE)
        if r.model in follows:
            found.append(follows[r.model])
        caveats.append("; ".join(found))
    answers["answer_caveats"] = caveats
    return answers


def answer_caveats(ds, *, shot: int | None = None) -> dict[str, str]:
    r"""Per model, the caveats of its answers at one shot setting (``""``: none): the part of
    the headline's caveats that does not depend on interactions, so a run without masked
    prompts (a PSS run) is judged by the same rule.

    Over the done blocks at ``shot``, with :math:`\hat y(x|T)` the answers and :math:`k_x`
    the options of item :math:`x` (:func:`chance_level`):

    * ``"majority answer X on N %"`` when :math:`\max_a \frac{1}{|X||T|}\sum_{x,T}
      \mathbb 1[\hat y(x|T) = a] >` :data:`MAJORITY_SHARE` (the answers measure a
      preference for one answer, not the questions);
    * ``"accuracy at or below chance"`` when :math:`\frac{1}{|X||T|}\sum_{x,T} \mathbb
      1[\hat y(x|T) = y(x)] \le \frac{1}{|X|}\sum_x 1/k_x`;
    * :data:`FOLLOWS_EXAMPLES` at :math:`k > 0` shots (:func:`answer_confound`).

    :func:`headline` adds ``"not above the noise floor"`` in front for a run with
    interactions; :func:`psens.ips.verdicts.findings` reads them all.

    Parameters
    ----------
    ds : xarray.Dataset
        A run with ``prediction`` (and ``correct`` for the chance caveat).
    shot : int, optional
        Shot setting of a run with a ``shot`` dim (default: the first).

    Returns
    -------
    dict
        Model → its caveats joined with ``"; "``.

    References
    ----------
    .. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
    """
    if "shot" in ds.dims:
        shot = int(ds["shot"].values[0]) if shot is None else int(shot)
    status = block_status(ds)
    if status is not None and "prediction" in ds.variables:  # unfinished blocks do not count
        ds = ds.assign(prediction=ds["prediction"].where(ds["status"] == DONE, ""))
    table = _answer_table(ds, shot)
    return dict(zip(table["model"], table["answer_caveats"], strict=True))


def headline(
    ds,
    *,
    shot: int | None = None,
    tau: float | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: Any = 0,
) -> pd.DataFrame:
    """The run's headline: one row per model × order band (``all, low, mid, high``).

    Parameters
    ----------
    ds : xarray.Dataset
        A run (:func:`psens.open_run`).
    shot : int, optional
        Shot count of a run with a ``shot`` dim (default: the first, e.g. 0-shot). Numbers
        of different shots are never pooled.
    tau : float, optional
        Salience threshold (default: the run's own, :func:`psens.settings.run_settings`).
    n_boot, ci, seed
        Bootstrap resamples, CI level and seed (:mod:`psens.stats`).

    Returns
    -------
    pandas.DataFrame
        Columns ``model, order, ips, ips_lo, ips_hi, n_used, floor, diff, diff_lo, diff_hi,
        p_value, above_floor, accuracy, chance, majority_answer, majority_share,
        output_consistency, caveats`` and the model metadata (model-level columns repeat on
        each order row; ``caveats`` joins the model's caveats with ``"; "``). ``attrs``:
        ``pools`` (e.g. ``"0-shot, 5 templates (10 pairs), 8 items of arc-challenge
        validation"``), ``pooled`` (the same as a dict: shot, templates, pairs, items,
        items_done, dataset, split), ``tau``, ``floor`` (:func:`psens.ips.floor.floor_label`)
        and ``synthetic``.
    """
    if "shot" in ds.dims:
        shot = int(ds["shot"].values[0]) if shot is None else int(shot)
    return headlines(ds, shots=[shot], tau=tau, n_boot=n_boot, ci=ci, seed=seed)[shot]


def headlines(
    ds,
    *,
    shots: Any = None,
    tau: float | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: Any = 0,
) -> dict[int | None, pd.DataFrame]:
    """:func:`headline` at each of ``shots`` (default: every shot setting of the run; the
    key ``None`` for a run without a ``shot`` dim), the per-item IPS and the noise floor
    computed once for all of them. Numbers of different shots are never pooled."""
    from psens.ips import tables
    from psens.ips.floor import noise_floor

    ds = ds.load()
    status = block_status(ds)
    if status is not None and "prediction" in ds.variables:  # unfinished blocks do not count
        ds = ds.assign(prediction=ds["prediction"].where(ds["status"] == DONE, ""))
    tau = float(tau_of(ds, tau))
    if "shot" in ds.dims:
        have = [int(s) for s in ds["shot"].values]
        shots = have if shots is None else [int(s) for s in shots]
        for shot in shots:
            if shot not in have:
                from psens._validation import fail

                fail("headline", f"shot = {shot} is not in the run", f"Use one of {have}")
    else:  # a run already taken at one shot keeps it as a scalar coordinate
        shots = [None]
    per_sample = tables.per_sample_ips(ds, tau)
    floor = noise_floor(ds, tau=tau)
    return {
        shot: _headline(ds, shot, tau, per_sample, floor, n_boot=n_boot, ci=ci, seed=seed)
        for shot in shots
    }


def _headline(ds, shot, tau, per_sample, floor, *, n_boot, ci, seed) -> pd.DataFrame:
    """One shot setting's headline from the run's per-item IPS and noise floor."""
    from psens.ips import tables
    from psens.ips.floor import floor_label

    pooled = _pools(ds, shot if shot is not None else _scalar_shot(ds))
    table = tables.order_ips_table(
        per_sample, tables.model_meta(ds), shot, floor=floor, n_boot=n_boot, ci=ci, seed=seed
    )
    # above the floor: the CI of IPS − floor excludes 0 *and* the paired test agrees
    # (with few items a CI can exclude 0 where the sign-flip p cannot go below 2 / 2^n)
    table["above_floor"] = exceeds_floor(table["diff_lo"], table["p_value"])
    answers = _answer_table(ds, shot)
    answers["output_consistency"] = (
        tables.output_consistency(ds, shot).reindex(answers["model"]).to_numpy()
    )
    overall = table[table["order"] == "all"].set_index("model")["above_floor"]
    answers["caveats"] = [
        "; ".join(
            ([] if bool(overall.get(r.model, False)) else [NOT_ABOVE_FLOOR])
            + ([r.answer_caveats] if r.answer_caveats else [])
        )
        for r in answers.itertuples()
    ]
    answers = answers.drop(columns="answer_caveats")
    out = table.merge(answers.drop(columns="n_answers"), on="model", how="left")
    front = ["model", "order", "ips", "ips_lo", "ips_hi", "n_used", "floor", "diff"]
    front += ["diff_lo", "diff_hi", "p_value", "above_floor", "accuracy", "chance"]
    front += ["majority_answer", "majority_share", "output_consistency", "caveats"]
    out = out[front + [c for c in out.columns if c not in front]]
    out["order"] = pd.Categorical(out["order"], categories=ORDER_LEVELS, ordered=True)
    names = model_names(ds)
    out["model"] = pd.Categorical(out["model"], categories=names, ordered=True)
    out = out.sort_values(["model", "order"]).reset_index(drop=True)
    out["model"] = out["model"].astype(str)
    out["order"] = out["order"].astype(str)
    out.attrs.update(
        pools=_pools_text(pooled),
        pooled=pooled,
        tau=tau,
        floor=floor_label(floor),
        synthetic=bool(is_synthetic(ds)),
    )
    return mark_synthetic(out, ds)


def _verdict_words(row) -> str:
    """The verdict of one model's ``all`` row: a finding, or not and why."""
    if not row["caveats"]:
        return "a finding (above its noise floor, no caveat)"
    out = f"not a finding — {row['caveats']}"
    if bool(row["above_floor"]):
        out += " (above its noise floor, but then IPS measures its answer preference)"
    elif np.isfinite(float(row["diff_hi"])) and float(row["diff_hi"]) < 0:
        out += " (the CI of IPS − floor lies below 0: templates move it less than rounding does)"
    return out


def headline_lines(table: pd.DataFrame, notes: dict[str, str] | None = None) -> list[str]:
    """:func:`headline` as text: a line saying what it pools, then two lines per model::

        IPS of 0-shot, 5 templates (10 pairs), 8 items of arc-challenge validation; τ = 0.1;
        noise floor (measured: float32 vs bfloat16 scoring):
          smollm2-135m-instruct: IPS 1.612 [1.58, 1.64] (low 1.616, mid 1.658, high 1.500);
            floor 0.858, IPS − floor 0.754 [0.660, 0.875], d_z 4.25, p = 0.0065 (n = 8);
            accuracy 0.10 (chance 0.25); output consistency 0.75 (A is the majority answer)
            verdict: not a finding — majority answer A on 95 %; accuracy at or below chance
              (above its noise floor, but then IPS measures its answer preference)

    ``notes`` adds text to a model's first line (e.g. its pending blocks).
    """
    from psens.ips.floor import floor_test_line

    def num(x, fmt=".3f"):
        return format(float(x), fmt) if np.isfinite(float(x)) else "n/a"

    notes = notes or {}
    head = f"IPS of {table.attrs.get('pools', '')}; τ = {run_settings(table).tau:g}"
    if table.attrs.get("synthetic"):
        head = "synthetic data — " + head
    lines = [head + f"; noise floor ({table.attrs.get('floor', '')}):"]
    for model, rows in table.groupby("model", sort=False):
        r = rows.set_index("order")
        a = r.loc["all"]
        bands = ", ".join(f"{o} {num(r.loc[o, 'ips'])}" for o in ORDER_LEVELS[1:] if o in r.index)
        consistency = f"output consistency {num(a['output_consistency'], '.2f')}"
        if "majority answer" in a["caveats"]:
            consistency += f" ({a['majority_answer']} is the majority answer)"
        note = f"; {notes[model]}" if notes.get(model) else ""
        lines.append(
            f"  {model}: IPS {num(a['ips'])} [{num(a['ips_lo'], '.2f')}, {num(a['ips_hi'], '.2f')}]"
            f" ({bands}); floor {num(a['floor'])}, {floor_test_line(a)}; "
            f"accuracy {num(a['accuracy'], '.2f')} (chance {num(a['chance'], '.2f')}); "
            f"{consistency}{note}"
        )
        lines.append(f"    verdict: {_verdict_words(a)}")
    return lines
