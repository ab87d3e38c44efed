r"""One verdict per claim: is a model's IPS a finding, and does a factor effect hold?

Every surface (``psens summary``, the report, the notebooks, the README and
``data/runs/README.md``) takes its verdicts from here, so a quantity gets one verdict
everywhere and a model that is not a finding is left out the same way everywhere.

* :func:`findings` — per model of a :func:`psens.ips.headline.headline`: its IPS is a
  *finding* when the headline has no caveat: above its noise floor (the lower end of the CI of
  IPS − floor above 0), no majority answer on more than
  :data:`~psens.ips.headline.MAJORITY_SHARE` of the predictions, accuracy above chance, and —
  at k > 0 shots — an answer letter that does not follow the few-shot examples.
  A model answering one letter has an IPS that measures how firmly it prefers that letter,
  not how it reads the question: even a CI of IPS − floor that excludes 0 is no finding then.
* :func:`answer_confound` — the answer distribution per shot setting beside the answers of the
  few-shot examples in the prompt: a model whose majority answer moves to the examples'
  letter is copying the examples, so its few-shot ΔIPS is confounded.
* :func:`findings_models` — the models every factor verdict may use: a finding at each shot
  setting the verdict compares (so the few-shot verdict drops a model that copies the
  examples' letter).
* :func:`claim_text` — the one sentence form: "This run: … — the paper's claim holds here /
  does not hold here / this run cannot test the claim".

References
----------
.. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International Conference
   on Machine Learning (ICML), PMLR 306, 2026. arXiv:2608.18539.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from psens.ips.headline import FOLLOWS_EXAMPLES, answer_confound, example_answers

__all__ = [
    "FOLLOWS_EXAMPLES",
    "answer_confound",
    "claim_text",
    "example_answers",
    "findings",
    "findings_across",
    "findings_models",
]


def findings(head: pd.DataFrame) -> dict[str, str]:
    """Per model of a headline: ``""`` when its IPS is a finding, else why it is not.

    The reasons are the headline's caveats (``"not above the noise floor"``, ``"majority
    answer A on 95 %"``, ``"accuracy at or below chance"``, :data:`FOLLOWS_EXAMPLES`), joined
    with ``"; "``: one rule, so every surface calls the same models findings.
    """
    rows = head[head["order"] == "all"]
    return {str(m): str(c or "") for m, c in zip(rows["model"], rows["caveats"], strict=True)}


def findings_models(
    ds, shots: Sequence[int] | None = None, *, heads: Any = None, **headline_kw: Any
) -> dict[str, str]:
    """Per model: ``""`` when it is a finding at every shot setting of ``shots``, else why not.

    The one rule every verdict takes its models from: a model enters a verdict only when its
    IPS is a finding (:func:`findings`) at each shot setting whose numbers the verdict uses.
    A verdict at one shot setting (the order claim, the template kinds) passes that one; a
    factor verdict comparing shot settings passes all of them, so a model that copies the
    examples' letter at k shots is left out of the few-shot verdict.

    Parameters
    ----------
    ds : xarray.Dataset
        A run.
    shots : sequence of int, optional
        The shot settings. Default: the run's first (none for a run without a ``shot`` dim);
        with ``heads``, every headline given.
    heads : pandas.DataFrame or dict, optional
        Headlines already computed (:func:`psens.ips.headline.headline`, or
        :func:`psens.ips.headline.headlines` keyed by shot), used instead of computing them.
    **headline_kw
        Passed to :func:`psens.ips.headline.headlines` when ``heads`` is not given.

    Returns
    -------
    dict
        Model → ``""`` or its reasons (per shot setting when there are several).
    """
    from psens._validation import fail
    from psens.ips.headline import headlines

    if heads is None:
        if "shot" in ds.dims and shots is None:
            shots = [int(ds["shot"].values[0])]
        return findings_across(headlines(ds, shots=shots, **headline_kw))
    if isinstance(heads, pd.DataFrame):
        heads = {heads.attrs.get("pooled", {}).get("shot"): heads}
    if shots is not None:
        missing = [k for k in shots if k not in heads]
        if missing:
            fail("findings_models", f"no headline at shot {missing[0]}", f"Pass {list(heads)}")
        heads = {k: heads[k] for k in shots}
    return findings_across(heads)


def findings_across(heads: dict) -> dict[str, str]:
    """:func:`findings` over several shot settings' headlines
    (:func:`psens.ips.headline.headlines`): ``""`` for a model that is a finding in every
    one, else its reasons per shot setting (``"1-shot: …| 3-shot: …"``)."""
    why: dict[str, list[str]] = {}
    for shot, head in heads.items():
        for model, reason in findings(head).items():
            lst = why.setdefault(model, [])
            if reason:
                lst.append(f"{shot}-shot: {reason}" if len(heads) > 1 else reason)
    return {m: " | ".join(r) for m, r in why.items()}


def claim_text(run: str, holds: bool | None, synthetic: bool = False) -> str:
    """The one sentence form of a verdict on a paper's claim.

    Examples
    --------
    >>> claim_text("smollm2: low 1.2, mid 1.5", True)
    "This run: smollm2: low 1.2, mid 1.5 — the paper's claim holds here."
    >>> claim_text("no model is a finding", None)
    'This run: no model is a finding — this run cannot test the claim.'
    """
    outcome = {
        True: "the paper's claim holds here",
        False: "the paper's claim does not hold here",
        None: "this run cannot test the claim",
    }[None if holds is None else bool(holds)]
    who = "This synthetic run" if synthetic else "This run"
    return f"{who}: {run} — {outcome}."
