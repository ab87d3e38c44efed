"""Synthetic runs of the store schema (no model is run), paper-named demo runs, run comparison.

A synthetic run has the exact layout of a stored run (:mod:`psens.store`) without any
model: each sample gets a sparse set of AND and OR effects, and each template perturbs
them with a model-specific ``instability``; the games ``v`` are rebuilt from the
interactions (universal matching holds exactly).

Paper-named synthetic runs for demos, notebooks and tests (no model is run).

:func:`paper_models` turns names of ``data/models.csv`` into the ``models`` argument of
:func:`synthetic_run`, with a *toy* instability that follows the directions
the IPS paper reports (instruct/chat < base, larger < smaller, dense < MoE); few-shot
reduction comes from ``synthetic_run`` itself (instability / (1 + shot)). The numbers are
illustrative only: they let every analysis run on real model names and pairings, nothing
more.

References
----------
.. [1] Qin et al., ICML 2026; the full reference is in :mod:`psens.ips`.

Synthetic runs are labelled synthetic: their numbers illustrate the method, never [1]'s findings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from psens._validation import fail
from psens.interactions import inverse_mobius_and, reconstruct
from psens.store import DONE, build

__all__ = [
    "TINY_MODELS",
    "assert_run_equal",
    "paper_models",
    "paper_run",
    "synthetic_pss_run",
    "synthetic_run",
]

DEFAULT_MODELS = {
    # name: (family, series, kind, arch, params (B), active params (B), instability)
    "toy-7b": ("toy", "toy", "base", "dense", 7.0, 7.0, 0.8),
    "toy-7b-instruct": ("toy", "toy", "instruct", "dense", 7.0, 7.0, 0.5),
    "toy-14b-instruct": ("toy", "toy", "instruct", "dense", 14.0, 14.0, 0.35),
    "toy-moe-instruct": ("toy", "toy-moe", "instruct", "moe", 16.0, 3.0, 0.6),
}
PAPER_TEMPLATES = ("ips1", "ips2", "ips3", "ips4", "ips5")
PERTURBATION = ("", "altering", "adding", "mixed", "altering")
LETTERS = "ABCD"


def synthetic_run(
    models: Mapping[str, Sequence] | None = None,
    *,
    n_samples: int = 12,
    templates: Sequence[str] = PAPER_TEMPLATES,
    n_vars: Sequence[int] = (4, 5, 6),
    effects: int = 4,
    shots: Sequence[int] | None = None,
    seed: int = 0,
):
    """A complete run Dataset (every block done) with known structure.

    Parameters
    ----------
    models : mapping name -> (family, series, kind, arch, params, active_params, instability)
        ``instability`` scales how much each template perturbs the shared effects.
    n_samples : int
        Samples; sample ``k`` has ``n_vars[k % len(n_vars)]`` variables.
    effects : int
        AND and OR effects per sample (each).
    shots : sequence of int, optional
        Adds a ``shot`` dim; instability shrinks as ``1 / (1 + shot)``.
    """
    rng = np.random.default_rng(seed)
    models = dict(models or DEFAULT_MODELS)
    names = list(models)
    n_max = max(n_vars)
    size = 1 << n_max
    samples = [f"s{k:03d}" for k in range(n_samples)]
    ns = [n_vars[k % len(n_vars)] for k in range(n_samples)]
    words = [[f"w{k}_{i}" for i in range(n)] for k, n in enumerate(ns)]
    answers = [LETTERS[k % 4] for k in range(n_samples)]
    shot_list = list(shots) if shots is not None else [0]
    prompt_shape = (n_samples, len(shot_list), len(templates))
    prompts = np.empty(prompt_shape, dtype=object)
    for s in range(n_samples):
        for h, shot in enumerate(shot_list):
            for t, name in enumerate(templates):
                prompts[s, h, t] = f"[{name}, {shot}-shot] question {samples[s]} ... Answer:"
    ds = build(
        models=names,
        samples=samples,
        templates=list(templates),
        words=words,
        prompts=prompts if shots is not None else prompts[:, 0],
        targets=[f" {a}" for a in answers],
        n_max=n_max,
        shots=shots,
        model_meta={
            key: [models[m][i] for m in names]
            for i, key in enumerate(("family", "series", "kind", "arch", "params", "active_params"))
        },
        perturbation=list(PERTURBATION[: len(templates)])
        + ["altering"] * max(0, len(templates) - len(PERTURBATION)),
        attrs={"tau": 0.1, "synthetic": True, "seed": seed},
    )
    lead = (len(names), n_samples, len(shot_list), len(templates))
    I_and = np.full((*lead, size), np.nan)
    I_or = np.full((*lead, size), np.nan)
    for s, n in enumerate(ns):
        base_and, base_or = np.zeros(1 << n), np.zeros(1 << n)
        base_and[rng.integers(1, 1 << n, effects)] = rng.laplace(0, 2, effects)
        base_or[rng.integers(1, 1 << n, effects)] = rng.laplace(0, 1, effects)
        base_and[0], base_or[0] = rng.normal(0, 0.5), 0.0
        for m, name in enumerate(names):
            inst = float(models[name][6])
            for h, shot in enumerate(shot_list):
                scale = inst / (1 + shot)
                for t in range(len(templates)):
                    noise_a = rng.normal(0, scale, 1 << n) * (np.abs(base_and) + 0.2)
                    noise_o = rng.normal(0, scale, 1 << n) * (np.abs(base_or) + 0.2)
                    I_and[m, s, h, t, : 1 << n] = base_and + noise_a
                    I_or[m, s, h, t, : 1 << n] = base_or + noise_o
    v = np.full_like(I_and, np.nan)
    gamma = np.full_like(I_and, np.nan)
    for n in sorted(set(ns)):
        idx = [s for s, k in enumerate(ns) if k == n]
        a, o = I_and[:, idx, ..., : 1 << n], I_or[:, idx, ..., : 1 << n]
        vv = reconstruct(a, o)
        v[:, idx, ..., : 1 << n] = vv
        gamma[:, idx, ..., : 1 << n] = inverse_mobius_and(a) - 0.5 * vv
    full_mask = np.array([(1 << n) - 1 for n in ns])
    v_full = np.take_along_axis(v, full_mask[None, :, None, None, None], axis=-1)[..., 0]
    p = 1.0 / (1.0 + np.exp(-v_full))
    answer_idx = np.array([LETTERS.index(a) for a in answers])[None, :, None, None]
    other = (answer_idx + 1 + rng.integers(0, 3, lead)) % 4
    pred_idx = np.where(v_full > 0, answer_idx, other)
    prediction = np.array(list(LETTERS), dtype=object)[pred_idx]
    inst = np.array([float(models[m][6]) for m in names])[:, None, None, None]
    n_pairs = len(templates) * (len(templates) - 1) // 2
    cos = 1.0 - inst * rng.uniform(0.0, 0.2, (*lead[:3], n_pairs))
    l2 = inst * rng.uniform(1.0, 3.0, (*lead[:3], n_pairs))

    def put(name, value):
        value = value if shots is not None else value[:, :, 0]
        ds[name].values[...] = value

    put("I_and", I_and)
    put("I_or", I_or)
    put("v", v)
    put("gamma", gamma)
    put("p_target", p)
    put("confidence", np.maximum(p, 1 - p))
    put("correct", (pred_idx == answer_idx).astype(float))
    put("prediction", prediction)
    put("generated", prediction)
    put("hidden_cosine", cos)
    put("hidden_l2", l2)
    ds["matching_error"].values[...] = 0.0
    ds["status"].values[...] = DONE
    return ds


def synthetic_pss_run(
    models: Sequence[str] = ("synthetic-small", "synthetic-large"),
    *,
    n_samples: int = 24,
    n_templates: int = 12,
    shots: Sequence[int] = (0, 1, 3),
    seed: int = 0,
):
    """A predictions-only run (the PSS layout, ``n_vars = 0``) with made-up answers.

    Instance ``i`` of model ``m`` is answered correctly under each template with a
    probability that is pulled towards 0 or 1 as shots are added and for later models; the
    decoding confidence rises as the instance's answers agree. So PSS falls with shots and
    with confidence *by construction*: the run shows what the analyses compute, never a
    finding (attr ``synthetic``).
    """
    rng = np.random.default_rng(seed)
    names, shot_list = list(models), list(shots)
    samples = [f"item{k:03d}" for k in range(n_samples)]
    templates = [f"V{t + 1:02d}" for t in range(n_templates)]
    prompts = np.empty((n_samples, len(shot_list), n_templates), dtype=object)
    for s, h, t in np.ndindex(prompts.shape):
        prompts[s, h, t] = f"[{templates[t]}, {shot_list[h]}-shot] question {samples[s]} Answer:"
    ds = build(
        models=names,
        samples=samples,
        templates=templates,
        words=[[] for _ in samples],
        prompts=prompts,
        targets=[f" {LETTERS[k % 4]}" for k in range(n_samples)],
        n_max=0,
        shots=shot_list,
        attrs={"synthetic": True, "seed": seed},
    )
    base = rng.uniform(0.05, 0.95, size=(len(names), n_samples, 1, 1))
    sharp = (1 + np.arange(len(names)))[:, None, None, None] * (1 + np.asarray(shot_list))[
        None, None, :, None
    ]
    p = 1 / (1 + ((1 - base) / base) ** sharp)  # towards 0 or 1 as `sharp` grows
    shape = (len(names), n_samples, len(shot_list), n_templates)
    correct = (rng.random(shape) < p).astype(float)
    agree = np.abs(2 * correct.mean(axis=-1, keepdims=True) - 1)
    ds["correct"].values[:] = correct
    ds["confidence"].values[:] = np.clip(0.3 + 0.6 * agree + 0.1 * rng.normal(size=shape), 0, 1)
    ds["p_target"].values[:] = np.where(correct == 1, 0.6, 0.2)
    ds["status"].values[:] = DONE
    return ds


def assert_run_equal(a, b, *, check_attrs: bool = True) -> None:
    """Assert two runs hold identical numbers, texts and coords (NaN == NaN).

    Used for resume and distributed-vs-serial tests: identical means bit for bit.
    """
    import xarray as xr

    from psens.store.labels import label_run

    # an opened run and a built one carry the same labels: compare like with like
    a, b = label_run(a).load(), label_run(b).load()
    assert set(a.data_vars) == set(b.data_vars), set(a.data_vars) ^ set(b.data_vars)
    for name in a.data_vars:
        x, y = a[name].values, b[name].values
        if x.dtype.kind == "f":
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            assert (x.astype(str) == y.astype(str)).all(), name
    xr.testing.assert_identical(a.coords.to_dataset(), b.coords.to_dataset())
    if check_attrs:
        assert a.attrs == b.attrs


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
    """A synthetic run (:func:`psens.synthetic.synthetic_run`) over paper-named models."""

    return synthetic_run(
        paper_models(names),
        n_samples=n_samples,
        shots=None if shots is None else list(shots),
        seed=seed,
    )
