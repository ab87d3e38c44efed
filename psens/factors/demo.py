"""Paper-named synthetic runs for demos, notebooks and tests (no model is run).

:func:`paper_models` turns names of ``data/models.csv`` into the ``models`` argument of
:func:`psens.testing.synthetic_run`, with a *toy* instability that follows the directions
the IPS paper reports (instruct/chat < base, larger < smaller, dense < MoE); few-shot
reduction comes from ``synthetic_run`` itself (instability / (1 + shot)). The numbers are
illustrative only: they let every analysis run on real model names and pairings, nothing
more.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from psens._validation import fail

__all__ = ["TINY_MODELS", "paper_models", "paper_run"]

#: a small set of models that covers all four factors and both perturbation tables
TINY_MODELS: tuple[str, ...] = (
    "llama-2-7b",
    "llama-2-7b-chat",
    "llama-2-13b",
    "llama-2-13b-chat",
    "llama-moe-v1-3.5b-2.8-sft",
    "qwen3-4b",
    "qwen3-4b-instruct",
    "qwen3-8b-instruct",
    "qwen3-30b-a3b",
    "qwen3-30b-a3b-instruct",
)


def paper_models(names: Sequence[str] | None = None) -> dict[str, tuple]:
    """``{name: (family, series, kind, arch, params, active_params, instability)}``.

    Toy instability: ``0.95 − 0.25·[instruct/chat] − 0.08·log2(active params in B)
    + 0.15·[MoE]``, clipped to [0.15, 1.2]. ``names`` default: all 50 paper models.
    """
    from psens.models.registry import model_table

    table = model_table()
    table = table[table["source"].astype(str).str.startswith("IPS paper")]
    if names is not None:
        missing = [n for n in names if n not in set(table["name"])]
        if missing:
            fail("paper_models", f"{missing} are not paper models", "Use names of models.csv")
        table = table.set_index("name").loc[list(names)].reset_index()
    out = {}
    for _, r in table.iterrows():
        tuned = str(r["kind"]) in ("instruct", "chat")
        moe = str(r["arch"]) == "moe"
        inst = 0.95 - 0.25 * tuned - 0.08 * np.log2(float(r["active_params"])) + 0.15 * moe
        out[str(r["name"])] = (
            str(r["family"]),
            str(r["series"]),
            str(r["kind"]),
            str(r["arch"]),
            float(r["params"]),
            float(r["active_params"]),
            float(np.clip(inst, 0.15, 1.2)),
        )
    return out


def paper_run(
    names: Sequence[str] | None = TINY_MODELS,
    *,
    n_samples: int = 12,
    shots: Sequence[int] | None = (0, 1, 2, 3),
    seed: int = 0,
):
    """A synthetic run (:func:`psens.testing.synthetic_run`) over paper-named models."""
    from psens.testing import synthetic_run

    return synthetic_run(
        paper_models(names),
        n_samples=n_samples,
        shots=None if shots is None else list(shots),
        seed=seed,
    )
