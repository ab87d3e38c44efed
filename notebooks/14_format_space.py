# %% [markdown]
# # 14 · Format spaces: accuracy spread, a budgeted best/worst search, sensitivity by format dimension
#
# FormatSpread (Sclar et al., "Quantifying Language Models' Sensitivity to Spurious Features in Prompt Design", ICLR 2024) samples prompt *formats* from a grammar — field names and their casing, separators, spacing, option enumeration — and reports the spread of a model's accuracy over them (the paper reports spreads of up to 76 accuracy points for LLaMA-2-13B; the paper's claim, not measured here), finding the best and worst format within a call budget by Thompson sampling. psens has its own grammar (`psens.formats`): a format is a point with named coordinates that renders through the same template path as the IPS paper's five templates (which are points of it, as is the EAS 2^3 design), so every psens method accepts it. This notebook adds what the interactions explain: for each *kind* of format change, how much it moves the low-, mid- and high-order interactions (IPS, Qin et al., ICML 2026).
#
# **How to run.** Top to bottom; nothing calls a model. By default it opens three shipped format-space runs, all answers of 16 formats of psens's default grammar (`templates = {grammar = "default", k = 16, seed = 0}`):
#
# * `data/runs/cloze-formats.nc`, **the oracle** of sections 2–3: SmolLM2-135M-Instruct on all 570 ARC-Easy validation items, each format in its cloze form (each option's text scored as a continuation, lm-evaluation-harness style; [docs/answer-formulations.md](../docs/answer-formulations.md)), answers only — the run where the formats differ measurably, so a best/worst search has something to find;
# * `data/runs/formats-acc.nc`, **the contrast**: SmolLM2-135M-Instruct and Gemma-3-270M on 150 ARC-Challenge items with letter answers (the prompt lists the options, the answer is the label's token), answers only;
# * `data/runs/formats.nc`: the letter formats on 6 items with the masked prompts the interaction analyses of sections 4–5 need.
#
# `scripts/shipped_run.py --only cloze-formats` (`--only formats-acc`, `--only formats`) recomputes each. `PSENS_RUN` names another stored format-space run: it replaces the oracle (sections 2–3) and the run of sections 4–5; the letter contrast stays the shipped one. Section 6 reads the accuracies Mind Your Format (Voronov et al., Findings of ACL 2024) published for 20 real models, shipped in `data/reference/mind-your-format/`. `PSENS_SIZE` only sets how many bootstrap and permutation draws and search seeds are used (`tiny`: a few hundred draws and one search seed; `full`: 2,000 draws and the bench's 10 seeds).

# %% tags=["parameters"]
import os

# A stored format-space run (a zarr store or its netCDF export); empty: the shipped ones.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "tiny" (default): few resamples and one search seed, seconds; "full": 2,000 resamples and
# the bench's 10 search seeds.
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")

# %%
from pathlib import Path

import numpy as np
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
    spread_line,
)
from psens.formats.charts import accuracy_chart, dimension_chart
from psens.formats.search import hit_rates, paired_search, thompson_search
from psens.ips.headline import chance_level
from psens.settings import run_settings
from psens.store.labels import model_names

pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)
ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
N_BOOT = 300 if PSENS_SIZE != "full" else 2000
SEEDS = 1 if PSENS_SIZE == "tiny" else 10

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
# Accuracy is the share of items whose chosen option is the answer: in the cloze oracle the option whose text scores highest as a continuation, in the letter runs the option whose label token is most probable. The spread is max − min over a run's formats, per model, with a percentile-bootstrap CI over items; the formats-do-not-matter spread is its permutation null (each item's correctness shuffled across the formats): a spread not above it (`within_noise`) is not a finding. Every line below names the run, the formulation, the model and how many items and formats it pools; the verdicts are `accuracy_spread`'s own (`within_noise`), never averaged over models or runs. The cloze oracle first.

# %%
SHIPPED = ROOT / "data" / "runs"
ORACLE_RUN = Path(PSENS_RUN) if PSENS_RUN else SHIPPED / "cloze-formats.nc"
LETTER_RUN = SHIPPED / "formats-acc.nc"
RUN = Path(PSENS_RUN) if PSENS_RUN else SHIPPED / "formats.nc"
oracle = psens.open_run(ORACLE_RUN).load()
letters = psens.open_run(LETTER_RUN).load()
ds = psens.open_run(RUN).load()


def pools(path: Path, run) -> str:
    """What a table of ``run`` pools: the file, its formulation, models, items and formats."""
    settings = run_settings(run)
    how = (
        f"cloze answers (each option's text scored, cloze_norm = {settings.cloze_norm})"
        if settings.answer == "cloze"
        else "letter answers (the option label's token)"
    )
    return (
        f"{path.name}: {how}; {', '.join(model_names(run))}; {run.sizes['sample']} "
        f"{run.attrs.get('dataset', '')} items x {run.sizes['template']} formats"
    )


def verdict(row: pd.Series) -> str:
    """``accuracy_spread``'s verdict on one model's spread, in words."""
    if not np.isfinite(row["spread"]):
        return "no verdict (no item scored under every format)"
    if row["within_noise"]:
        return "the formats tie: within the formats-do-not-matter spread, not a finding"
    return "the formats differ measurably: above the formats-do-not-matter spread, a finding"


def spread_verdicts(path: Path, run) -> pd.DataFrame:
    """``accuracy_spread`` of ``run`` with the run and formulation it pools; prints each
    model's line and verdict."""
    table = accuracy_spread(run, n_boot=N_BOOT, n_perm=N_BOOT)
    print(pools(path, run))
    for _, row in table.iterrows():
        print(spread_line(row))
        print(f"    verdict: {verdict(row)}")
    return table.assign(run=path.name, answers=run_settings(run).answer)


spread = spread_verdicts(ORACLE_RUN, oracle)
spread

# %%
acc = accuracy_table(oracle, n_boot=N_BOOT).assign(run=ORACLE_RUN.name)
accuracy_chart(
    acc, title=f"{ORACLE_RUN.name}: accuracy per format (95 % CI over items)"
).properties(width=380, height=420)

# %% [markdown]
# Formats are coordinates along the `template` dim, so a dimension slices the run: the oracle's accuracy by the first dimension its formats vary (in cloze form the options name, enumeration and label directive do not show, so a cloze run has none of those coordinates).

# %%
free = [d.name for d in DIMENSIONS if d.name in acc and acc[d.name].nunique() > 1]
by = free[0] if free else "template"  # a run whose formats vary in no dimension: per format
acc.groupby(["model", by])["accuracy"].agg(["mean", "count"]).unstack(by)

# %% [markdown]
# **The contrast: letters.** The same grammar's formats with letter answers, on the 150-item ARC-Challenge run: each model's spread and verdict, and, per format, whether its accuracy CI contains chance (`chance_level`: the mean over items of one over the number of options a prompt lists; ARC-Challenge's items list four).

# %%
letter_spread = spread_verdicts(LETTER_RUN, letters)
letter_acc = accuracy_table(letters, n_boot=N_BOOT).assign(run=LETTER_RUN.name)
for path, run, table in ((ORACLE_RUN, oracle, acc), (LETTER_RUN, letters, letter_acc)):
    chance = chance_level(run)
    for model, t in table.groupby("model", sort=False):
        at = int(((t["lo"] <= chance) & (t["hi"] >= chance)).sum())
        print(
            f"{path.name}, {model}: accuracy {t['accuracy'].min():.2f}–{t['accuracy'].max():.2f} "
            f"over {len(t)} formats; {at} of {len(t)} formats' 95 % CIs contain chance "
            f"{chance:.2f}"
        )
COLUMNS = ["run", "answers", "model", "n_items", "n_templates", "best_accuracy"]
COLUMNS += ["worst_accuracy", "spread", "lo", "hi", "null_spread", "p_value", "within_noise"]
pd.concat([spread, letter_spread], ignore_index=True)[COLUMNS]

# %% [markdown]
# ## 3 · Budgeted best/worst search, replayed on the cloze oracle
#
# Replaying the stored per-item correctness as the answer of a model call, a search gets 30 % of the calls of evaluating every format on every item and answers the best and the worst format with the posterior probability that each is so. `paired_search` (psens's default) shows every format the items in one common random order, compares formats on the items both have seen with an exact finite-pool posterior, drops formats that are clearly not the best (worst) and evaluates close contenders on the whole pool, where their accuracy is exact; `thompson_search` is FormatSpread's kind of search (independent Beta posteriors, Thompson sampling). A seed "finds" the best (worst) when its answer has the highest (lowest) accuracy over all items — a format tied with the true extreme counts as found.
#
# What a user of the search reads is the spread it reports: the full-data accuracy of the format it returns as best minus that of the one it returns as worst. Per seed, `hit_rates` gives its share of the true spread (`spread_ratios`); psens's bench target (`make bench`, `scripts/bench_formats.py`) is the share at or above `spread_share` (printed below) in at least 9 of 10 seeds, on the cloze oracle, with at most 30 % of the calls. `PSENS_SIZE=full` replays the bench's 10 seeds; smaller sizes replay fewer and say so. The letter run below is context, not a target: its formats tie (section 2), so its "best" and "worst" are noise.


# %%
def replay(path: Path, run) -> tuple[list[dict], list[dict]]:
    """Per model and search: ``hit_rates`` at 30 % of the calls (summary rows) and the
    reported spread of each seed (per-seed rows)."""
    rows, seeds = [], []
    for model, x in correctness(run).items():
        for name, search in (("paired", paired_search), ("Thompson", thompson_search)):
            h = hit_rates(x, fraction=0.3, seeds=SEEDS, search=search)
            share = np.asarray(h["spread_ratios"], dtype=float)
            where = {"run": path.name, "answers": run_settings(run).answer, "model": model}
            rows.append(
                {
                    **where,
                    "search": name,
                    "items": len(x),
                    "calls": f"≤ {h['budget']} of {h['all_calls']}",
                    "best found": f"{h['best_hits']}/{h['seeds']}",
                    "worst found": f"{h['worst_hits']}/{h['seeds']}",
                    "true spread": h["true_spread"],
                    "share ≥ target": f"{h['spread_hits']}/{h['seeds']}",
                    "smallest share": np.nanmin(share) if np.isfinite(share).any() else np.nan,
                    "mean P(best)": h["p_best"],
                    "mean P(worst)": h["p_worst"],
                    "tied best": h["n_best_ties"],
                    "tied worst": h["n_worst_ties"],
                    "_h": h,
                }
            )
            seeds += [
                {
                    **where,
                    "search": name,
                    "seed": seed,
                    # the full-data accuracy of the returned best minus the returned worst
                    "reported spread": r * h["true_spread"],
                    "true spread": h["true_spread"],
                    "share": r,
                    "meets target": bool(r >= h["spread_share"] - 1e-12),
                }
                for seed, r in enumerate(share)
            ]
    return rows, seeds


search_rows, seed_rows = replay(ORACLE_RUN, oracle)
for row in search_rows:
    h = row["_h"]
    judged = (
        f"target {'met' if h['spread_hits'] >= 9 else 'missed'} (9 of 10 seeds)"
        if h["seeds"] == 10
        else "the target is judged over 10 seeds (PSENS_SIZE=full)"
    )
    print(
        f"{row['run']}, {row['model']}, {row['search']} search: reported spread ≥ "
        f"{100 * h['spread_share']:.0f} % of the true spread ({h['true_spread']:.3f}) in "
        f"{h['spread_hits']} of {h['seeds']} seeds with ≤ 30 % of the calls; {judged}"
    )
per_seed = pd.DataFrame(seed_rows)
per_seed

# %% [markdown]
# The summary per model and search, the letter run beside the oracle as context (its spreads are within noise: no target applies):

# %%
letter_rows, _ = replay(LETTER_RUN, letters)
pd.DataFrame(search_rows + letter_rows).drop(columns="_h")

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
for path, run, table in ((ORACLE_RUN, oracle, spread), (LETTER_RUN, letters, letter_spread)):
    by_model = table.set_index("model")
    for model, x in correctness(run).items():
        right = np.sort(np.asarray(x).sum(axis=0))  # items answered right, per format
        row = by_model.loc[model]
        print(
            f"{path.name}, {model}: {x.shape[0]} items x {x.shape[1]} formats; spread "
            f"{row.spread:.3f} (formats that do not matter: {row.null_spread:.3f}, "
            f"p = {row.p_value:.3g}): {verdict(row)}; best format {right[-1]:.0f} items right, "
            f"{right[-1] - right[-2]:.0f} more than the next; worst {right[0]:.0f}, "
            f"{right[1] - right[0]:.0f} fewer than the next"
        )

# %% [markdown]
# **Reading.** The cell above prints each run's figures. On the shipped cloze oracle (SmolLM2-135M-Instruct, 570 ARC-Easy items, 16 cloze formats) the accuracy spread over the formats is above the spread of formats that do not matter: the formats differ measurably, and section 3 measures how much of that spread a search with 30 % of the calls reports (the bench target and how many seeds meet it are printed there). On the letter run, 150 items, the two models' accuracy spreads over the 16 formats are inside the spread of formats that do not matter (`within_noise`): these small models answer letters near the 4-option chance of 0.25 (section 2 prints how many formats' CIs contain it) and show no measurable format sensitivity in accuracy, so that pool's "best" and "worst" format are only a few items ahead of the next (the cell above prints how many) and no search finds them reliably from 30 % of the calls — the search's low posterior probabilities say as much. Sections 4–5 rest on 6 items of the letter formats: CIs are wide, and cells flagged `within_noise` are not findings. The grammar, the search and the per-dimension table are the tools; larger models, or more items (`samples`) in `templates = {grammar = "default", k = 16, seed = 0}`, give figures worth reading.

# %% [markdown]
# ## 6 · Real models: Mind Your Format's published accuracies
#
# The runs above are small models: near chance with letters, above it in cloze. Voronov, Wolf and Ryabinin ("Mind Your Format: Towards Consistent Evaluation of In-Context Learning Improvements", Findings of ACL 2024) published the accuracies of 20 models from 1B to 70B parameters (LLaMA, Llama 2, Falcon, OPT, Pythia, BLOOM, GPT-J, GPT-NeoX) on SST-2, DBpedia, AG News and TREC, each under templates with four format dimensions: the input verbalizer (`"text: {}"`, …), the output verbalizer (`"label: {}"`, `"It was {}."`, …), the separator between input and output (`sep`) and the one between demonstrations (`big_sep`). psens ships their table (`data/reference/mind-your-format/`, Apache-2.0; provenance in `data/reference/README.md`) and `psens.formats.mind_your_format(dataset)` reads it as a format-space Dataset: models × evaluation runs (demonstration seed, selection method, prediction method, shots) along `sample` × 30 templates, the dimensions as `fmt_*` coordinates of `template` — so the analyses of sections 2 and 4 apply unchanged, with runs where a psens run has items (the paper publishes accuracies, not per-item answers).
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
dimension_accuracy(letters, n_boot=N_BOOT)

# %% [markdown]
# **Reading (psens's analysis of the published accuracies).** Formats matter for these real models: on 77 of the 80 model–dataset pairs the accuracy spread over the 30 templates is above the spread of formats that do not matter (the three exceptions are on TREC); the median spread is 0.33–0.36 on SST-2, DBpedia and AG News and 0.15 on TREC. Over the eight runs that compare all four dimensions, the separator between demonstrations (`big_sep`) has the largest mean accuracy change on all four datasets (0.06–0.13 per change), but it is not a clear winner: it leads in fewer than 90 % of the resamples and its CI overlaps the next dimension's on every dataset (on SST-2 the input–output separator ties it). The input verbalizer moves accuracy least on all four (0.04–0.05 per change, never the largest in any resample); on SST-2, DBpedia and AG News its CI lies below every other dimension's. Which dimension leads depends on the runs: averaged over every run that scored its pairs (three demonstration seeds), the output verbalizer has the largest mean change on AG News and DBpedia, and ties the demonstration separator on TREC. Per model the leader varies as well: on no dataset does one dimension lead on more than half of the 20 models. Caveats: each dimension rests on few template pairs (the input–output separator on one or two), and the CIs cover runs, not the choice of templates. The offline models' flip shares are of another kind (items, not runs) and rest on one to four pairs per dimension near chance accuracy: they do not rank dimensions reliably.
