r"""Mind Your Format's published accuracies as a format-space Dataset.

Voronov, Wolf and Ryabinin [1]_ evaluated 20 language models (1B–70B) on four classification
tasks (SST-2, DBpedia, AG News, TREC) under prompt templates with four format dimensions:

==================  ======================================================================
``inp_verbalizer``  how the input is introduced (``"{}"``, ``"text: {}"``, ``"input: {}"``,
                    ``"sentence: {}"``)
``out_verbalizer``  how the label is introduced (``"label: {}"``, ``"It was {}."``, ...;
                    dataset-specific)
``sep``             between input and output (``" "`` or ``"\n"``)
``big_sep``         between demonstrations (``" "``, ``"\n"`` or ``"\n\n"``)
==================  ======================================================================

``data/reference/mind-your-format/`` holds the repository's ``non_ensemble_runs.csv`` (one
row per seed, model, dataset, number of shots, template list, prediction method and
demonstration-selection method, with the accuracies of the list's ten templates) and the
three template lists of each dataset (``predefined_templates/<dataset>.json``, template
lists ``59``, ``13`` and ``21``); provenance and licence (Apache-2.0) in
``data/reference/README.md``. :func:`mind_your_format` reads one dataset into the shape of a
psens format-space run, so :mod:`psens.formats.analysis` applies unchanged:

* ``template`` — the 30 templates, named ``t<list>-<i>`` (``t59-0`` … ``t21-9``), with the
  four dimensions as coordinates ``fmt_inp_verbalizer``, ``fmt_out_verbalizer``,
  ``fmt_sep``, ``fmt_big_sep`` (what :func:`psens.formats.analysis.format_coords` reads) and
  ``template_list``, ``template_index``;
* ``sample`` — the evaluation runs (one accuracy per template, not items: the paper
  publishes no per-item predictions), named ``"<n>-shot <prediction> <selection> seed
  <seed>"`` (``"0-shot <prediction> seed 59"`` without demonstrations), with coordinates
  ``n_shots``, ``prediction`` (``direct``, ``channel``, ``calibrate``), ``selection``
  (``random``, ``z-ICL``, ``implicitly_topic_models``; ``0-shot`` for every run without
  demonstrations, which the CSV labels ``0-shot`` or ``random``) and ``seed`` (the
  demonstrations' seed);
* ``model`` — the 20 models, with ``family`` and ``active_params`` (billions, as named;
  ``gptj`` is GPT-J-6B and ``gpt-neox`` GPT-NeoX-20B in the repository's ``models.py``);
* ``correct[model, sample, template]`` — the published accuracy (0–1) of the template in
  that run, NaN where the run did not evaluate the template (runs with seed 13 or 21, and
  0-shot runs, evaluated list ``59`` only); ``status[model, sample]`` — done.

That ``scores[i]`` is the accuracy of template ``i`` of the row's list is read from the
repository's code (the templates are generated, then evaluated in order); the data agree:
list ``13``'s templates 1 and 2 are the same template and have the same accuracy in every
row. A template's coordinates need not be unique (that duplicate is kept under both names).

Accuracy analyses over runs instead of items read as follows: a bootstrap over ``sample``
resamples evaluation runs (demonstration seeds, selection and prediction methods, shots),
and :func:`psens.formats.analysis.dimension_accuracy` averages the absolute accuracy change
between formats one change apart over runs.

References
----------
.. [1] Voronov, A., Wolf, L., and Ryabinin, M. "Mind Your Format: Towards Consistent
   Evaluation of In-Context Learning Improvements." Findings of the Association for
   Computational Linguistics: ACL 2024, pages 6287–6310. arXiv:2401.06766. Data: GitHub
   ``yandex-research/mind-your-format`` (Apache-2.0).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from psens._validation import fail

__all__ = ["MIND_YOUR_FORMAT_DATASETS", "MIND_YOUR_FORMAT_DIMENSIONS", "mind_your_format"]

#: the four tasks, by the repository's names
MIND_YOUR_FORMAT_DATASETS = ("sst2", "dbpedia", "agnews", "trec")
#: the four format dimensions of a template, in the repository's names
MIND_YOUR_FORMAT_DIMENSIONS = ("inp_verbalizer", "out_verbalizer", "sep", "big_sep")
WHERE = "psens.formats.mind_your_format"

#: family and size (billions of parameters, as the model is named) of each model
_MODELS = {
    "bloom-1.7b": ("BLOOM", 1.7),
    "bloom-3b": ("BLOOM", 3.0),
    "bloom-7.1b": ("BLOOM", 7.1),
    "falcon-1b": ("Falcon", 1.0),
    "falcon-7b": ("Falcon", 7.0),
    "falcon-40b": ("Falcon", 40.0),
    "gptj": ("GPT-J", 6.0),
    "gpt-neox": ("GPT-NeoX", 20.0),
    "llama-7b": ("LLaMA", 7.0),
    "llama-13b": ("LLaMA", 13.0),
    "llama-30b": ("LLaMA", 30.0),
    "llama-65b": ("LLaMA", 65.0),
    "llama-2-7b-hf": ("Llama 2", 7.0),
    "llama-2-13b-hf": ("Llama 2", 13.0),
    "llama-2-70b-hf": ("Llama 2", 70.0),
    "opt-6.7b": ("OPT", 6.7),
    "opt-30b": ("OPT", 30.0),
    "opt-66b": ("OPT", 66.0),
    "pythia-6.9b": ("Pythia", 6.9),
    "pythia-12b": ("Pythia", 12.0),
}


def _folder(folder: str | os.PathLike | None) -> Path:
    if folder is not None:
        return Path(folder).expanduser()
    from psens.models.registry import data_dir

    return data_dir() / "reference" / "mind-your-format"


def _templates(folder: Path, dataset: str) -> pd.DataFrame:
    """One row per template: name, list, index and the four dimensions."""
    path = folder / "predefined_templates" / f"{dataset}.json"
    if not path.is_file():
        fail(WHERE, f"{path} is missing", "Pass folder= a copy of data/reference/mind-your-format")
    rows = []
    for lst, texts in json.loads(path.read_text(encoding="utf-8")).items():
        for i, text in enumerate(texts):
            fields = json.loads(text)
            rows.append(
                {
                    "template": f"t{lst}-{i}",
                    "template_list": int(lst),
                    "template_index": i,
                    **{d: fields[d] for d in MIND_YOUR_FORMAT_DIMENSIONS},
                }
            )
    return pd.DataFrame(rows)


def _runs(folder: Path, dataset: str) -> pd.DataFrame:
    """The CSV's rows of ``dataset`` with readable run labels."""
    path = folder / "non_ensemble_runs.csv"
    if not path.is_file():
        fail(WHERE, f"{path} is missing", "Pass folder= a copy of data/reference/mind-your-format")
    df = pd.read_csv(path)
    df = df[df["dataset"] == dataset].copy()
    df["prediction"] = df["prediction_method"].str.split("_").str[0]  # "direct_False" etc.
    df["selection"] = np.where(df["n_shots"] == 0, "0-shot", df["selection_method"])
    columns = (df["n_shots"], df["prediction"], df["selection"], df["seed"])
    df["run"] = [
        f"{n}-shot {p}" + (f" {s}" if n else "") + f" seed {seed}"
        for n, p, s, seed in zip(*columns, strict=True)
    ]
    return df


def mind_your_format(dataset: str = "sst2", *, folder: str | os.PathLike | None = None):
    """One dataset of Mind Your Format's published accuracies as a format-space Dataset.

    Parameters
    ----------
    dataset : str
        ``"sst2"``, ``"dbpedia"``, ``"agnews"`` or ``"trec"``.
    folder : path, optional
        A folder holding ``non_ensemble_runs.csv`` and ``predefined_templates/`` (default:
        the copy in ``data/reference/mind-your-format/``).

    Returns
    -------
    xarray.Dataset
        Dims ``model`` (20), ``sample`` (the evaluation runs) and ``template`` (30);
        ``correct[model, sample, template]`` the published accuracy (NaN: not evaluated),
        ``status[model, sample]``; the format dimensions as ``fmt_*`` coordinates of
        ``template`` (see the module docstring).

    Examples
    --------
    >>> ds = mind_your_format("sst2")
    >>> dict(ds.sizes)
    {'model': 20, 'sample': 23, 'template': 30}
    >>> str(ds.fmt_out_verbalizer.sel(template="t59-2").item())
    'It was {}.'
    """
    import xarray as xr

    from psens import store

    key = str(dataset).strip().lower()
    if key not in MIND_YOUR_FORMAT_DATASETS:
        fail(
            WHERE,
            f"unknown dataset {dataset!r}",
            f"Use one of {list(MIND_YOUR_FORMAT_DATASETS)}",
        )
    root = _folder(folder)
    templates = _templates(root, key)
    df = _runs(root, key)
    models = [m for m in _MODELS if m in set(df["model"])]
    models += sorted(set(df["model"]) - set(models))
    runs = (
        df.drop_duplicates("run")
        .sort_values(["n_shots", "prediction", "selection", "seed"])
        .set_index("run")
    )
    t_pos = {(r.template_list, r.template_index): t for t, r in enumerate(templates.itertuples())}
    m_pos = {m: i for i, m in enumerate(models)}
    s_pos = {r: i for i, r in enumerate(runs.index)}
    correct = np.full((len(models), len(runs), len(templates)), np.nan)
    for row in df.itertuples():
        scores = json.loads(row.scores)
        cells = [t_pos[(int(row.template_seed), i)] for i in range(len(scores))]
        target = correct[m_pos[row.model], s_pos[row.run], cells]
        if np.isfinite(target).any():
            fail(
                WHERE,
                f"{row.model} {row.run!r} template list {row.template_seed} appears twice",
                "Pass the CSV as published",
            )
        correct[m_pos[row.model], s_pos[row.run], cells] = scores
    done = np.isfinite(correct).any(axis=2)
    status = np.where(done, store.DONE, store.PENDING).astype("int8")
    info = [_MODELS.get(m, ("", np.nan)) for m in models]
    fmt = {
        f"fmt_{d}": ("template", templates[d].to_numpy(dtype=object))
        for d in MIND_YOUR_FORMAT_DIMENSIONS
    }
    return xr.Dataset(
        {
            "correct": (("model", "sample", "template"), correct),
            "status": (("model", "sample"), status),
        },
        coords={
            "model": np.asarray(models, dtype=object),
            "family": ("model", np.asarray([f for f, _ in info], dtype=object)),
            "active_params": ("model", np.asarray([p for _, p in info], dtype=float)),
            "sample": np.asarray(list(runs.index), dtype=object),
            "n_shots": ("sample", runs["n_shots"].to_numpy(dtype=int)),
            "prediction": ("sample", runs["prediction"].to_numpy(dtype=object)),
            "selection": ("sample", runs["selection"].to_numpy(dtype=object)),
            "seed": ("sample", runs["seed"].to_numpy(dtype=int)),
            "template": templates["template"].to_numpy(dtype=object),
            "template_list": ("template", templates["template_list"].to_numpy(dtype=int)),
            "template_index": ("template", templates["template_index"].to_numpy(dtype=int)),
            **fmt,
        },
        attrs={
            "dataset": key,
            "source": (
                "Voronov, Wolf and Ryabinin, Mind Your Format, Findings of ACL 2024: "
                "published accuracies (data/reference/mind-your-format, Apache-2.0)"
            ),
            "correct": "accuracy of the template in the run (not per item); NaN: not evaluated",
        },
    )
