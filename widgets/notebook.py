"""What the notebooks' ``parameters`` cells call: open a stored run, or make one; and the
few helpers that let a notebook say what a run supports and what it shows.

Notebooks read two environment variables (papermill ``-p`` sets the same names):

``PSENS_RUN``
    Path of a stored run: a ``.zarr`` store from :func:`psens.run` or a ``.nc`` file from
    ``psens export``. Empty: the shipped run, else a synthetic one (below).
``PSENS_SIZE``
    Empty (default): the shipped real run ``data/runs/arc.nc`` when the checkout has it,
    else ``tiny``. ``tiny``: a synthetic run of the store schema, built in seconds
    (:func:`psens.synthetic.synthetic_run`); for CI and a first look. ``full``: the
    paper-size configuration through the run pipeline :func:`psens.run` (hours on a GPU;
    resumable).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from psens._charts import SYNTHETIC_NOTE, is_synthetic, label_synthetic
from psens._validation import fail
from psens.store.labels import model_names

__all__ = [
    "NOT_FINDINGS",
    "SHIPPED_RUN",
    "SIZES",
    "chat_check",
    "describe",
    "findings_run",
    "label_synthetic",
    "lacks",
    "load_run",
    "paper_config",
    "paper_vs_run",
    "registry_models",
    "show",
    "verdict",
]

SIZES = ("tiny", "full")
_ROOT = Path(__file__).resolve().parents[1]
#: the real run shipped with the checkout (found from the package, so from any folder)
SHIPPED_RUN = _ROOT / "data" / "runs" / "arc.nc"
#: model kinds that count as "tuned" (instruct or chat)
TUNED = {"instruct", "chat"}


def registry_models(*, missing_ok: bool = False) -> list[str]:
    """Names of the IPS paper's models in the model table
    (:func:`psens.models.registry.paper_models`, table 1), in order.

    ``missing_ok``: return ``[]`` instead of raising when the table is not there (an
    installed psens without its data files).
    """
    from psens.models.registry import paper_models

    try:
        return paper_models()
    except FileNotFoundError:
        if missing_ok:
            return []
        raise


def paper_config(name: str) -> dict[str, Any]:
    """The paper-scale run config ``data/examples/paper_<name>.toml`` as a dict, the ``full``
    argument of :func:`load_run` (the notebooks' ``PSENS_SIZE=full``).

    Examples
    --------
    >>> cfg = paper_config("table1")
    >>> cfg["dataset"], len(cfg["models"])
    ('arc-challenge', 50)
    """
    import tomllib

    folder = _ROOT / "data" / "examples"
    known = sorted(p.stem[len("paper_") :] for p in folder.glob("paper_*.toml"))
    path = folder / f"paper_{name}.toml"
    if not path.is_file():
        fail(
            "psens.widgets.paper_config",
            f"there is no paper config {name!r}",
            f"Use one of {known}",
        )
    return tomllib.loads(path.read_text())


def load_run(
    path: str | os.PathLike | None = None,
    size: str | None = None,
    *,
    tiny: Mapping[str, Any] | None = None,
    full: Mapping[str, Any] | None = None,
    shipped: bool = True,
):
    """The run a notebook works on.

    Parameters
    ----------
    path : path, optional
        A stored run (``.zarr`` store or ``.nc`` export); default ``$PSENS_RUN``. A relative
        path is taken from the current folder, else from the checkout (notebooks run in
        ``notebooks/``, so ``runs/demo.zarr`` works). When set, ``size`` is ignored.
    size : {"", "tiny", "full"}, optional
        Default ``$PSENS_SIZE``. Empty: the shipped run :data:`SHIPPED_RUN` when it exists
        (and ``shipped``), else ``"tiny"``.
    tiny : mapping, optional
        Keyword arguments of :func:`psens.synthetic.synthetic_run`.
    full : mapping, optional
        The config of :func:`psens.run` (keys ``store, models, dataset, split, samples,
        templates, n_vars, tau, solver, seed``); the run resumes if its store exists.
    shipped : bool
        Whether an empty ``size`` may open the shipped run (a notebook about another
        task than the shipped run's passes False).

    Returns
    -------
    xarray.Dataset
    """
    where = "psens.widgets.load_run"
    path = os.environ.get("PSENS_RUN", "") if path is None else path
    size = os.environ.get("PSENS_SIZE", "") if size is None else size
    if path:
        from psens.store import open_run

        if not Path(path).exists() and (_ROOT / path).exists():  # relative to the checkout
            path = _ROOT / path
        return open_run(path)
    if not size:
        if shipped and SHIPPED_RUN.exists():
            from psens.store import open_run

            return open_run(SHIPPED_RUN)
        size = "tiny"
    if size not in SIZES:
        fail(where, f"size={size!r} (PSENS_SIZE) is unknown", f"Use one of {SIZES}, or ''")
    if size == "tiny":
        from psens.synthetic import synthetic_run

        return synthetic_run(**dict(tiny or {}))
    if not full:
        fail(where, "size='full' needs a run config", "Pass full={...} (see the notebook)")
    import psens

    runner = getattr(psens, "run", None)
    if runner is not None and not callable(runner):  # the module psens.run
        runner = getattr(runner, "run", None)
    if runner is None:
        try:
            from psens.run import run as runner
        except ImportError:
            runner = None
    if runner is None:
        fail(
            where,
            "PSENS_SIZE=full needs the run pipeline psens.run, which this psens does not have",
            "Update psens, or set PSENS_RUN to a stored run, or use PSENS_SIZE=tiny",
            RuntimeError,
        )
    out = runner(dict(full))
    if out is None or isinstance(out, str | os.PathLike):
        from psens.store import open_run

        return open_run(out if out is not None else full["store"])
    return out


# ----------------------------------------------------------------------------- what a run holds


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _shots(ds) -> list[int]:
    return [int(k) for k in ds["shot"].values] if "shot" in ds.dims else []


def _meta_values(ds, key: str) -> set[str]:
    if key not in ds.coords:
        return set()
    return {str(v).lower() for v in ds[key].values if str(v) not in ("", "nan")}


def describe(ds) -> str:
    """One line saying what the run holds, e.g. ``"synthetic run: 2 models (a, b),
    8 samples, 5 templates (ips1 … ips5), shots 0/1/3, n = 5–6 words"``."""
    models = model_names(ds)
    templates = [str(t) for t in ds["template"].values]
    n = [int(x) for x in ds["n_vars"].values] if "n_vars" in ds.coords else []
    parts = [
        f"{_plural(len(models), 'model')} ({', '.join(models)})",
        _plural(ds.sizes["sample"], "sample"),
        f"{_plural(len(templates), 'template')} ({', '.join(templates)})",
    ]
    if _shots(ds):
        parts.append("shots " + "/".join(str(k) for k in _shots(ds)))
    if n:
        parts.append(f"n = {min(n)}–{max(n)} words" if min(n) != max(n) else f"n = {n[0]} words")
    kind = "synthetic run (toy numbers, not any model's)" if is_synthetic(ds) else "run"
    return f"{kind}: " + ", ".join(parts)


def lacks(
    ds,
    what: str,
    *,
    models: int = 1,
    templates: int = 2,
    shots: bool = False,
    kinds: tuple[str, ...] = (),
    archs: tuple[str, ...] = (),
    hidden: bool = False,
    instead: str = "",
) -> str:
    """Why ``ds`` cannot support the analysis ``what`` ('' when it can).

    ``models``/``templates``: the least numbers needed; ``shots``: a ``shot`` dim with 0 and
    a k > 0; ``kinds``/``archs``: model metadata values that must all be present (e.g.
    ``("base", "tuned")``, ``("dense", "moe")``; ``"tuned"`` = instruct or chat);
    ``hidden``: final-layer hidden-state metrics. ``instead`` is appended ("showing …").
    """
    has, needs = [], []
    n_models = ds.sizes["model"]
    if n_models < models:
        left_out = ds.attrs.get(LEFT_OUT, "")  # a findings run: the models it dropped
        has.append(
            _plural(n_models, "model")
            + (
                f" that {'is a finding' if n_models == 1 else 'are findings'} ({left_out} not)"
                if left_out
                else ""
            )
        )
        needs.append(f"≥ {models} models")
    if ds.sizes["template"] < templates:
        has.append(_plural(ds.sizes["template"], "template"))
        needs.append(f"≥ {templates} templates")
    if shots and not (0 in _shots(ds) and any(k > 0 for k in _shots(ds))):
        has.append("no few-shot settings" if not _shots(ds) else f"shots {_shots(ds)}")
        needs.append("0-shot and k-shot prompts")
    have_kinds = _meta_values(ds, "kind")
    if [k for k in kinds if k not in have_kinds | ({"tuned"} if have_kinds & TUNED else set())]:
        has.append(f"model kinds {sorted(have_kinds) or 'unknown'}")
        needs.append(" and ".join(kinds) + " models")
    have_archs = _meta_values(ds, "arch")
    if [a for a in archs if a not in have_archs]:
        has.append(f"architectures {sorted(have_archs) or 'unknown'}")
        needs.append(" and ".join(archs) + " models")
    if hidden and not all(
        k in ds and bool(ds[k].notnull().any()) for k in ("hidden_cosine", "hidden_l2")
    ):
        has.append("no hidden-state metrics")
        needs.append("them")
    if not has:
        return ""
    text = f"this run has {', '.join(has)}; {what} needs {', '.join(needs)}"
    return text + (f" — {instead}" if instead else "")


#: attr of a run none of whose models is a finding (:func:`findings_run`)
NOT_FINDINGS = "psens_not_findings"
#: attr of a findings run: the models left out (not findings), so :func:`lacks` counts the
#: run's models as "that are findings", not as all the run has
LEFT_OUT = "psens_left_out"


def findings_run(ds, head=None, *, shots=None) -> tuple[Any, str]:
    """The run a factor verdict may use, and a note saying what was left out.

    A model whose IPS is not a finding (:func:`psens.ips.verdicts.findings`: below its noise
    floor, answering one letter, at chance, or copying the few-shot examples' letter) has no
    findings: its factor effects (few-shot, instruction tuning, scale, MoE) are not told
    apart from noise or from its answer preference. Such models are left out of the
    returned run, so every verdict drawn from it (and every matched-pair check,
    :func:`psens.ips.factors.matched_pairs`) is made without them. When no model is a
    finding the run is returned whole, marked so that :func:`verdict` says "this run cannot
    test the claim" for each factor.

    Parameters
    ----------
    ds : xarray.Dataset
        A run.
    head : pandas.DataFrame or dict, optional
        A :func:`psens.ips.headline.headline` of the run (the verdicts then use the models
        that are findings at its shot setting), or :func:`psens.ips.headline.headlines` (at
        each of its shot settings; saves computing them again).
    shots : sequence of int, optional
        Shot settings a model must be a finding at. Default (no ``head``): every shot
        setting of the run, since the factor verdicts compare or pool them — so a model
        that copies the few-shot examples' letter at k shots is left out.

    Returns
    -------
    (xarray.Dataset, str)
        The run for verdicts, and the note (``""`` when every model is a finding).
    """
    from psens.ips.verdicts import findings, findings_across, findings_models

    if isinstance(head, dict) and shots is None:  # headlines(ds): every shot setting
        why = findings_across(head)
    elif head is not None and shots is None:
        why = findings(head)
    else:
        if shots is None and "shot" in ds.dims:
            shots = [int(s) for s in ds["shot"].values]
        why = findings_models(ds, shots)
    names = model_names(ds)
    clean = [m for m in names if not why.get(m, "")]
    noisy = [m for m in names if m not in clean]
    if not noisy:
        return ds, ""
    reasons = "; ".join(f"{m}: not a finding ({why[m]})" for m in noisy)
    if clean:
        note = (
            f"{reasons} — left out of every factor verdict below; the verdicts use "
            f"{', '.join(clean)}"
        )
        kept = ds.sel(model=clean)
        kept.attrs = {**kept.attrs, LEFT_OUT: ", ".join(noisy)}  # not the run's own attrs
        return kept, note
    note = (
        f"no model of this run is a finding ({reasons}): the effects below are shown, none "
        "is a finding"
    )
    out = ds.copy()
    out.attrs[NOT_FINDINGS] = note
    return out, note


def shots_text(shots) -> str:
    """The shot settings a verdict uses, in words: ``[0, 1, 3]`` → ``"0-shot, 1-shot,
    3-shot"``; ``None`` (or ``[None]``: a run without a ``shot`` dim) → ``"the run's one shot
    setting"``."""
    ks = [int(k) for k in (shots or []) if k is not None]
    return ", ".join(f"{k}-shot" for k in ks) if ks else "the run's one shot setting"


def verdict(run: str, holds: bool | None, ds=None) -> str:
    """``"This run: <run> — the paper's claim holds here."`` (``holds`` True), "does not
    hold here" (False) or "this run cannot test the claim" (None, and always on a run of
    :func:`findings_run` with no finding); "This synthetic run" when ``ds`` is synthetic
    (:func:`psens.ips.verdicts.claim_text`)."""
    from psens.ips.verdicts import claim_text

    if ds is not None and getattr(ds, "attrs", {}).get(NOT_FINDINGS):
        holds = None  # no model of the run is a finding
    return claim_text(run, holds, synthetic=ds is not None and is_synthetic(ds))


def order_verdicts(head, ds, reasons: dict[str, str] | None = None) -> list[str]:
    """The fig. 9 claim (high > low, mid > low) for every model of a headline
    (:func:`psens.ips.headline.headline`) as measured by :func:`psens.ips.claims.order_claim`:
    the per-item band difference with its bootstrap CI and sign-flip p, and its verdict
    (:func:`psens.stats.is_finding`); "cannot test" for a model that is not a finding
    (``reasons``, default :func:`psens.ips.verdicts.findings_models` at the headline's shot
    setting). One line per model and contrast, "This synthetic run" on a synthetic run."""
    from psens.ips.claims import order_claim
    from psens.ips.verdicts import findings_models

    if reasons is None:
        reasons = findings_models(ds, heads=head)
    rows = order_claim(ds, shot=head.attrs["pooled"]["shot"], reasons=reasons)
    who = "This synthetic run" if is_synthetic(ds) else "This run"
    return [
        f"{who}: {r.model}: {r.band} {r.ips_band:.3f} vs {r.base} {r.ips_base:.3f}, "
        f"{r.measured} — {r.verdict}."
        for r in rows.itertuples()
    ]


def few_shot_verdicts(claim, ds) -> list[str]:
    """The few-shot claim (fig. 8: few-shot prompts lower IPS) as measured by
    :func:`psens.ips.claims.few_shot_claim`: one line per model and k-shot setting (its
    ΔIPS with CI and p, its verdict, and the answer confound where the model's letter follows
    the examples'), then the run's verdict — what it pools, and "this run cannot test the
    claim" when no model is a finding at the shots it compares (``ds`` a
    :func:`findings_run` run with none), or no row could be tested.

    Parameters
    ----------
    claim : pandas.DataFrame
        :func:`psens.ips.claims.few_shot_claim` of the run.
    ds : xarray.Dataset
        The run the verdicts are drawn from (:func:`findings_run`).

    Returns
    -------
    list of str
        The per-model lines, then the verdict sentence (:func:`verdict`).
    """
    lines = []
    for r in claim.itertuples():
        line = f"  {r.model}: {r.measured} — {r.verdict}"
        lines.append(line + (f". Confound: {r.caveats}" if r.caveats else ""))
    tested = [h for h in claim["holds"] if h is not None]
    holds = all(tested) if tested else None
    models = ", ".join(dict.fromkeys(str(m) for m in claim["model"]))
    confounded = list(dict.fromkeys(claim.loc[claim["caveats"] != "", "model"].astype(str)))
    run = f"few-shot ΔIPS against 0 shots for {models} — {claim.attrs['pools']}"
    if confounded:
        run += (
            f"; {', '.join(confounded)}: the answer follows the few-shot examples, so its "
            "ΔIPS is the change of the letter it copies"
        )
    return [*lines, verdict(run, holds, ds)]


def _copies_examples(ds, model: str) -> str:
    """A sentence when ``model``'s answer letter follows the few-shot examples' letter at some
    shot setting of ``ds`` (:func:`psens.ips.verdicts.answer_confound`), else ``""``."""
    from psens.ips.verdicts import answer_confound

    if "shot" not in ds.dims:
        return ""
    conf = answer_confound(ds)
    conf = conf[(conf["model"] == model) & conf["follows_examples"]]
    if conf.empty:
        return ""
    where = ", ".join(
        f"{r.shot}-shot {r.majority_answer} on {100 * r.majority_share:.0f} % (examples "
        f"answer {', '.join(r.examples)})"
        for r in conf.itertuples()
    )
    return (
        f" But with few-shot examples its answer follows their letter ({where}): the letter it "
        "answers is set by the prompt's examples too, so neither its 0-shot letter nor its "
        "few-shot change is a finding."
    )


def chat_check(ds, head, *, templates=("ips1",), limit: int = 8) -> tuple[str, Any, Any]:
    """Is it the model or the prompt? The first instruct model of a real run whose headline
    flags "majority answer X on N %" is asked the run's first ``limit`` items (0-shot, under
    ``templates``) as raw prompts — as the IPS paper formats them — and through its chat
    template (:func:`psens.models.chat.chat_comparison`); one model, so the cell stays
    seconds long (pass ``head`` filtered to another model to ask that one).

    Returns ``(message, table, chart)``: the message says what was asked and what changed
    (or why nothing was asked: a synthetic run, no flagged instruct model, a model that
    does not load offline); ``table`` has one row per item and way of asking (the answer
    and the option probabilities), ``chart`` the answer shares; both None when nothing
    was asked.
    """
    from psens.models import chat

    if is_synthetic(ds):
        return "a synthetic run: no model to ask (the shipped run asks SmolLM2)", None, None
    rows = head[(head["order"] == "all") & head["kind"].isin(sorted(TUNED))]
    flagged = [
        (str(r.model), float(r.majority_share))
        for r in rows.itertuples()
        if "majority answer" in str(r.caveats)
    ]
    if not flagged:
        return "no instruct model of this run answers one letter on most items", None, None
    model, share = flagged[0]
    try:
        import psens
        from psens.config import RunConfig
        from psens.runner import select_items
        from psens.settings import run_config

        config = run_config(ds)
        ids = {str(i) for i in ds["sample"].values}
        items = [it for it in select_items(RunConfig.from_any(config)) if str(it.id) in ids]
        scorer = psens.models.load(model)
        res = chat.chat_comparison(scorer, items[:limit], templates)
    except (ValueError, OSError, ImportError) as exc:
        return f"{model}: not asked again here — {exc}", None, None
    summary = chat.majority(res)
    raw, chatted = (summary.loc[a] for a in chat.ASKED)
    from psens.ips.headline import MAJORITY_SHARE

    def pct(x: float) -> str:
        return f"{100 * x:.0f} %"

    stays = chatted.majority_share > MAJORITY_SHARE
    message = (
        f"{model} (majority answer on {pct(share)} of this run's 0-shot answers), asked again on "
        f"{res.sizes['sample']} items × {', '.join(templates)}: as a raw prompt majority "
        f"{raw.majority_answer} on {pct(raw.majority_share)}, accuracy {raw.accuracy:.2f}; "
        f"through its chat template majority {chatted.majority_answer} on "
        f"{pct(chatted.majority_share)}, accuracy {chatted.accuracy:.2f} — "
        + (
            "the one-letter answering stays with the chat template: it is the model, not the "
            "prompt format."
            if stays
            else "the chat template breaks the one-letter answering: it is the prompt format "
            "(the IPS paper's raw prompts), not the model alone."
        )
    )
    message += _copies_examples(ds, model)
    frame = res["option_prob"].to_dataframe().reset_index()
    table = frame.pivot_table(
        index=["sample", "asked"], columns="option", values="option_prob", sort=False
    )
    picks = res["choice"].to_dataframe().reset_index().set_index(["sample", "asked"])
    table.insert(0, "answer", picks["choice"])
    truth = res["answer"].to_series()
    table.insert(0, "correct answer", truth.reindex(table.index.get_level_values("sample")).values)
    return message, table.round(3), chat.chart(res)


def paper_vs_run(paper: str, run: str, holds: bool | None, ds=None) -> str:
    """``"The paper reports <paper>.\n"`` followed by :func:`verdict`."""
    return f"The paper reports {paper}.\n" + verdict(run, holds, ds)


def _cuts_text(table) -> bool:
    """Whether pandas would cut a text cell of ``table`` ("…" beyond ``display.max_colwidth``
    characters, 50 by default): a caveat or a long model name."""
    import pandas as pd

    width = pd.get_option("display.max_colwidth")
    if width is None or not isinstance(table, pd.DataFrame):
        return False
    text = [c for c in table.columns if pd.api.types.is_string_dtype(table[c].dtype)]
    cells = [table[c].dropna().astype(str) for c in text]  # object or pandas 3's str
    return any(len(c) and int(c.str.len().max()) > width for c in cells)


def show(table, *sources):
    """``table`` as is, or — when it or a source comes from a synthetic run — styled with a
    caption saying so (3 decimals), so toy numbers never appear under real model names
    unlabelled. A table with text longer than pandas' column width (the headline's
    ``caveats``) is styled too, which shows every cell in full."""
    if not is_synthetic(table, *sources):
        return table.style if _cuts_text(table) else table
    caption = f"{SYNTHETIC_NOTE}: toy numbers, not any model's and not the paper's"
    return table.style.set_caption(caption).format(precision=3)
