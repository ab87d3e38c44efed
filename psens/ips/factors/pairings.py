"""The IPS paper's model pairings, as data (appendix E.2, E.6, G, I; figs. 5–8, tables 4–7).

Names are the ``name`` column of ``data/models.csv``. Every comparison of
:mod:`psens.factors` keeps only the pairs whose models are all in the run, so these
tables work on any subset of the 50 models; pass your own pairs to compare others.

Roles follow the paper's relative change :math:`\\Delta IPS = (IPS_A - IPS_B)/IPS_B`
(§4.3): ``A`` is the model *with* the factor (instruct/chat, dense, larger, few-shot) and
``B`` the one without (base, MoE, smaller, 0-shot).

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.
"""

from __future__ import annotations

from itertools import pairwise

__all__ = [
    "DENSE_MOE_FAMILIES",
    "FEW_SHOT_MODELS",
    "FEW_SHOT_TEMPLATES",
    "INSTRUCT_BASE_PAIRS",
    "MATCHED_ACTIVE_PAIRS",
    "PERTURBATION_MODELS",
    "SCALE_SERIES",
    "paper_pairings",
]

#: Factor 1 (§4.2, fig. 5; appendix E.2 (1)): (instruct/chat model, its base model).
INSTRUCT_BASE_PAIRS: tuple[tuple[str, str], ...] = (
    ("llama-2-7b-chat", "llama-2-7b"),
    ("llama-2-13b-chat", "llama-2-13b"),
    ("llama-2-70b-chat", "llama-2-70b"),
    ("llama-3-8b-instruct", "llama-3-8b"),
    ("mistral-7b-v0.3-instruct", "mistral-7b-v0.3"),
    ("mixtral-8x7b-instruct", "mixtral-8x7b"),
    ("internlm2-chat-7b", "internlm2-7b"),
    ("olmo-7b-instruct", "olmo-7b"),
    ("olmoe-7b-instruct", "olmoe-7b"),
    ("qwen2-7b-instruct", "qwen2-7b"),
    ("qwen3-4b-instruct", "qwen3-4b"),
    ("qwen3-8b-instruct", "qwen3-8b"),
    ("qwen3-14b-instruct", "qwen3-14b"),
    ("qwen1.5-moe-a2.7b-chat", "qwen1.5-moe-a2.7b"),
    ("qwen3-30b-a3b-instruct", "qwen3-30b-a3b"),
)

#: Factor 2 (§4.2, fig. 6; appendix E.2 (3)): series label -> models by increasing scale.
SCALE_SERIES: dict[str, tuple[str, ...]] = {
    "Llama-2 (Base)": ("llama-2-7b", "llama-2-13b", "llama-2-70b"),
    "Llama-2 (Chat)": ("llama-2-7b-chat", "llama-2-13b-chat", "llama-2-70b-chat"),
    "Qwen2 (Instruct)": (
        "qwen2-0.5b-instruct",
        "qwen2-1.5b-instruct",
        "qwen2-7b-instruct",
        "qwen2-72b-instruct",
    ),
    "Qwen2.5 (Instruct)": (
        "qwen2.5-0.5b-instruct",
        "qwen2.5-1.5b-instruct",
        "qwen2.5-3b-instruct",
        "qwen2.5-7b-instruct",
        "qwen2.5-14b-instruct",
        "qwen2.5-32b-instruct",
        "qwen2.5-72b-instruct",
    ),
    "Qwen3 (Instruct)": (
        "qwen3-0.6b-instruct",
        "qwen3-1.7b-instruct",
        "qwen3-4b-instruct",
        "qwen3-8b-instruct",
        "qwen3-14b-instruct",
        "qwen3-32b-instruct",
    ),
    "Olmo2 (Instruct)": (
        "olmo-2-1b-instruct",
        "olmo-2-7b-instruct",
        "olmo-2-13b-instruct",
        "olmo-2-32b-instruct",
    ),
}

#: Factor 3 (§4.2, fig. 7; appendix E.2 (2)): family -> (dense models, MoE models).
#: ΔIPS of a family is the mean over all (dense, MoE) pairs of the family (§4.3).
DENSE_MOE_FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Llama": (
        (
            "llama-2-7b",
            "llama-2-7b-chat",
            "llama-2-13b",
            "llama-2-13b-chat",
            "llama-2-70b",
            "llama-2-70b-chat",
            "llama-3-8b",
            "llama-3-8b-instruct",
        ),
        ("llama-moe-v1-3.5b-2.8-sft", "llama-moe-v2-3.8b-2.8-sft"),
    ),
    "Mistral": (
        ("mistral-7b-v0.3", "mistral-7b-v0.3-instruct"),
        ("mixtral-8x7b", "mixtral-8x7b-instruct"),
    ),
    "Qwen": (
        (
            "qwen2-7b",
            "qwen2-7b-instruct",
            "qwen2-72b-instruct",
            "qwen2.5-7b-instruct",
            "qwen2.5-14b-instruct",
            "qwen2.5-32b-instruct",
            "qwen2.5-72b-instruct",
            "qwen3-4b",
            "qwen3-4b-instruct",
            "qwen3-8b",
            "qwen3-8b-instruct",
            "qwen3-14b",
            "qwen3-14b-instruct",
            "qwen3-32b-instruct",
        ),
        ("qwen1.5-moe-a2.7b", "qwen1.5-moe-a2.7b-chat", "qwen3-30b-a3b", "qwen3-30b-a3b-instruct"),
    ),
    "Olmo": (
        (
            "olmo-7b",
            "olmo-7b-instruct",
            "olmo-2-7b-instruct",
            "olmo-2-13b-instruct",
            "olmo-2-32b-instruct",
        ),
        ("olmoe-7b", "olmoe-7b-instruct"),
    ),
}

#: Appendix I, table 7: (dense, MoE) with matched activated parameters and training kind.
MATCHED_ACTIVE_PAIRS: tuple[tuple[str, str], ...] = (
    ("qwen2.5-3b-instruct", "qwen1.5-moe-a2.7b-chat"),
    ("olmo-1b", "olmoe-7b"),
    ("qwen3-4b", "qwen3-30b-a3b"),
    ("qwen3-4b-instruct", "qwen3-30b-a3b-instruct"),
)

#: Factor 4 (§4.2, fig. 8): the models run with 0/1/2/3 shots.
FEW_SHOT_MODELS: tuple[str, ...] = (
    "llama-2-7b",
    "llama-2-7b-chat",
    "llama-3-8b",
    "llama-3-8b-instruct",
    "mistral-7b-v0.3",
    "mistral-7b-v0.3-instruct",
    "qwen2-7b",
    "qwen2-7b-instruct",
    "qwen2.5-7b-instruct",
    "qwen3-8b-instruct",
    "olmo-2-7b-instruct",
    "olmoe-7b-instruct",
    "qwen1.5-moe-a2.7b-chat",
)

#: Appendix E.6: the few-shot experiment uses only prompt templates 1 and 4 (fig. 15).
FEW_SHOT_TEMPLATES: tuple[str, str] = ("ips1", "ips4")

#: Appendix G, tables 4 (dense) and 5 (MoE): models analysed by perturbation kind.
PERTURBATION_MODELS: dict[str, tuple[str, ...]] = {
    "dense": (
        "internlm2-chat-7b",
        "llama-2-13b-chat",
        "llama-2-7b-chat",
        "llama-3-8b-instruct",
        "mistral-7b-v0.3-instruct",
        "olmo-2-7b-instruct",
        "olmo-7b-instruct",
        "qwen2-7b-instruct",
        "qwen2.5-7b-instruct",
        "qwen3-8b-instruct",
    ),
    "moe": (
        "llama-moe-v1-3.5b-2.8-sft",
        "llama-moe-v2-3.8b-2.8-sft",
        "mixtral-8x7b-instruct",
        "olmoe-7b-instruct",
        "qwen1.5-moe-a2.7b-chat",
        "qwen3-30b-a3b-instruct",
    ),
}


def paper_pairings():
    """All pairings above as one tidy DataFrame.

    Columns ``factor`` (instruct_vs_base, scale, dense_vs_moe, matched_active),
    ``group`` (family or series), ``model_a`` and ``model_b`` (A has the factor: instruct,
    dense, or the next larger model of a series).

    Examples
    --------
    >>> t = paper_pairings()
    >>> int((t["factor"] == "instruct_vs_base").sum())
    15
    """
    import pandas as pd

    rows = [("instruct_vs_base", "all", a, b) for a, b in INSTRUCT_BASE_PAIRS]
    for label, models in SCALE_SERIES.items():
        rows += [("scale", label, big, small) for small, big in pairwise(models)]
    for family, (dense, moe) in DENSE_MOE_FAMILIES.items():
        rows += [("dense_vs_moe", family, d, m) for d in dense for m in moe]
    rows += [("matched_active", "table 7", a, b) for a, b in MATCHED_ACTIVE_PAIRS]
    return pd.DataFrame(rows, columns=["factor", "group", "model_a", "model_b"])
