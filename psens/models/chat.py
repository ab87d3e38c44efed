r"""An instruct model asked with and without its chat template: is it the model or the prompt?

The IPS paper scores raw prompts (its templates, fig. 15, end in ``"Answer:"`` and the
answer token follows), for base and instruct models alike. An instruct model tuned to
answer inside its chat template may answer a raw prompt badly — e.g. with one letter on
most items — and then its accuracy and output consistency say more about the prompt
format than about the model. :func:`chat_comparison` asks the same items both ways
(:meth:`psens.models.Scorer.predict`, ``chat=False`` and ``chat=True``) and returns the
answer distribution of each, so a user sees which one it is.

For each item :math:`x`, template :math:`T` and way of asking :math:`a`, the answer is
:math:`\arg\max_o p(o \mid x, T, a)` over the option labels' answer tokens and the
distribution is the softmax over those tokens,

.. math::  q_o = \frac{p(o \mid x, T, a)}{\sum_{o'} p(o' \mid x, T, a)} .

The majority share of a way of asking is the share of its (item, template) answers equal
to its most frequent answer (:func:`psens.stats.majority_answer`, as the headline
counts it).

References
----------
.. [1] Qin, R., Wang, Q., Wang, T., Wei, Z., and Shen, W. "Evaluating and Explaining Prompt
   Sensitivity of LLMs Using Interactions." Proceedings of the 43rd International Conference
   on Machine Learning (ICML), PMLR 306, 2026. §4.1 and appendix E.3 (prompt format).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from psens._validation import fail

__all__ = ["ASKED", "chart", "chat_comparison", "majority"]

#: The two ways of asking, in the order of the ``asked`` dim.
ASKED = ("raw prompt", "chat template")


def chat_comparison(
    scorer: Any, items: Sequence[Any], templates: Sequence[str] = ("ips1",), *, shots=()
):
    """Answers of ``scorer`` to ``items`` asked as raw prompts and through its chat template.

    Parameters
    ----------
    scorer : psens.models.Scorer
        A loaded model (:func:`psens.models.load`).
    items : sequence of psens.datasets.Item
        Multiple-choice items with the same option labels (e.g. the items of a run).
    templates : sequence of str
        Template names (default ``("ips1",)``).
    shots : sequence of Item
        Few-shot examples (default none, the 0-shot prompt).

    Returns
    -------
    xarray.Dataset
        Dims ``(asked, sample, template, option)``; ``asked`` is :data:`ASKED`.
        ``choice`` and ``correct`` ``(asked, sample, template)``, ``option_prob``
        ``(asked, sample, template, option)`` (the softmax over the options' answer
        tokens, NaN for an option the item lacks) and ``answer`` ``(sample)``.

    Examples
    --------
    >>> import psens
    >>> scorer = psens.models.load("smollm2-135m-instruct")  # doctest: +SKIP
    >>> items = psens.datasets.load("arc-challenge", split="validation", limit=4)  # doctest: +SKIP
    >>> res = chat_comparison(scorer, items)  # doctest: +SKIP
    >>> majority(res)  # doctest: +SKIP
    """
    import xarray as xr

    where = "psens.models.chat.chat_comparison"
    items, templates = list(items), [str(t) for t in templates]
    if not items or not templates:
        fail(where, "no items or no templates", "Pass at least one item and one template")
    if any(not getattr(it, "options", None) for it in items):
        fail(
            where,
            "an item has no options",
            "Pass multiple-choice items (the chat check asks A/B/C/D)",
        )
    labels = list(dict.fromkeys(lab for it in items for lab, _ in it.options))
    shape = (len(ASKED), len(items), len(templates))
    choice = np.full(shape, "", dtype=object)
    correct = np.zeros(shape, dtype=bool)
    probs = np.full((*shape, len(labels)), np.nan)
    col = {lab: k for k, lab in enumerate(labels)}
    for a, chat in enumerate((False, True)):
        for i, item in enumerate(items):
            for t, template in enumerate(templates):
                p = scorer.predict(item, template, shots=shots, generate=False, chat=chat)
                choice[a, i, t], correct[a, i, t] = p.choice, bool(p.correct)
                for lab, q in p.option_probs.items():
                    probs[a, i, t, col[lab]] = q
    dims = ("asked", "sample", "template")
    return xr.Dataset(
        {
            "choice": (dims, choice),
            "correct": (dims, correct),
            "option_prob": ((*dims, "option"), probs),
            "answer": ("sample", np.asarray([it.answer for it in items], dtype=object)),
        },
        coords={
            "asked": list(ASKED),
            "sample": [str(it.id) for it in items],
            "template": templates,
            "option": labels,
        },
        attrs={"model": str(getattr(scorer, "name", ""))},
    )


def majority(res):
    """Per way of asking: the most frequent answer, its share, and the accuracy.

    Parameters
    ----------
    res : xarray.Dataset
        :func:`chat_comparison`'s result.

    Returns
    -------
    pandas.DataFrame
        Index ``asked``; columns ``majority_answer, majority_share, accuracy, answers``.
    """
    import pandas as pd

    from psens.stats import majority_answer

    rows = {}
    for asked in res["asked"].values:
        picks = res["choice"].sel(asked=asked).values.ravel()
        answer, share, _ = majority_answer(picks)
        rows[str(asked)] = {
            "majority_answer": answer,
            "majority_share": share,
            "accuracy": float(res["correct"].sel(asked=asked).mean()),
            "answers": int(picks.size),
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "asked"
    return out


def chart(res):
    """Answer shares per way of asking: one stacked bar each (altair), so a model that
    answers one letter either way is seen at a glance."""
    import pandas as pd

    from psens._charts import altair

    alt = altair()
    picks = res["choice"].to_dataframe().reset_index()
    counts = picks.groupby(["asked", "choice"]).size().rename("n").reset_index()
    counts["share"] = counts["n"] / counts.groupby("asked")["n"].transform("sum")
    counts["asked"] = pd.Categorical(counts["asked"], categories=list(ASKED), ordered=True)
    model = res.attrs.get("model", "")
    return (
        alt.Chart(counts)
        .mark_bar()
        .encode(
            x=alt.X(
                "share:Q", stack="normalize", title="share of answers", axis=alt.Axis(format="%")
            ),
            y=alt.Y("asked:N", sort=list(ASKED), title=None),
            color=alt.Color("choice:N", title="answer"),
            tooltip=["asked:N", "choice:N", "n:Q", alt.Tooltip("share:Q", format=".0%")],
        )
        .properties(
            title=f"{model}: answers asked as a raw prompt and through its chat template",
            width=420,
            height=90,
        )
    )
