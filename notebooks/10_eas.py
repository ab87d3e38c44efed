# %% [markdown]
# # 10 · EAS: prompt sensitivity or evaluation artifact?
#
# The EAS study (Muthukumarana et al., "Prompt Sensitivity or Evaluation Artifact? A Task-Aware Analysis for Large Language Models") asks how much measured prompt sensitivity comes from the **evaluator** rather than the model. Every item is asked under a $2^3$ factorial design — role framing, format directive, answer prefix; templates `T{role}{fmt}{prefix}` — and each response is scored twice: by a task heuristic $h_{i,t}$ (option-letter match for ARC, yes/no match for BoolQ, token F1 for SQuAD) and by an LLM judge $j_{i,t}$ (binary verdict). Per instance:
#
# $$\mathrm{SensH}_i = \sigma_t(h_{i,t}),\quad \mathrm{SensJ}_i = \sigma_t(j_{i,t}),\quad \mathrm{EAS}_i = |\mathrm{SensH}_i - \mathrm{SensJ}_i|,\quad \mathrm{SignedEAS}_i = \mathrm{SensH}_i - \mathrm{SensJ}_i$$
#
# (population std over the 8 templates), and four zones from the 75th percentiles of SensH and SensJ pooled over all instances ("high" = strictly above): **artifact** (H high, J not), **underdetected** (J high, H not), **genuine** (both), **stable** (neither). What the authors report for 9 models × 3 tasks: signed EAS is mostly negative on ARC-Challenge and BoolQ (the judge sees sensitivity the extraction heuristics miss) and positive on SQuAD (token F1 penalises correct paraphrases); the sign follows the task format more than model family or size; BoolQ is the most stable task; the format directive is the dominant factor and role framing matters little.
#
# The published code has scorer bugs (the first capital letter of a response is taken as the answer, "no" is matched as a substring, F1 on token sets). psens's default scorers are correct; `compat="eas"` reproduces the published numbers exactly, bugs included.
#
# **How to run.** Top to bottom. Section 2 opens the **shipped real run** `data/runs/eas.nc`
# (or the EAS run file `PSENS_RUN` names, written by `psens run CONFIG` with
# `method = "eas"`): both offline models, SmolLM2-135M-Instruct and Gemma-3-270M (base),
# answering 6 items each of ARC-Challenge, BoolQ and SQuAD under the 8 templates, scored by
# the task heuristics and by SmolLM2-135M-Instruct as judge; `make shipped-run` recomputes it
# (config `data/runs/eas.toml`). The `parameters` cell also reads `PSENS_SIZE` (`tiny`, the
# default, and `full`, which runs the live model section) and `PSENS_LIVE=1` (the live
# section at tiny size too). The live section uses the offline SmolLM2-135M-Instruct
# (`psens.models.load("smollm2-135m-instruct")`; the first load converts its GGUF file once,
# 20–60 s, later loads take a few seconds) through `psens.models.LocalGenerator`, so nothing
# reaches a model hub. Charts are widgets: change a control and the chart updates in place.
#

# %% tags=["parameters"]
import os

# An EAS run file (psens run CONFIG with method = "eas"); empty: the shipped data/runs/eas.nc.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "tiny": offline in seconds (published data + synthetic scores); "full": live SmolLM2 runs.
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")
# Live SmolLM2 generation also at tiny size (the first model conversion takes 20-60 s).
PSENS_LIVE = os.environ.get("PSENS_LIVE", "") == "1" or PSENS_SIZE == "full"


# %%
from pathlib import Path

import numpy as np
import pandas as pd
from IPython.display import display

import psens
import psens.widgets as pw
from psens.eas import charts as po

pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)

# published data shipped with the repository (data/reference, provenance in its README)
REFERENCE = Path.cwd().parent / "data" / "reference"

from psens import eas
from psens.variants import EAS_TEMPLATE_IDS, eas_factors, render_variant

EAS_DIR = REFERENCE / "eas"
HAVE_SAMPLE = (EAS_DIR / "judged_gpt4o_arc_sample.jsonl").exists()
HAVE_TABLE = (EAS_DIR / "metrics_instance.csv").exists()

# %% [markdown]
# ## 1 · The $2^3$ templates
#
# Role line, task body, format directive naming the item's own labels ("(A, B, C, or D)"; numeric ARC labels and 3- or 5-option items get theirs), answer prefix. Here for one offline ARC-Challenge validation item:

# %%
arc = psens.datasets.load("arc-challenge", split="validation", limit=3)
print(
    pd.DataFrame([{"template": t, **eas_factors(t)} for t in EAS_TEMPLATE_IDS]).to_string(
        index=False
    )
)
for tid in ("T000", "T111"):
    print(f"--- {tid} ---")
    print(render_variant(arc[0], tid))

# %% [markdown]
# ## 2 · The shipped real run: SmolLM2-135M-Instruct and Gemma-3-270M
#
# Every item under all 8 templates, a greedy answer of at most 12 tokens from each model, scored by the corrected task heuristics and by **SmolLM2-135M-Instruct as judge**. A 135M judge is an illustration of the pipeline, not a finding: its verdicts are close to guesses, and it judges its own answers for SmolLM2. Verdicts it gave in no readable form are recorded as unparsed and left out (never counted wrong). Gemma-3-270M is a base model without a chat template: it gets the raw prompt text.

# %%
from psens import method_runs
from psens.eas import run as eas_run

EAS_RUN = Path(PSENS_RUN) if PSENS_RUN else REFERENCE.parent / "runs" / "eas.nc"
TINY_JUDGE = "judge: SmolLM2-135M (a tiny judge: an illustration, not a finding)"
if EAS_RUN.exists():
    real_run = psens.open_run(EAS_RUN)
    real_rows = eas_run.rows(real_run)
    real = eas.instance_metrics(real_rows)
    print(method_runs.summarize(real_run))
else:
    real_run = real_rows = real = None
    print(f"{EAS_RUN} not found: skipping the real run (make shipped-run writes it)")

# %% [markdown]
# **What the paper claims** (for 9 API and open models, 200 items per task; stated as the paper's): signed EAS is negative on ARC-Challenge and BoolQ and positive on SQuAD, the sign follows the task format, and the format directive is the dominant factor. **What this run can show** is printed below with bootstrap 95 % intervals over its items: with 6 items per task, two tiny models and a tiny judge, a mean whose interval contains 0 is inside the noise and is not called a finding either way.

# %%
if real is not None:
    for (model, dataset), grp in real.groupby(["model_name", "dataset"]):
        vals = grp["signed_eas"].to_numpy(float)
        lo, hi = eas.bootstrap_ci(vals)
        mean = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
        if not np.isfinite(lo):
            reading = "no instance with both scores: nothing to read"
        elif lo <= 0 <= hi:
            reading = "interval contains 0: inside the noise, not a finding"
        else:
            reading = (
                f"{'positive' if lo > 0 else 'negative'} beyond the bootstrap noise of these items "
                "(tiny models, tiny judge: an illustration)"
            )
        print(
            f"{model:22s} {dataset:14s} signed EAS {mean:+.3f} [{lo:+.3f}, {hi:+.3f}] -> {reading}"
        )
    display(po.signed_eas(real).properties(title=f"Signed EAS per task, real run ({TINY_JUDGE})"))
    real_effects = eas.factor_effects(real, by=["model_name", "dataset"], n_boot=1000)
    display(real_effects.round(3))
    display(
        po.factor_effects_bars(eas.factor_effects(real, by=["dataset"]), by="dataset").properties(
            title=f"Factor effects, real run ({TINY_JUDGE})"
        )
    )

# %% [markdown]
# The zones of the real run in the zone explorer (thresholds pooled over both models and the three tasks, as published); click an instance for its eight answers and verdicts.

# %%
if real is not None:
    display(pw.EASZones(real, rows=real_rows))

# %% [markdown]
# ## 3 · Reproducing the published numbers (`compat="eas"`)
#
# `data/reference/eas/judged_gpt4o_arc_sample.jsonl` holds 88 ARC-Challenge questions × 8 templates of GPT-4o's published responses and judge verdicts. The published scorers (`compat="eas"`) on these rows give the published per-instance metrics bit for bit.

# %%
if HAVE_SAMPLE and HAVE_TABLE:
    judged = pd.read_json(EAS_DIR / "judged_gpt4o_arc_sample.jsonl", lines=True)
    published = pd.read_csv(EAS_DIR / "metrics_instance.csv")
    ours = eas.instance_metrics(judged, compat="eas")
    ref = published[published.model_name == "gpt-4o"].set_index("id").loc[ours.id]
    cols = ["sens_heuristic", "sens_judge", "eas", "mean_heuristic", "mean_judge"]
    gap = np.abs(ours[cols].to_numpy() - ref[cols].to_numpy()).max()
    print(f"{len(ours)} instances; largest difference from the published table: {gap}")
    assert gap == 0
else:
    judged = published = None
    print("data/reference/eas not found: skipping the published reproduction")

# %% [markdown]
# The aggregate of the published per-instance table (9 models × 600 items) with the published rules — sample stds with ddof=1, zones from the pooled 75th percentiles, bootstrap CIs from a fresh `default_rng(42)` per (group, metric) — equals the published per-dataset table.

# %%
if published is not None:
    agg = eas.aggregate(published, compat="eas")
    table_path = EAS_DIR / "metrics_dataset.csv"
    if table_path.exists():
        pub = pd.read_csv(table_path)
        num = [c for c in pub.columns if c not in ("dataset", "model_name", "task_type")]
        diff = np.nanmax(np.abs(agg[num].to_numpy(float) - pub[num].to_numpy(float)))
        print("largest difference from the published dataset table:", diff)
    display(
        agg[
            [
                "dataset",
                "model_name",
                "eas_mean",
                "eas_ci_lo",
                "eas_ci_hi",
                "n_artifact",
                "n_underdetected",
                "n_genuine",
                "n_stable",
            ]
        ].head(9)
    )

# %% [markdown]
# ### The published findings in the published numbers
#
# Mean signed EAS by task (fig. 6): negative on ARC-Challenge and BoolQ, positive on SQuAD. Bars are per model; the task, not the model, sets the sign.

# %%
if published is not None:
    print(published.groupby("dataset")["signed_eas"].mean().round(3))
    display(po.signed_eas(published))

# %%
if published is not None:
    display(po.eas_by_task(agg).properties(title="EAS by task with bootstrap 95% CIs"))
    effects = eas.factor_effects(published, by=["dataset"])
    display(effects.round(3))
    display(po.factor_effects_bars(effects, by="dataset"))

# %% [markdown]
# ## 4 · The zone explorer
#
# SensH vs SensJ per instance with the two threshold rules (pooled over every instance given, as published; the `pool` toggle recomputes them over the shown subset, the slider moves the quantile). Click an instance to see its eight templates scored by the heuristic and the judge, with the responses, on the right. With the judged rows, the scorer toggle switches between the corrected scorers and `compat="eas"` and the zones move with it.

# %%
if judged is not None:
    # the sample's own 75th percentiles are 0 (most of its instances never vary): the zones
    # use the thresholds pooled over the whole published study instead
    th = eas.thresholds(published.sens_heuristic, published.sens_judge)
    print("published pooled thresholds (t_H, t_J):", np.round(th, 3))
    zones_w = pw.EASZones(rows=judged, scorer="eas", thresholds_hj=th)
    display(zones_w)

# %% [markdown]
# On GPT-4o's clean answers the published and the corrected scorers disagree only on ARC items whose options are numbered 1–4. There the published prompts asked for a *letter* (A–D), so GPT-4o often answered "B": neither scorer can map that to option 2 while the judge accepts it (psens's templates ask for the *number* instead). Where the answer sits in a sentence, the corrected extractor finds the option number, the published one takes the first capital letter. One such instance, scored with the corrected scorers:

# %%
if judged is not None:
    fixed = eas.instance_metrics(judged)
    compat = eas.instance_metrics(judged, compat="eas")
    moved = fixed[fixed.sens_heuristic != compat.sens_heuristic]
    print(f"{len(moved)} of {len(fixed)} instances change SensH with the corrected scorers")
    zones_w.scorer = "corrected"
    if len(moved):
        zones_w.instance = f"gpt-4o|arc_challenge|{moved.id.iloc[0]}"
        display(zones_w.tables["detail"][["template_id", "heuristic", "judge", "raw_response"]])

# %% [markdown]
# The whole published table (5,400 instances, nine models) in the same explorer, filtered to one model; the thresholds stay pooled over all nine models.

# %%
if published is not None:
    display(pw.EASZones(published, model="gpt-4o", dataset="arc_challenge"))

# %% [markdown]
# ## 5 · Running the study live with SmolLM2
#
# The same pipeline on a local model: `eas.build_rows` renders the 8 templates, `eas.generate_responses` calls any client with `chat_many` — here `psens.models.LocalGenerator` (batched, left-padded, greedy), or `psens.backends.OpenAIClient` for a server — and `eas.judge_responses` asks a judge (`psens.backends.CallableJudge` around the same generator; `HTTPJudge` for a server). A failed call is recorded as failed (never as a wrong or empty answer) and calling the step again retries only the failures. A 135M model is a weak judge: this shows the mechanics, not a result. Runs with `PSENS_SIZE=full` or `PSENS_LIVE=1`.

# %%
if PSENS_LIVE:
    from psens.backends import CallableJudge

    scorer = psens.models.load("smollm2-135m-instruct")
    gen = psens.models.LocalGenerator(scorer, max_new_tokens=16, batch_size=8)
    n_live = 3 if PSENS_SIZE == "full" else 2
    rows = eas.build_rows(arc[:n_live], dataset="arc_challenge", model_name=scorer.name)
    rows = eas.generate_responses(rows, gen, max_tokens=16, temperature=0)
    judge = CallableJudge(psens.models.LocalGenerator(scorer, max_new_tokens=4))
    rows = eas.judge_responses(rows, judge)
    print(rows.status.value_counts().to_dict(), rows.judge_status.value_counts().to_dict())
    display(rows[["id", "template_id", "raw_response", "judge_raw", "judge_correct"]].head(8))
    live = eas.instance_metrics(rows)
    display(live[["id", "sens_heuristic", "sens_judge", "eas", "signed_eas", "trizone"]])
    display(pw.EASZones(live, rows=rows))
else:
    print("live SmolLM2 section skipped (set PSENS_LIVE=1 or PSENS_SIZE=full)")
