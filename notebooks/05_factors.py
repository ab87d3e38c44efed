# %% [markdown]
# # 05 · Factors that change prompt sensitivity (IPS paper §4.2–4.3)
#
# The IPS paper measures the prompt sensitivity of 50 LLMs with the *interaction-based prompt sensitivity* (IPS, eq. 3): how much the salient AND/OR interactions between the input words change when the prompt template changes (0 = identical interactions, 2 = every salient interaction flips sign). It then disentangles four factors (§4.2). **The paper reports** that
#
# 1. supervised fine-tuning: instruct/chat models are less sensitive than their base models (fig. 5);
# 2. scale: larger models are less sensitive within a series (fig. 6);
# 3. architecture: dense models are less sensitive than MoE models of the same family (fig. 7; table 7 controls for activated parameters);
# 4. prompting: few-shot prompts reduce sensitivity, most from 0 to 1 shot (fig. 8);
#
# and (§4.3) that one mechanism is behind all four: they mostly stabilise **low-order** interactions (few words), while high-order interactions stay unstable (fig. 10).
#
# Each section below runs the comparison only when the run has the models it needs (a factor needs both groups: e.g. an instruct model *and* its base model) and otherwise says what is missing; after each, a cell states what this run shows next to the paper's claim. Every number comes with uncertainty, which the paper does not report: a bootstrap 95 % CI over samples for each IPS, and a paired sign-flip permutation test for each difference (`p_value`), so a factor effect can be told from noise.

# %% [markdown]
# ## Parameters
#
# `PSENS_RUN` opens a stored run (`.zarr` or `.nc`); without it the shipped real run `data/runs/arc.nc` (two models, shots 0/1/3) when the checkout has it. Otherwise — or with `PSENS_SIZE=tiny` — the notebook builds a **synthetic run** over ten of the paper's model names, with metadata from `data/models.csv` but **toy interactions** whose instability is *made* to follow the directions the paper reports (instruct < base, larger < smaller, dense < MoE, fewer shots → more sensitive). Its numbers are illustrative only: every table and chart of it says "synthetic data", and a claim "holding" on it only shows that the analysis finds what was planted. `PSENS_SIZE=full` runs all 50 paper models through `psens.run` (hours of GPU time).

# %% tags=["parameters"]
import os

# Parameters (papermill can override them; CI sets the environment variables)
PSENS_RUN = os.environ.get("PSENS_RUN", "")  # a .zarr/.nc run; empty: shipped run or synthetic
PSENS_SIZE = os.environ.get("PSENS_SIZE", "")  # "": shipped run, else "tiny"; or "full"


# %%
import altair as alt
import pandas as pd

import psens.ips.factors as F
import psens.widgets as pw
from psens.ips import charts as ips_charts
from psens.ips import tables
from psens.ips.claims import few_shot_claim
from psens.ips.factors import charts as plots
from psens.ips.headline import headline_lines, headlines
from psens.ips.verdicts import findings_models
from psens.store.labels import model_names
from psens.synthetic import TINY_MODELS

pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)

N_BOOT, N_PERM = (200, 500) if PSENS_SIZE != "full" else (1000, 2000)
TINY = dict(models=F.paper_models(TINY_MODELS), n_samples=12, shots=[0, 1, 2, 3], seed=0)
FULL = pw.paper_config("fewshot")  # data/examples/paper_fewshot.toml
# attach_metadata fills empty model metadata (family, kind, arch, size) from models.csv
ds = F.attach_metadata(pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL))
print(pw.describe(ds))


def models_where(**criteria):
    """The run's models matching the metadata ``criteria`` (none: an empty list)."""
    try:
        return model_names(F.select_models(ds, **criteria))
    except ValueError:  # no model matches, or the run has no such metadata
        return []


def attempt(label, analysis):
    """The analysis' result, or None after printing why this run cannot support it."""
    try:
        return analysis()
    except ValueError as exc:  # psens names what the run lacks
        print(f"{label}: not on this run — {exc}")
        return None


# %% [markdown]
# ## The run's headline
#
# The numbers `psens summary` prints (`ds.psens.headline()`): a model flagged "not above the noise floor" has a template effect that numerical noise alone could give, so a factor comparison involving it is not a finding; "majority answer X on N %" means its output consistency only says it always answers X.

# %%
heads = headlines(ds)  # every shot setting, the noise floor computed once
head = next(iter(heads.values()))  # the first shot setting: psens summary's numbers
print("\n".join(headline_lines(head)))

# %% [markdown]
# Every factor verdict below is drawn from the models that are findings at every shot setting (`pw.findings_run`, the rule of `psens.ips.verdicts.findings`: above the noise floor, no majority answer, above chance, not copying the few-shot examples' letter): a model that is not is left out — and a comparison that needed it says what is missing.

# %%
fds, note = pw.findings_run(ds, heads)
print("factor verdicts use the models that are findings at", pw.shots_text(list(heads)))
print(note or "every model is a finding at every shot setting: all enter the factor verdicts")

# %% [markdown]
# ## Model metadata
#
# Comparisons pick their models by metadata (family, series, kind, architecture, size), joined from `data/models.csv` with `F.attach_metadata`. `F.select_models` slices a run by any of them.

# %%
pw.show(F.model_frame(ds), ds)

# %%
tuned = models_where(kind="tuned")  # instruct or chat
small_dense = models_where(arch="dense", params=(None, 8))
tuned, small_dense

# %% [markdown]
# ## Factor 1 · instruct/chat vs base (fig. 5)
#
# Pairs are the paper's (appendix E.2) whose two models are in the run, else an instruct/chat model and the base model of the same family, series and size. `pairs` has one row per pair and order band: the two IPS, `diff`, the relative change `rel_change` = (IPS_A − IPS_B)/IPS_B with A = instruct, B = base, their CIs and the paired `p_value`.

# %%
r1 = attempt("instruct vs base", lambda: F.instruct_vs_base(fds, n_boot=N_BOOT, n_perm=N_PERM))
if r1 is not None:
    rows = r1.pairs[r1.pairs.order == "all"]
    lower = int((rows["diff"] < 0).sum())
    print(
        pw.paper_vs_run(
            "that almost every instruct/chat model is less sensitive than its base model (fig. 5)",
            f"{lower} of {len(rows)} instruct/chat models have a lower IPS than their base model",
            lower > len(rows) / 2,
            fds,
        )
    )
pw.show(rows, fds) if r1 is not None else None

# %%
r1.chart() if r1 is not None else None

# %% [markdown]
# ### Representation metrics beside IPS (appendix H, table 6)
#
# Cosine similarity (↑ stable) and L2 distance (↓ stable) of the final-layer hidden states under template changes, for the same pairs. The `*_says_tuned_stabler` columns show where each metric points.

# %%
rep = None
why = pw.lacks(fds, "appendix H", hidden=True)
if why:
    print(why)
elif r1 is not None:
    rep = F.representation_table(fds, n_boot=N_BOOT, n_perm=N_PERM)
    says = rep[["cosine_says_tuned_stabler", "l2_says_tuned_stabler", "ips_says_tuned_stabler"]]
    disagree = int((says.nunique(axis=1) > 1).sum())
    print(
        pw.paper_vs_run(
            "that cosine similarity and L2 distance disagree with each other and with IPS "
            "on which model is stabler (e.g. Llama-2-13B; table 6)",
            f"the three metrics disagree on {disagree} of {len(rep)} pairs",
            disagree > 0,
            fds,
        )
    )
pw.show(rep, fds) if rep is not None else None

# %%
plots.representation_chart(rep) if rep is not None else None

# %% [markdown]
# ## Factor 2 · model scale (fig. 6)
#
# Series of one family and training kind by size. ΔIPS does not suit a continuous factor (§4.3), so the summary gives the rank correlation of IPS with size (`spearman_rho`, negative = larger is more stable) and each step's change. In the chart, lighter bars are smaller models.

# %%
r2 = attempt("scale", lambda: F.scale_series(fds, n_boot=N_BOOT, n_perm=N_PERM))
if r2 is not None:
    s2 = r2.summary[r2.summary.order == "all"]
    down = int((s2["spearman_rho"] < 0).sum())
    print(
        pw.paper_vs_run(
            "that larger models are less sensitive within a series (fig. 6)",
            f"IPS falls with size (Spearman ρ < 0) in {down} of {len(s2)} series",
            down > len(s2) / 2,
            fds,
        )
    )
pw.show(s2, fds) if r2 is not None else None

# %%
r2.chart() if r2 is not None else None

# %% [markdown]
# ## Factor 3 · dense vs MoE (fig. 7, table 7)
#
# All (dense, MoE) pairs within a family; a family's ΔIPS is the mean over its pairs, as in the paper (A = dense, B = MoE: negative = dense is stabler).

# %%
r3 = attempt("dense vs MoE", lambda: F.dense_vs_moe(fds, n_boot=N_BOOT, n_perm=N_PERM))
if r3 is not None:
    s3 = r3.summary[(r3.summary.order == "all") & (r3.summary.group != "all")]
    stabler = int((s3["rel_change"] < 0).sum())
    print(
        pw.paper_vs_run(
            "that in Llama, Qwen and OLMo every MoE model is more sensitive than the dense "
            "models of its family, Mistral being the exception (fig. 7, appendix I)",
            f"dense models are stabler in {stabler} of {len(s3)} families",
            stabler == len(s3),
            fds,
        )
    )
pw.show(r3.summary[r3.summary.order == "all"], fds) if r3 is not None else None

# %%
r3.chart() if r3 is not None else None

# %% [markdown]
# Table 7 controls for activated parameters: pairs of a dense and a MoE model with similar activated size and the same training kind. The paper (ARC): Qwen1.5-MoE-A2.7B-chat 1.665 vs Qwen2.5-3B-instruct 1.606; OLMoE-7B 1.714 vs OLMo-1B 1.632; Qwen3-30B-A3B 1.642 vs Qwen3-4B 1.568; Qwen3-30B-A3B-instruct 1.580 vs Qwen3-4B-instruct 1.483 — MoE always more sensitive.

# %%
r3b = attempt("table 7", lambda: F.matched_active(fds, n_boot=N_BOOT, n_perm=N_PERM))
if r3b is not None:
    p3 = r3b.pairs[r3b.pairs.order == "all"]
    moe_more = int((p3["diff"] < 0).sum())  # diff = dense − MoE
    print(
        pw.paper_vs_run(
            "that at a similar activated size the MoE model is always the more sensitive (table 7)",
            f"the MoE model is more sensitive in {moe_more} of {len(p3)} pairs",
            moe_more == len(p3) if len(p3) else None,
            fds,
        )
    )
pw.show(p3, fds) if r3b is not None else None

# %% [markdown]
# ## Factor 4 · 0-shot vs few-shot (fig. 8)
#
# Only prompt templates 1 and 4 (the pair with the highest 0-shot sensitivity, appendix E.6), with the run's in-context examples (the `shot` dim). The verdict is `psens.ips.claims.few_shot_claim`: per model (models are never averaged together), its IPS over its items at k shots against 0 shots, ΔIPS with a bootstrap 95 % CI over items and a paired sign-flip p, and the answer confound (`answer_confound`: a model whose letter follows the examples' has a ΔIPS that is the change of the letter it copies). A model enters the verdict only when it is a finding at every shot setting (`fds`, above); the others keep their numbers with "cannot test". The chart (`F.few_shot`) shows each model's IPS at each shot setting with its CI; fig. 10 below uses the same comparison by order band.

# %%
r4, claim = None, None
why = pw.lacks(fds, "the few-shot comparison", shots=True)
if why:
    print(why)
else:
    r4 = attempt("few-shot", lambda: F.few_shot(fds))  # the claim's resamples: 1000, 2000
    # the verdict: every model of the run, alone; "cannot test" unless it is a finding at
    # every shot setting (the models of fds)
    why4 = findings_models(ds, heads=heads)  # the rule of fds: a finding at every shot setting
    claim = attempt("few-shot", lambda: few_shot_claim(ds, reasons=why4))
if claim is not None:
    print("The paper reports that few-shot prompts lower IPS, most from 0 to 1 shot (fig. 8).")
    print("\n".join(pw.few_shot_verdicts(claim, fds)))
pw.show(claim.drop(columns=["claim"]), ds) if claim is not None else None

# %%
r4.chart() if r4 is not None else None

# %% [markdown]
# **Does the answer letter follow the examples?** A few-shot prompt ends its examples with their answers ("Answer: C"). A model that then answers C on most items has changed its *letter*, not its reading of the question, and its few-shot ΔIPS is confounded. `psens.ips.verdicts.answer_confound` puts each shot setting's answers beside the examples' letters; a model flagged `follows_examples` is not a finding at that shot setting (its headline says so), so `pw.findings_run` left it out of the verdict above.

# %%
from psens.ips.verdicts import answer_confound

pw.show(answer_confound(ds).round(3), ds) if "shot" in ds.dims else None

# %% [markdown]
# ## The common mechanism: ΔIPS by order (§4.3, fig. 10)
#
# The same factors restricted to low- (|S| ≤ n/3), mid- and high-order interactions. Each chart compares two groups of models: on the left their IPS, on the right ΔIPS = (IPS_A − IPS_B)/IPS_B averaged over matched pairs (an instruct/chat model and the base model of the same series and size; every dense and MoE model of one family; each model at k shots and at 0 shots). Bars below zero mean the factor lowers the sensitivity of that band; whiskers are bootstrap 95 % CIs over samples. Only the factors with a matched pair in this run are shown. Notebook 04 has the same figure as a widget (`FactorCompare`).

# %%
per_sample = tables.per_sample_ips(fds)
meta = tables.model_meta(fds)
fig10 = {}
if r1 is not None:
    fig10["instruct/chat vs base"] = dict(
        by="kind", a=["chat", "instruct"], b=["base"], match="series+params"
    )
if r3 is not None:
    fig10["dense vs MoE"] = dict(by="arch", a=["dense"], b=["moe"], match="family")
if r4 is not None:
    shots = [int(k) for k in fds["shot"].values]
    fig10["few-shot vs 0-shot"] = dict(by="shot", a=[k for k in shots if k > 0], b=[0])
fig10 = {
    label: tables.factor_table(per_sample, meta, **kwargs, n_boot=N_BOOT)
    for label, kwargs in fig10.items()
}
if fig10:
    print(
        "The paper reports that each factor lowers low-order IPS most, mid-order less and "
        "high-order hardly (fig. 10)."
    )
    for label, (_, d) in fig10.items():
        d = d.set_index("order")["rel_change"]
        low, mid, high = (float(d[o]) for o in ("low", "mid", "high"))
        text = f"{label}: ΔIPS low {low:+.1%}, mid {mid:+.1%}, high {high:+.1%}"
        print(pw.verdict(text, low < 0 and low <= mid and low <= high, fds))
else:
    print("this run has no matched pair for any factor; fig. 10 needs at least one")

# %%
charts = [ips_charts.factor_chart(g, d, title=label) for label, (g, d) in fig10.items()]
alt.vconcat(*charts) if charts else None

# %%
by_order = {label: d.set_index("order") for label, (_, d) in fig10.items()}
pw.show(pd.concat(by_order, names=["factor"]), fds) if by_order else None

# %% [markdown]
# The paired version for the paper's own pairings, with the permutation test: every comparison above has one `summary` row per group and order band.

# %%
pw.show(r1.summary[r1.summary.order != "all"], fds) if r1 is not None else None

# %% [markdown]
# ## Any comparison you like
#
# `F.compare_models` takes explicit `(A, B[, group])` pairs, so any two groups can be compared with the same statistics; build the pairs from metadata. Pairs of *different* models (another family or size) differ in much more than the factor, so this is no test of the paper's claim — but it is what a run of unmatched models can show.

# %%
kept = set(model_names(fds))  # the same models as every verdict above
base = [m for m in models_where(kind="base") if m in kept]
tuned = [m for m in models_where(kind="tuned", arch="dense") if m in kept]
pairs = [(t, b, "tuned vs base") for t in tuned for b in base]
mine = None
if pairs:
    mine = F.compare_models(fds, pairs, n_boot=N_BOOT, n_perm=N_PERM)
    if fds.attrs.get(pw.NOT_FINDINGS):
        print("no model of this run is a finding: the comparison below is no finding either")
else:
    print(pw.lacks(fds, "a tuned vs base comparison", kinds=("base", "tuned")))
pw.show(mine.summary, fds) if mine is not None else None

# %% [markdown]
# ## IPS vs output consistency (fig. 4b)
#
# Output consistency = share of samples whose prediction is the same under all templates. The paper finds IPS negatively correlated with it across models; a correlation needs at least three models.

# %%
cons = F.ips_vs_consistency(ds, n_boot=N_BOOT)  # the table: every model
why = pw.lacks(fds, "a correlation across models", models=3, instead="showing the table only")
if why:
    print(why)
    out = pw.show(cons[["model", "ips", "consistency"]], ds)
else:  # the correlation: the models above their noise floor
    corr = F.consistency_correlation(cons[cons["model"].isin(model_names(fds))])
    r = float(corr.set_index("metric").loc["pearson", "statistic"])
    print(
        pw.paper_vs_run(
            "a negative correlation between IPS and output consistency across models (fig. 4b)",
            f"Pearson r = {r:.3f} over {len(cons)} models",
            r < 0,
            fds,
        )
    )
    out = pw.show(corr, fds)
out

# %%
plots.consistency_chart(cons) if not why else None
