# %% [markdown]
# # 14 · Format spaces: accuracy spread, a budgeted best/worst search, sensitivity by format dimension
#
# FormatSpread (Sclar et al., "Quantifying Language Models' Sensitivity to Spurious Features in Prompt Design", ICLR 2024) samples prompt *formats* from a grammar — field names and their casing, separators, spacing, option enumeration — and reports the spread of a model's accuracy over them (the paper reports spreads of up to 76 accuracy points for LLaMA-2-13B; the paper's claim, not measured here), finding the best and worst format within a call budget by Thompson sampling. psens has its own grammar (`psens.formats`): a format is a point with named coordinates that renders through the same template path as the IPS paper's five templates (which are points of it, as is the EAS 2^3 design), so every psens method accepts it. This notebook adds what the interactions explain: for each *kind* of format change, how much it moves the low-, mid- and high-order interactions (IPS, Qin et al., ICML 2026).
#
# **How to run.** Top to bottom; it opens the shipped format-space runs `data/runs/formats-acc.nc` (SmolLM2-135M-Instruct and Gemma-3-270M on 150 ARC-Challenge items, 16 formats, answers only: accuracy, spread, search) and `data/runs/formats.nc` (the same formats on 6 items, n = 3 words: interactions; `scripts/shipped_run.py --only formats-acc` / `--only formats` recompute them), or the run named by `PSENS_RUN` for sections 2–5; section 6 reads the accuracies Mind Your Format (Voronov et al., Findings of ACL 2024) published for 20 real models, shipped in `data/reference/mind-your-format/`. Nothing calls a model. `PSENS_SIZE` only sets how many bootstrap and permutation draws and search seeds are used (`tiny`: a few hundred, 3 seeds).

# %% tags=["parameters"]
import os

# A stored format-space run (a zarr store or its netCDF export); empty: the shipped one.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "tiny" (default): few resamples and 3 search seeds, seconds; "full": 2,000 resamples and
# the bench's 10 search seeds.
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")

# %%
from pathlib import Path

import pandas as pd

import psens
import psens.widgets as pw
from psens import prompts
from psens.datasets import Item
from psens.formats import DIMENSIONS, GRAMMARS, IPS_POINTS, Format, eas_point, neighbours
from psens.formats.analysis import (
    accuracy_spread,
    accuracy_table,
    correctness,
    dimension_sensitivity,
    format_pss,
)
from psens.formats.charts import accuracy_chart, dimension_chart
from psens.formats.search import hit_rates, paired_search, thompson_search
from psens.store.labels import model_names

pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)
ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
N_BOOT = 300 if PSENS_SIZE != "full" else 2000
SEEDS = 3 if PSENS_SIZE == "tiny" else 10

# %% [markdown]
# ## 1 · The grammar
#
# Every dimension, its values, and what it changes. A format has one value per dimension; the `default` grammar frees the first ten (the role line and the format directive stay off: they belong to the `eas` grammar). Its id is readable and stable: `fmt-` + its changes from ips1 as `dimension=value` (`fmt-case=upper,enum=(A)`; ips1 itself is `fmt-ips1`), and `psens.prompts.get_template` builds the template from it. Runs written by earlier psens versions named formats by coded ids (`fmt-000010020000`): they open with the readable ids.

# %%
pd.DataFrame(
    [
        {
            "dimension": d.name,
            "values": ", ".join(d.names),
            "free in default": len(GRAMMARS["default"].choices[d.name]) > 1,
            "what": d.description,
        }
        for d in DIMENSIONS
    ]
)

# %% [markdown]
# The IPS paper's five templates are points of the space, and the EAS 2^3 design is the `eas` subspace; rendering the point gives the template's prompt exactly (tested in `tests/formats/test_grammar.py`).

# %%
egg = Item(
    "egg",
    "Which one does NOT lay eggs?",
    (("A", "chickens"), ("B", "dogs"), ("C", "frogs")),
    "B",
)
for name, point in IPS_POINTS.items():
    f = Format.from_coords(point)
    same = prompts.render(egg, f.id) == prompts.render(egg, name)
    print(f"{name}: {f.id}  renders as {name}: {same}  changes {point or 'none'}")
print("EAS T101 as a point:", eas_point("T101").id)
f = Format.from_coords(q_name="Q", case="upper", enum="(A)", enum_space="space", space="blank-line")
print(f"\n{f.id} ({len(neighbours(f))} formats one change away):\n")
print(prompts.render(egg, f.id) + prompts.render_spans(egg, f.id).target)

# %% [markdown]
# ## 2 · The runs: accuracy per format and its spread
#
# Two shipped runs share the same 16 formats: `formats-acc.nc` answers 150 ARC-Challenge items under each format (answers only, no masked prompts), `formats.nc` 6 items with the masked prompts the interaction analyses of sections 4–5 need. Accuracy is the share of items whose choice among the option tokens is the answer. The spread is max − min over the run's formats, with a percentile-bootstrap CI over items; the permutation column is the spread when formats do not matter (each item's correctness shuffled across formats): a spread not above it (`within_noise`) is not a finding.

# %%
RUN = PSENS_RUN or ROOT / "data" / "runs" / "formats.nc"
ACC_RUN = PSENS_RUN or ROOT / "data" / "runs" / "formats-acc.nc"
ds = psens.open_run(RUN).load()
acc_ds = psens.open_run(ACC_RUN).load()
for path, run in ((ACC_RUN, acc_ds), (RUN, ds)):
    print(
        f"{path}: {run.sizes['model']} models x {run.sizes['sample']} items x "
        f"{run.sizes['template']} formats"
    )
spread = accuracy_spread(acc_ds, n_boot=N_BOOT, n_perm=N_BOOT)
spread

# %%
acc = accuracy_table(acc_ds, n_boot=N_BOOT)
accuracy_chart(acc).properties(width=380, height=420)

# %% [markdown]
# Formats are coordinates along the `template` dim, so a dimension slices the run: e.g. accuracy by option enumeration.

# %%
acc.groupby(["model", "enum"])["accuracy"].mean().unstack("enum")

# %% [markdown]
# ## 3 · Budgeted best/worst search
#
# Replaying the stored per-item correctness as the answer of a model call, a search gets 30 % of the calls of evaluating every format on every item and answers the best and the worst format with the posterior probability that each is so. `paired_search` (psens's default) shows every format the items in one common random order, compares formats on the items both have seen with an exact finite-pool posterior, drops formats that are clearly not the best (worst) and evaluates close contenders on the whole pool, where their accuracy is exact; `thompson_search` is FormatSpread's kind of search (independent Beta posteriors, Thompson sampling). A seed "finds" the best (worst) when its answer has the highest (lowest) accuracy over all items — a format tied with the true extreme counts as found. The search replays the 150-item run; `make bench` reports the same figure over 10 seeds (`PSENS_SIZE=tiny`: 3 seeds here).

# %%
rows = []
for model, x in correctness(acc_ds).items():
    for name, search in (("paired", paired_search), ("Thompson", thompson_search)):
        h = hit_rates(x, fraction=0.3, seeds=SEEDS, search=search)
        rows.append(
            {
                "model": model,
                "search": name,
                "items": len(x),
                "calls": f"≤ {h['budget']} of {h['all_calls']}",
                "best found": f"{h['best_hits']}/{h['seeds']}",
                "worst found": f"{h['worst_hits']}/{h['seeds']}",
                "mean P(best)": h["p_best"],
                "mean P(worst)": h["p_worst"],
                "gap to best": h["best_regret"],
                "gap to worst": h["worst_regret"],
                "tied best": h["n_best_ties"],
                "tied worst": h["n_worst_ties"],
            }
        )
pd.DataFrame(rows)

# %% [markdown]
# ## 4 · Which format change moves which interactions
#
# The run's formats were sampled as a walk, so each is one change away from an earlier one. For every dimension, the IPS (eq. 3) between the pairs that differ in that dimension alone, per order band, with a bootstrap CI over items, next to the run's noise floor (jitter: the IPS between a game and itself with v + N(0, 0.09²)). A bar whose CI reaches down to the floor is inside its noise floor (`within_noise`).

# %%
dims = dimension_sensitivity(ds, n_boot=N_BOOT)
dims.pivot_table(index=["model", "dimension"], columns="order", values="ips")[
    ["all", "low", "mid", "high"]
]

# %%
dims[["model", "dimension", "order", "ips", "lo", "hi", "floor", "n_pairs", "within_noise"]]

# %%
model = model_names(ds)[0]
dimension_chart(dims[dims.model == model], title=f"{model}: IPS by format dimension").properties(
    width=420, height=220
)

# %% [markdown]
# ProSA's PSS across the formats (the share of format pairs whose correctness differs, mean over items):

# %%
format_pss(ds)

# %% [markdown]
# ## 5 · Two formats side by side
#
# Pick a model, two formats and an item: the two prompts with their difference marked, the accuracy of each, the IPS between them by order band, and the chart of IPS per dimension with the dimensions in which the two differ drawn solid.

# %%
w = pw.FormatSpace(ds)
w

# %%
import numpy as np

for model, x in correctness(acc_ds).items():
    right = np.sort(np.asarray(x).sum(axis=0))  # items answered right, per format
    row = spread.set_index("model").loc[model]
    print(
        f"{model}: {x.shape[0]} items x {x.shape[1]} formats; spread {row.spread:.3f} "
        f"(formats that do not matter: {row.null_spread:.3f}, p = {row.p_value:.2f}): "
        + ("within noise" if row.within_noise else "above the noise")
        + f"; best format {right[-1]:.0f} items right, {right[-1] - right[-2]:.0f} more than "
        f"the next; worst {right[0]:.0f}, {right[1] - right[0]:.0f} fewer than the next"
    )

# %% [markdown]
# **Reading.** The cell above prints the accuracy run's figures. On the shipped run, 150 items, the two models' accuracy spreads over the 16 formats are inside the spread of formats that do not matter (`within_noise`): these small models, near the 4-option chance of 0.25, show no measurable format sensitivity in accuracy, so the pool's "best" and "worst" format are only a few items ahead of the next (the cell above prints how many) and no search finds them reliably from 30 % of the calls — the search's low posterior probabilities say as much. Sections 4–5 rest on 6 items: CIs are wide, and cells flagged `within_noise` are not findings. The grammar, the search and the per-dimension table are the tools; larger models, or more items (`samples`) in `templates = {grammar = "default", k = 16, seed = 0}`, give figures worth reading.

# %% [markdown]
# ## 6 · Real models: Mind Your Format's published accuracies
#
# The runs above are two small models near chance. Voronov, Wolf and Ryabinin ("Mind Your Format: Towards Consistent Evaluation of In-Context Learning Improvements", Findings of ACL 2024) published the accuracies of 20 models from 1B to 70B parameters (LLaMA, Llama 2, Falcon, OPT, Pythia, BLOOM, GPT-J, GPT-NeoX) on SST-2, DBpedia, AG News and TREC, each under templates with four format dimensions: the input verbalizer (`"text: {}"`, …), the output verbalizer (`"label: {}"`, `"It was {}."`, …), the separator between input and output (`sep`) and the one between demonstrations (`big_sep`). psens ships their table (`data/reference/mind-your-format/`, Apache-2.0; provenance in `data/reference/README.md`) and `psens.formats.mind_your_format(dataset)` reads it as a format-space Dataset: models × evaluation runs (demonstration seed, selection method, prediction method, shots) along `sample` × 30 templates, the dimensions as `fmt_*` coordinates of `template` — so the analyses of sections 2 and 4 apply unchanged, with runs where a psens run has items (the paper publishes accuracies, not per-item answers).
#
# The paper's own claims (its abstract): "a poor choice of the template can reduce the performance of the strongest models and inference methods to a random guess level", and "the best templates do not transfer between different setups and even between models of the same family". Which *dimension* moves accuracy most is asked below by psens's analysis of the published numbers; it is not a claim of the paper.

# %%
from psens.formats import mind_your_format
from psens.formats.analysis import dimension_accuracy
from psens.formats.charts import dimension_accuracy_chart
from psens.formats.published import MIND_YOUR_FORMAT_DATASETS

myf = {name: mind_your_format(name) for name in MIND_YOUR_FORMAT_DATASETS}
sst2 = myf["sst2"]
print(
    f"{sst2.sizes['model']} models x {sst2.sizes['sample']} runs x {sst2.sizes['template']} "
    "templates per dataset"
)
psens.formats.analysis.format_coords(sst2).head(10)

# %% [markdown]
# Each run evaluated the ten templates of list 59; the few-shot runs with demonstration seed 59 also lists 13 and 21. Over the eight runs that scored all 30 templates, every model's accuracy spread over the templates (max − min of the mean over those runs, with a bootstrap CI over runs and the spread when formats do not matter):

# %%
spreads = pd.concat(
    accuracy_spread(ds, n_boot=N_BOOT, n_perm=N_BOOT).assign(dataset=name)
    for name, ds in myf.items()
)
spreads.pivot_table(index="model", columns="dataset", values="spread")[
    list(MIND_YOUR_FORMAT_DATASETS)
]

# %% [markdown]
# **Which format dimension moves accuracy most.** For each dimension, the absolute accuracy change between two templates that differ in that dimension alone, averaged over its template pairs, then over the 20 models, then over runs (`dimension_accuracy(ds, pooled=True)`); the CI is a bootstrap over runs, the same resamples for all dimensions, and `p_top` is the share of resamples in which the dimension has the largest change. Only the eight runs that scored all 30 templates compare all four dimensions (the default, `common=True`): list 59 alone holds one-change pairs of the output verbalizer only. `any_change` is the change between any two templates. The `all runs` columns average each dimension over every run that scored one of its pairs: the output verbalizer then covers all three demonstration seeds (23 runs).

# %%
rows = []
for name, ds in myf.items():
    common = dimension_accuracy(ds, pooled=True, n_boot=N_BOOT)
    every = dimension_accuracy(ds, pooled=True, common=False, n_boot=N_BOOT)
    every = every.set_index("dimension")[["effect", "lo", "hi", "n_units"]].add_suffix(
        " (all runs)"
    )
    rows.append(common.join(every, on="dimension").assign(dataset=name))
myf_dims = pd.concat(rows, ignore_index=True)
myf_dims[
    [
        "dataset",
        "dimension",
        "effect",
        "lo",
        "hi",
        "p_top",
        "any_change",
        "n_pairs",
        "n_units",
        "effect (all runs)",
        "lo (all runs)",
        "hi (all runs)",
        "n_units (all runs)",
    ]
]

# %%
dimension_accuracy_chart(
    myf_dims,
    facet="dataset",
    title="20 models: accuracy change by format dimension (95 % CI over runs; tick: any two)",
    width=170,
)

# %% [markdown]
# Per model (the same analysis, one model at a time): on how many of the 20 models each dimension has the largest change.

# %%
per_model = pd.concat(
    (dimension_accuracy(ds, n_boot=N_BOOT).assign(dataset=name) for name, ds in myf.items()),
    ignore_index=True,
)
tops = per_model.loc[per_model.groupby(["dataset", "model"])["effect"].idxmax()]
pd.crosstab(tops["dataset"], tops["dimension"])

# %% [markdown]
# Beside it, the same analysis of the offline run (`formats-acc.nc`, 150 items): per item, correctness is 0/1, so the change is the share of items whose answer flips when one dimension changes (CI over items).

# %%
dimension_accuracy(acc_ds, n_boot=N_BOOT)

# %% [markdown]
# **Reading (psens's analysis of the published accuracies).** Formats matter for these real models: on 77 of the 80 model–dataset pairs the accuracy spread over the 30 templates is above the spread of formats that do not matter (the three exceptions are on TREC); the median spread is 0.33–0.36 on SST-2, DBpedia and AG News and 0.15 on TREC. Over the eight runs that compare all four dimensions, the separator between demonstrations (`big_sep`) has the largest mean accuracy change on all four datasets (0.06–0.13 per change), but it is not a clear winner: it leads in fewer than 90 % of the resamples and its CI overlaps the next dimension's on every dataset (on SST-2 the input–output separator ties it). The input verbalizer moves accuracy least on all four (0.04–0.05 per change, never the largest in any resample); on SST-2, DBpedia and AG News its CI lies below every other dimension's. Which dimension leads depends on the runs: averaged over every run that scored its pairs (three demonstration seeds), the output verbalizer has the largest mean change on AG News and DBpedia, and ties the demonstration separator on TREC. Per model the leader varies as well: on no dataset does one dimension lead on more than half of the 20 models. Caveats: each dimension rests on few template pairs (the input–output separator on one or two), and the CIs cover runs, not the choice of templates. The offline models' flip shares are of another kind (items, not runs) and rest on one to four pairs per dimension near chance accuracy: they do not rank dimensions reliably.
