"""A stored EAS run: the 2^3 template design on real generations, scored twice.

``run(config)`` renders every item of every dataset with the eight templates ``T000`` …
``T111`` (:func:`psens.eas.build_rows`), generates a greedy answer with each local model
(:class:`psens.models.LocalGenerator`), scores it with the task heuristic
(:mod:`psens.eas.scoring`) and with a judge model (:class:`psens.backends.CallableJudge` around
a local generator), computes the per-instance metrics (SensH, SensJ, EAS, signed EAS, zones,
factor effects: :func:`psens.eas.instance_metrics`) and writes everything to one netCDF file.
:func:`rows` gives the judged rows back from the file, so every analysis of
:mod:`psens.eas` (and the zone explorer) reruns on it without a model.

Its config (TOML, ``method = "eas"``) names the ``models``, the ``judge`` and the
``datasets``; every key is a row of :data:`psens.config_schema.FIELDS` (docs/runs.md).

A generation or judge call that fails is recorded as failed (``status``/``judge_status``) and
left out of the metrics, never scored as wrong.

References
----------
.. [1] Muthukumarana et al., "Prompt Sensitivity or Evaluation Artifact?"; the full
   reference is in :mod:`psens.eas`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psens._runfile import MethodConfig, MethodRun, check_models, method_attrs, say, start, steps
from psens._validation import fail
from psens.config_schema import check_fields, declare
from psens.store.labels import model_names

__all__ = ["METHOD", "RUN", "EASConfig", "reread", "rows", "run", "summarize"]

METHOD = "eas"
WHERE = "psens eas run"
#: per-sample text stored in the file (what the heuristics and the judge read)
SAMPLE_TEXT = ("question", "passage", "context", "gold_answer", "task_type", "dataset")
#: per-sample lists stored as JSON text
SAMPLE_JSON = ("options", "all_gold_answers")
#: per-(model, sample, template) text of the generation and the judge
CELL_TEXT = ("raw_response", "status", "error", "judge_raw", "judge_status")
#: per-instance metrics stored with the run (columns of instance_metrics)
METRICS = (
    "sens_heuristic",
    "sens_judge",
    "eas",
    "signed_eas",
    "mean_heuristic",
    "mean_judge",
    "effect_role_heuristic",
    "effect_fmt_heuristic",
    "effect_prefix_heuristic",
    "effect_role_judge",
    "effect_fmt_judge",
    "effect_prefix_judge",
)
#: the judge's verdict mode: :class:`psens.backends.CallableJudge` with its default template
JUDGE_MODE = "binary"


@declare(METHOD)
class EASConfig(MethodConfig):
    """An EAS run's configuration: the ``"eas"`` rows of :data:`psens.config_schema.FIELDS`
    (docs/runs.md lists them)."""

    def check(self) -> None:
        """Cheap checks, before any model is loaded or item read."""
        check_fields(self, METHOD, WHERE)
        check_models([*self.models, self.judge], WHERE)


def _items(cfg: EASConfig) -> dict[str, list]:
    """The items of every dataset: the seeded choice of an IPS run
    (:func:`psens.datasets.choose`)."""
    from psens import datasets

    return {
        name: datasets.choose(datasets.load(name), cfg.samples, cfg.seed, name)
        for name in cfg.datasets
    }


def _label(dataset: str) -> str:
    """The dataset name as the EAS tables write it (``arc-challenge`` -> ``arc_challenge``)."""
    return dataset.replace("-", "_")


def _generator(name: str, cfg: EASConfig, max_new_tokens: int):
    import psens.models

    scorer = psens.models.load(name)
    return psens.models.LocalGenerator(
        scorer, max_new_tokens=max_new_tokens, batch_size=cfg.batch_size
    )


def generate(cfg: EASConfig, *, progress: bool = True) -> pd.DataFrame:
    """The judged rows of the run (one per model, item and template)."""
    from psens import eas
    from psens.backends import CallableJudge

    items = _items(cfg)
    ids = [it.id for its in items.values() for it in its]
    if len(set(ids)) != len(ids):
        fail(WHERE, "two datasets share an item id", "Run them as separate configs")
    parts = []
    for model in steps(cfg.models, method=METHOD, progress=progress):
        gen = _generator(model, cfg, cfg.max_new_tokens)
        rows = pd.concat(
            [
                eas.build_rows(its, dataset=_label(name), model_name=model)
                for name, its in items.items()
            ],
            ignore_index=True,
        )
        say(f"eas: {model}: {len(rows)} generations", progress)
        parts.append(
            eas.generate_responses(rows, gen, max_tokens=cfg.max_new_tokens, temperature=0)
        )
        del gen
    judged = pd.concat(parts, ignore_index=True)
    say(f"eas: judge {cfg.judge}: {len(judged)} verdicts", progress)
    judge = CallableJudge(
        _generator(cfg.judge, cfg, cfg.judge_max_new_tokens),
        mode=JUDGE_MODE,
        batch_size=cfg.batch_size,
    )
    return eas.judge_responses(judged, judge)


def to_dataset(judged: pd.DataFrame, cfg: EASConfig):
    """The judged rows and their per-instance metrics as one Dataset over
    ``(model, sample, template)`` (the file :func:`run` writes)."""
    import xarray as xr

    from psens import eas

    ds = eas.to_dataset(judged)
    models, samples, templates = (list(ds[d].values) for d in ("model", "sample", "template"))
    cells = judged.set_index(["model_name", "id", "template_id"])
    full = pd.MultiIndex.from_product([models, samples, templates])
    shape = (len(models), len(samples), len(templates))
    dims = ("model", "sample", "template")
    out = {}
    for col in CELL_TEXT:
        vals = cells[col].reindex(full).to_numpy(dtype=object)
        out[col] = (
            dims,
            np.array(["" if _missing(v) else str(v) for v in vals], object).reshape(shape),
        )
    out["judge"] = ds["judge"]
    out["heuristic"] = ds["heuristic"]
    first = judged.drop_duplicates("id").set_index("id").loc[samples]
    for col in SAMPLE_TEXT:
        out[col] = ("sample", np.array(["" if _missing(v) else str(v) for v in first[col]], object))
    for col in SAMPLE_JSON:
        out[col] = ("sample", np.array([json.dumps(list(v)) for v in first[col]], object))
    prompts = judged.drop_duplicates(["id", "template_id"]).set_index(["id", "template_id"])
    pidx = pd.MultiIndex.from_product([samples, templates])
    out["prompt"] = (
        ("sample", "template"),
        prompts["prompt"].reindex(pidx).to_numpy(dtype=object).reshape(len(samples), -1),
    )
    out.update(_instance_vars(judged, models, samples))
    coords = {k: ds[k] for k in ("role", "fmt", "prefix")}
    result = xr.Dataset(
        out, coords={"model": models, "sample": samples, "template": templates, **coords}
    )
    result.attrs.update(method_attrs(METHOD, cfg))
    return result


def _instance_vars(judged: pd.DataFrame, models: list, samples: list) -> dict[str, tuple]:
    """The per-instance metrics of :data:`METRICS` and the zone, as ``(model, sample)``
    variables (:func:`psens.eas.instance_metrics` of the judged rows)."""
    from psens import eas

    inst = eas.instance_metrics(judged).set_index(["model_name", "id"])
    midx = pd.MultiIndex.from_product([models, samples])
    shape = (len(models), len(samples))
    out: dict[str, tuple] = {
        col: (("model", "sample"), inst[col].reindex(midx).to_numpy(float).reshape(shape))
        for col in METRICS
    }
    out["trizone"] = (
        ("model", "sample"),
        np.array(
            ["" if _missing(z) else str(z) for z in inst["trizone"].reindex(midx)], object
        ).reshape(shape),
    )
    return out


def reread(ds):
    """The run ``ds`` with its judge verdicts read again from the stored replies by the
    current :func:`psens.backends.parse_verdict` (:func:`psens.backends.reread_verdicts`,
    the judge of :func:`generate`): ``judge_status``, ``judge`` and the per-instance metrics
    and zones recomputed from them — what running the config again gives, since greedy
    decoding gives the same replies. Every other variable, coordinate and attr is kept as
    stored."""
    from psens.backends import reread_verdicts

    shape = ds["judge_status"].shape
    verdicts = reread_verdicts(
        ds["judge_raw"].values.ravel().tolist(),
        ds["judge_status"].values.ravel().tolist(),
        mode=JUDGE_MODE,
    )
    out = ds.copy()
    dims = ds["judge_status"].dims
    out["judge_status"] = (dims, np.array([v.status for v in verdicts], object).reshape(shape))
    # 1.0 / 0.0 from the verdict's correct, NaN unless ok: the judge_correct of
    # psens.eas.judge_responses through psens.eas.judge_float
    out["judge"] = (
        dims,
        np.array([float(v.correct) if v.status == "ok" else np.nan for v in verdicts]).reshape(
            shape
        ),
    )
    models, samples = ([str(x) for x in ds[d].values] for d in ("model", "sample"))
    for name, var in _instance_vars(rows(out), models, samples).items():
        out[name] = var
    for name in out.variables:
        out[name].attrs = ds[name].attrs
    return out


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def rows(ds) -> pd.DataFrame:
    """The judged rows (published judged-file columns) of a stored EAS run: what
    :func:`psens.eas.instance_metrics` and :class:`psens.widgets.EASZones` read."""
    from psens.variants import eas_factors

    records = []
    models = model_names(ds)
    samples = [str(s) for s in ds["sample"].values]
    templates = [str(t) for t in ds["template"].values]
    per_sample = {c: ds[c].values for c in (*SAMPLE_TEXT, *SAMPLE_JSON)}
    cell = {c: ds[c].values for c in CELL_TEXT}
    judge = ds["judge"].values
    prompt = ds["prompt"].values
    for m, model in enumerate(models):
        for s, sid in enumerate(samples):
            base = {c: (per_sample[c][s] or None) for c in SAMPLE_TEXT}
            base["options"] = json.loads(per_sample["options"][s])
            base["all_gold_answers"] = json.loads(per_sample["all_gold_answers"][s])
            for t, tid in enumerate(templates):
                status = cell["status"][m, s, t]
                j = judge[m, s, t]
                records.append(
                    {
                        "id": sid,
                        "model_name": model,
                        **base,
                        "template_id": tid,
                        **eas_factors(tid),
                        "prompt": prompt[s, t],
                        "raw_response": cell["raw_response"][m, s, t] if status == "ok" else None,
                        "status": status,
                        "error": cell["error"][m, s, t] or None,
                        "judge_raw": cell["judge_raw"][m, s, t] or None,
                        "judge_status": cell["judge_status"][m, s, t],
                        "judge_correct": None if np.isnan(j) else bool(j),
                    }
                )
    return pd.DataFrame.from_records(records)


def run(
    cfg: EASConfig,
    out: str | Path | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
):
    """Generate, judge and score the run of ``cfg``; write it to ``out`` (default
    ``cfg.store``, a netCDF file; an existing one only with ``overwrite`` and when it is a
    psens run file) and return the Dataset. Progress goes to stderr."""
    from psens.store import write_method_run

    path = start(cfg, out, overwrite=overwrite)
    judged = generate(cfg, progress=progress)
    ds = to_dataset(judged, cfg)
    write_method_run(ds, path, overwrite=overwrite)
    return ds


def summarize(ds) -> str:
    """A few lines: models, judge, items, failures, and per model and dataset the mean
    SensH, SensJ, signed EAS and zone counts."""
    from psens import eas

    inst = eas.instance_metrics(rows(ds))
    lines = [
        f"EAS run: {ds.sizes['model']} models x {ds.sizes['sample']} items x "
        f"{ds.sizes['template']} templates; judge {ds.attrs.get('judge', '?')} "
        "(a tiny local judge: an illustration, not a finding)",
    ]
    failed = int((ds["status"].values != "ok").sum())
    unjudged = int((ds["judge_status"].values != "ok").sum())
    lines.append(
        f"generations failed: {failed}; verdicts not usable (failed or unparsed): {unjudged}"
    )
    agg = (
        inst.groupby(["model_name", "dataset"])
        .agg(
            sens_h=("sens_heuristic", "mean"),
            sens_j=("sens_judge", "mean"),
            signed_eas=("signed_eas", "mean"),
            n=("id", "count"),
        )
        .round(3)
    )
    zones = inst.groupby(["model_name", "dataset"])["trizone"].value_counts().unstack(fill_value=0)
    lines.append(agg.join(zones).to_string())
    return "\n".join(lines)


#: what :mod:`psens.method_runs` loads, runs and summarises (the ``"eas"`` entry of
#: :data:`psens.config_schema.RUN_MODULES`)
RUN = MethodRun(METHOD, EASConfig, run, summarize, reread)
