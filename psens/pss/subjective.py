r"""A stored subjective PSS run (ProSA §4): three prompt versions, responses, a judge.

``run(config)`` reads ProSA's three published versions of each chosen instruction
(``data/reference/prosa/``: v1 the original, v2 and v3 LLM rewrites), generates a greedy
response of every local model to every version (:class:`psens.models.LocalGenerator`),
has a judge rate each response against the benchmark's reference answer, and writes the
responses, the verdicts, the scores :math:`Y(p) \in [0, 1]` and the instance sensitivity
:math:`S_i` (ProSA eq. 1 over the three versions) to one netCDF file.

The judge is a :class:`psens.backends.HTTPJudge`: it talks the OpenAI chat interface to an
OpenAI-compatible server (``judge_url``, :class:`psens.backends.OpenAIClient`) or, without
``judge_url``, to the local model ``judge`` loaded in this process
(:class:`psens.models.LocalGenerator` implements the same ``chat_many`` interface), so both
paths build the same judge prompts and parse the replies the same way
(:func:`psens.backends.parse_verdict`). Two judge modes:

* ``judge_mode = "preference"`` (default): is the response as good as the reference answer,
  yes or no (:data:`PREFERENCE_TEMPLATE`; :math:`Y(p) = 1` for yes — a win or tie against
  the reference —, 0 for no), AlpacaEval's win indicator against its baseline;
* ``judge_mode = "graded"``: a rating from 0 to 10 against the reference
  (:data:`psens.backends.GRADED_JUDGE_TEMPLATE`, :math:`Y(p) = x / 10`).

The judge sees the **original** instruction with every version's response, so only the
response changes between the three verdicts of an instance. A reply without an unambiguous
verdict (one rating in 0–10, or one yes/no with no negation before it; an echo of the judge's
instruction is none) is an ``unparsed`` verdict and a failed call a ``failed`` one: both are
NaN, left out of :math:`S_i` (which skips NaN), and counted in :func:`summarize` — never a
score.

This is a simplification of ProSA's protocol: AlpacaEval 2.0's judge gives the probability
that it prefers the response to the reference answer (in [0, 1], length-controlled in LC
AlpacaEval) and Arena Hard Auto's judge one of five verdicts, each scored twice with the
positions swapped (§4.1.1); here one verdict per response, in one position. With a tiny local
judge the scores are an illustration of the pipeline, not a finding.

Its config (TOML, ``method = "subjective"``) names the responding ``models``, the
``judge`` and the ``benchmark``; every key is a row of :data:`psens.config_schema.FIELDS`
(docs/runs.md).

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
.. [2] Dubois, Y., Galambosi, B., Liang, P., and Hashimoto, T. B. "Length-Controlled
   AlpacaEval: A Simple Way to Debias Automatic Evaluators." arXiv:2404.04475, 2024.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from psens._runfile import MethodConfig, MethodRun, check_models, method_attrs, say, start, steps
from psens._validation import check_positive_int, fail
from psens.config_schema import JUDGE_MODES, check_fields, declare
from psens.store.labels import model_names

__all__ = [
    "JUDGE_MODES",
    "JUDGE_NOTE",
    "METHOD",
    "PREFERENCE_TEMPLATE",
    "RUN",
    "SubjectiveConfig",
    "between_instance_null",
    "instructions",
    "model_table",
    "reread",
    "run",
    "summarize",
    "synthetic_run",
]

METHOD = "subjective"
WHERE = "psens subjective run"
VERSIONS = (1, 2, 3)
#: the judge prompt of ``judge_mode = "preference"`` (placeholders as in
#: :class:`psens.backends.CallableJudge`); yes = as good as the reference (score 1)
PREFERENCE_TEMPLATE = (
    "Instruction: {question}\n"
    "Reference answer: {reference}\n"
    "Response: {response}\n\n"
    "Is the response as good as the reference answer? Reply with one word: yes or no."
)
#: what every chart and table of a run judged by a tiny local model says
JUDGE_NOTE = "a 135M judge is an illustration, not a finding"
#: per-(model, sample, version) text of the response and the verdict
CELL_TEXT = ("response", "status", "error", "judge_raw", "judge_status")


@declare(METHOD)
class SubjectiveConfig(MethodConfig):
    """A subjective PSS run's configuration: the ``"subjective"`` rows of
    :data:`psens.config_schema.FIELDS` (docs/runs.md lists them)."""

    def check(self) -> None:
        """Cheap checks, before any model is loaded or file read."""
        check_fields(self, METHOD, WHERE)
        check_models(list(self.models) + ([] if self.judge_url else [self.judge]), WHERE)
        missing = [f.name for f in version_files(self) if not f.is_file()]
        if missing:
            fail(
                WHERE,
                f"{_versions_dir(self)} lacks ProSA's version files {missing}",
                "Point versions at a folder holding them (see data/reference/README.md)",
            )
        if self.benchmark == "arena" and not self.references:
            fail(
                WHERE,
                "benchmark = 'arena' needs reference answers; none are installable offline",
                'Add references = "FILE.jsonl" (records with question_id and answer)',
            )


def _versions_dir(cfg: SubjectiveConfig) -> Path:
    from psens.models.registry import data_dir

    return Path(cfg.versions) if cfg.versions else data_dir() / "reference" / "prosa"


def version_files(cfg: SubjectiveConfig) -> list[Path]:
    """The three version files of ``cfg``'s benchmark (what
    :func:`psens.pss.load_prosa_versions` reads)."""
    folder = _versions_dir(cfg)
    if cfg.benchmark == "alpaca":
        return [folder / f"AlpacaEval_alpaca_eval_v{v}.json" for v in VERSIONS]
    return [folder / f"Arena_Hard_Auto_question_v{v}.jsonl" for v in VERSIONS]


def _read_references(path: Path) -> dict[str, str]:
    """``{instance: answer}`` of a JSON list or JSONL file of reference answers."""
    where = "psens subjective references"
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".jsonl":
            recs = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            recs = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(where, f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})", "Fix the file")
    out = {}
    for r in recs if isinstance(recs, list) else []:
        key = r.get("instance", r.get("question_id")) if isinstance(r, dict) else None
        answer = r.get("answer", r.get("output")) if isinstance(r, dict) else None
        if key is not None and isinstance(answer, str):
            out[str(key)] = answer
    if not out:
        fail(
            where,
            f"{path} has no records with an instance (or question_id) and an answer (or output)",
            'Write records like {"instance": "AE-1", "answer": "..."}',
        )
    return out


def instructions(cfg: SubjectiveConfig) -> pd.DataFrame:
    """The chosen instances: ``instance, category, v1, v2, v3, reference`` (one row each).

    Instances with all three versions and a reference answer are eligible; ``samples`` of
    them are drawn with ``default_rng(seed)`` without replacement and kept in benchmark
    order. The reference is cut to ``max_reference_chars``.
    """
    from psens.pss.metric import load_prosa_versions

    long = load_prosa_versions(_versions_dir(cfg), cfg.benchmark)
    wide = long.pivot_table(
        index="instance", columns="version", values="prompt", aggfunc="first", sort=False
    )
    wide.columns = [f"v{v}" for v in wide.columns]
    wide = wide.dropna(subset=[f"v{v}" for v in VERSIONS])
    cats = long[long.version == 1].drop_duplicates("instance").set_index("instance")["category"]
    wide["category"] = cats.reindex(wide.index).fillna("").astype(str)
    if cfg.references:
        refs = _read_references(Path(cfg.references))
        wide["reference"] = [refs.get(str(i)) for i in wide.index]
    else:  # AlpacaEval's own baseline answers, matched on the original instruction
        from psens.datasets import load

        by_text = {it.question: it.answer for it in load("alpaca-eval", split="eval")}
        wide["reference"] = [by_text.get(t) for t in wide["v1"]]
    wide = wide.dropna(subset=["reference"])
    if len(wide) < cfg.samples:
        fail(
            WHERE,
            f"samples = {cfg.samples} but only {len(wide)} instances have three versions and a "
            "reference answer",
            f"Use samples <= {len(wide)}",
        )
    pick = np.sort(np.random.default_rng(cfg.seed).choice(len(wide), cfg.samples, replace=False))
    out = wide.iloc[pick].reset_index()
    out["instance"] = out["instance"].astype(str)
    out["reference"] = [r[: cfg.max_reference_chars] for r in out["reference"]]
    return out[["instance", "category", *[f"v{v}" for v in VERSIONS], "reference"]]


def _generator(name: str, cfg: SubjectiveConfig, max_new_tokens: int):
    """A local model behind the OpenAI chat interface (:class:`LocalGenerator`)."""
    import psens.models

    return psens.models.LocalGenerator(
        psens.models.load(name), max_new_tokens=max_new_tokens, batch_size=cfg.batch_size
    )


def _judge(cfg: SubjectiveConfig):
    """The judge of ``cfg``: an :class:`HTTPJudge` on a server or on the local model."""
    from psens.backends import HTTPJudge, OpenAIClient

    if cfg.judge_url:
        client = OpenAIClient(cfg.judge_url, cfg.judge, timeout=float(cfg.judge_timeout))
    else:
        client = _generator(cfg.judge, cfg, cfg.judge_max_new_tokens)
    return HTTPJudge(
        client,
        **_judge_settings(cfg.judge_mode),
        batch_size=cfg.batch_size,
        max_tokens=cfg.judge_max_new_tokens,
    )


def _judge_settings(judge_mode: str) -> dict[str, Any]:
    """The judge's template, verdict mode and scale for ``judge_mode``."""
    preference = judge_mode == "preference"
    return {
        "template": PREFERENCE_TEMPLATE if preference else None,
        "mode": "binary" if preference else "graded",
        "scale": 10,
    }


def reread(ds):
    """The run ``ds`` with its judge verdicts read again from the stored replies by the
    current :func:`psens.backends.parse_verdict` (:func:`psens.backends.reread_verdicts`
    with the judge of its ``judge_mode``): ``judge_status``, ``score`` and ``S_i``
    recomputed — what running the config again gives, since greedy decoding gives the same
    replies. Every other variable, coordinate and attr is kept as stored."""
    from psens.backends import reread_verdicts
    from psens.pss.metric import instance_pss

    shape = ds["judge_status"].shape
    dims = ds["judge_status"].dims
    verdicts = reread_verdicts(
        ds["judge_raw"].values.ravel().tolist(),
        ds["judge_status"].values.ravel().tolist(),
        **_judge_settings(str(ds.attrs.get("judge_mode", "preference"))),
    )
    out = ds.copy()
    out["judge_status"] = (dims, np.array([v.status for v in verdicts], object).reshape(shape))
    out["score"] = (dims, np.array([v.value for v in verdicts]).reshape(shape))
    out["S_i"] = (ds["S_i"].dims, instance_pss(out["score"].values))
    for name in out.variables:
        out[name].attrs = ds[name].attrs
    return out


def generate(cfg: SubjectiveConfig, items: pd.DataFrame, *, progress: bool = True) -> dict:
    """Greedy responses ``{model: [(text, error) per (instance, version)]}``, row-major,
    each version sent as one user message (``text`` None where the call failed)."""
    prompts = [row[f"v{v}"] for _, row in items.iterrows() for v in VERSIONS]
    out = {}
    for model in steps(cfg.models, method=METHOD, progress=progress):
        say(f"subjective: {model}: {len(prompts)} responses", progress)
        gen = _generator(model, cfg, cfg.max_new_tokens)
        res = gen.chat_many(
            [[{"role": "user", "content": p}] for p in prompts],
            max_tokens=cfg.max_new_tokens,
            temperature=0.0,
        )
        out[model] = [(r.text, None) if r.ok else (None, r.error or "failed") for r in res]
        del gen
    return out


def to_dataset(items: pd.DataFrame, responses: dict, verdicts: dict, cfg: SubjectiveConfig):
    """The run as a Dataset over ``(model, sample, version)``: the file :func:`run` writes."""
    import xarray as xr

    from psens.pss.metric import instance_pss

    models = list(responses)
    n, v = len(items), len(VERSIONS)
    shape = (len(models), n, v)
    cells = {c: np.empty(shape, dtype=object) for c in CELL_TEXT}
    score = np.full(shape, np.nan)
    for m, model in enumerate(models):
        for k, ((text, err), verdict) in enumerate(
            zip(responses[model], verdicts[model], strict=True)
        ):
            s, j = divmod(k, v)
            cells["response"][m, s, j] = text or ""
            cells["status"][m, s, j] = "ok" if text is not None else "failed"
            cells["error"][m, s, j] = err or ""
            cells["judge_raw"][m, s, j] = verdict.raw_text or verdict.error or ""
            cells["judge_status"][m, s, j] = verdict.status
            score[m, s, j] = verdict.value
    dims = ("model", "sample", "version")
    data = {c: (dims, a) for c, a in cells.items()}
    data["score"] = (dims, score)
    data["S_i"] = (("model", "sample"), instance_pss(score))
    data["prompt"] = (
        ("sample", "version"),
        items[[f"v{x}" for x in VERSIONS]].to_numpy(dtype=object),
    )
    for col in ("category", "reference"):
        data[col] = ("sample", items[col].to_numpy(dtype=object))
    ds = xr.Dataset(
        data, coords={"model": models, "sample": list(items["instance"]), "version": list(VERSIONS)}
    )
    ds.attrs.update(method_attrs(METHOD, cfg))
    ds.attrs["judge_path"] = (
        f"OpenAI-compatible server {cfg.judge_url}"
        if cfg.judge_url
        else "the local model in this process, through the same chat interface"
    )
    ds.attrs["judge_note"] = JUDGE_NOTE if "135m" in cfg.judge.lower() else ""
    return ds


def run(
    cfg: SubjectiveConfig,
    out: str | Path | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
):
    """Generate, judge and score the run of ``cfg``; write it to ``out`` (default
    ``cfg.store``; an existing file only with ``overwrite`` and when it is a psens run
    file) and return the Dataset. Progress goes to stderr."""
    from psens.store import write_method_run

    path = start(cfg, out, overwrite=overwrite)
    items = instructions(cfg)  # refusals about the data before any model is loaded
    responses = generate(cfg, items, progress=progress)
    judge = _judge(cfg)
    originals = [row["v1"] for _, row in items.iterrows() for _ in VERSIONS]
    refs = [row["reference"] for _, row in items.iterrows() for _ in VERSIONS]
    verdicts = {}
    for model, res in responses.items():
        say(f"subjective: judge {cfg.judge}: {model}: {len(res)} verdicts", progress)
        verdicts[model] = judge.judge_many(
            [(q, r, text) for q, r, (text, _) in zip(originals, refs, res, strict=True)]
        )
    ds = to_dataset(items, responses, verdicts, cfg)
    write_method_run(ds, path, overwrite=overwrite)
    return ds


def between_instance_null(
    scores: np.ndarray, *, n_perm: int = 2000, seed: int = 0
) -> tuple[float, float]:
    r"""The PSS the scores would have if the instance did not matter, and its p-value.

    ``scores`` is ``(instance, version)`` (NaN = no verdict). Each version's column is
    permuted over the instances independently (``rng.random((n_perm, n, V)).argsort(1)``
    with ``rng = default_rng(seed)``), which keeps every version's scores and breaks the
    link between an instance's versions; PSS (mean of eq. 1, NaN skipped) is recomputed on
    each permutation. Returns the mean permuted PSS and the one-sided p-value
    :math:`(1 + \#\{\mathrm{PSS}_\pi \le \mathrm{PSS}\}) / (1 + n_\pi)`. Observed PSS near
    the permuted one says the versions of an instance agree no more than responses to
    different instructions do: the scores carry no per-instance signal (e.g. a judge that
    answers the same number or noise), so the PSS is not prompt sensitivity.
    """
    from psens.pss.metric import instance_pss

    check_positive_int(n_perm, "between_instance_null", "n_perm")
    y = np.asarray(scores, dtype=float)
    if y.ndim != 2 or y.shape[0] < 2:
        fail("between_instance_null", f"scores have shape {y.shape}", "Pass (instance, version)")
    observed = float(np.nanmean(instance_pss(y)))
    idx = np.random.default_rng(seed).random((n_perm, *y.shape)).argsort(axis=1)
    perm = np.take_along_axis(np.broadcast_to(y, (n_perm, *y.shape)), idx, axis=1)
    with np.errstate(invalid="ignore"):
        null = np.nanmean(instance_pss(perm), axis=1)
    null = null[np.isfinite(null)]
    if not np.isfinite(observed) or null.size == 0:
        return float("nan"), float("nan")
    return float(null.mean()), float((1 + (null <= observed + 1e-12).sum()) / (1 + null.size))


def model_table(ds, *, n_boot: int = 2000, n_perm: int = 2000, ci: float = 0.95, seed: int = 0):
    """Per model: verdicts ok / unparsed / failed, mean score, PSS (mean ``S_i`` over the
    instances with two or more scored versions) with a percentile bootstrap CI over
    instances, the between-instance PSS and its p-value (:func:`between_instance_null`)."""
    from psens.stats import bootstrap_means, percentile_ci, resample_counts

    rows = []
    for m, model in enumerate(model_names(ds)):
        y = ds["score"].values[m].astype(float)
        s = ds["S_i"].values[m].astype(float)
        status = ds["judge_status"].values[m]
        lo = hi = np.nan
        if np.isfinite(s).any():
            boot = bootstrap_means(s, resample_counts(s.size, n_boot, seed))
            lo, hi = (float(v) for v in percentile_ci(boot, ci))
        null, p = (
            between_instance_null(y, n_perm=n_perm, seed=seed)
            if np.isfinite(s).sum() >= 2
            else (np.nan, np.nan)
        )
        rows.append(
            {
                "model": str(model),
                "instances": int(np.isfinite(s).sum()),
                "ok": int((status == "ok").sum()),
                "unparsed": int((status == "unparsed").sum()),
                "failed": int((status == "failed").sum()),
                "mean_score": float(np.nanmean(y)) if np.isfinite(y).any() else np.nan,
                "pss": float(np.nanmean(s)) if np.isfinite(s).any() else np.nan,
                "lo": lo,
                "hi": hi,
                "between_instance_pss": null,
                "p_value": p,
            }
        )
    return pd.DataFrame(rows)


def _scores(ds) -> str:
    if ds.attrs.get("judge_mode", "preference") == "graded":
        return "0-10 rating / 10"
    return "yes (1) / no (0): as good as the reference answer"


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def summarize(ds) -> str:
    """A few lines: models, judge and its path, and per model the verdict counts, the PSS
    with its CI and the between-instance reference."""
    note = ds.attrs.get("judge_note", "")
    synthetic = "SYNTHETIC DATA (made-up verdicts) · " if ds.attrs.get("synthetic") else ""
    lines = [
        f"{synthetic}subjective PSS run ({ds.attrs.get('benchmark', '?')}): "
        f"{ds.sizes['model']} models x {ds.sizes['sample']} instructions x "
        f"{ds.sizes['version']} ProSA versions; judge "
        f"{ds.attrs.get('judge', '?')} ({ds.attrs.get('judge_path', '?')})"
        + (f" — {note}" if note else ""),
    ]
    for r in model_table(ds).itertuples():
        lines.append(
            f"  {r.model}: PSS {r.pss:.3f} [{r.lo:.3f}, {r.hi:.3f}] over {r.instances} "
            f"instructions, mean score {r.mean_score:.2f}; verdicts ok {r.ok}, unparsed "
            f"{r.unparsed}, failed {r.failed} (left out); between-instance PSS "
            f"{r.between_instance_pss:.3f} (p {_p(r.p_value)})"
        )
    lines.append(
        f"S_i over the three versions (ProSA eq. 1) of the judge's {_scores(ds)}; a PSS "
        "not below the between-instance one carries no per-instruction signal"
    )
    return "\n".join(lines)


def synthetic_run(
    models: Sequence[str] = ("synthetic-small", "synthetic-large"),
    *,
    n_samples: int = 10,
    seed: int = 0,
):
    """A subjective PSS run's layout with made-up verdicts (attr ``synthetic``).

    Each instruction gets a quality ``q ~ U(0, 1)``; each of its three versions a judge
    rating ``round(10 * (q + 0.15 * noise))`` clipped to 0–10, the noise smaller for later
    models; one verdict in eight is off-format (``unparsed``, no score). So later models
    have lower PSS *by construction*: the run shows what the analyses compute, never a
    finding (attr ``synthetic``).
    """
    from psens.backends import Verdict

    rng = np.random.default_rng(seed)
    names = list(models)
    instances = [f"item{k:03d}" for k in range(n_samples)]
    items = {"instance": instances, "category": ["synthetic"] * n_samples}
    for v in VERSIONS:
        items[f"v{v}"] = [f"[version {v}] instruction {i}" for i in instances]
    items["reference"] = [f"reference answer {i}" for i in instances]
    quality = rng.uniform(0, 1, size=n_samples)
    responses, verdicts = {}, {}
    for m, name in enumerate(names):
        noise = 0.15 / (1 + m) * rng.normal(size=(n_samples, len(VERSIONS)))
        rating = np.clip(np.rint(10 * (quality[:, None] + noise)), 0, 10).ravel()
        off = rng.random(rating.size) < 1 / 8
        responses[name] = [(f"response {k}", None) for k in range(rating.size)]
        verdicts[name] = [
            Verdict("unparsed", raw_text="It looks fine.")
            if o
            else Verdict("ok", score=r / 10, raw_text=f"{int(r)}")
            for r, o in zip(rating, off, strict=True)
        ]
    cfg = SubjectiveConfig(
        store="synthetic.nc", models=names, judge="synthetic-judge", judge_mode="graded"
    )
    ds = to_dataset(pd.DataFrame(items), responses, verdicts, cfg)
    ds.attrs.update(synthetic=True, seed=seed, judge_path="none (made-up verdicts)")
    return ds


#: what :mod:`psens.method_runs` loads, runs and summarises (the ``"subjective"`` entry of
#: :data:`psens.config_schema.RUN_MODULES`)
RUN = MethodRun(METHOD, SubjectiveConfig, run, summarize, reread)
