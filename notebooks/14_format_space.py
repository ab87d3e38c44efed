# %% [markdown]
# # 14 · Format spaces: accuracy spread, a budgeted best/worst search, sensitivity by format dimension
#
# FormatSpread (Sclar et al., "Quantifying Language Models' Sensitivity to Spurious Features in Prompt Design", ICLR 2024) samples prompt *formats* from a grammar — field names and their casing, separators, spacing, option enumeration — and reports the spread of a model's accuracy over them (the paper reports spreads of up to 76 accuracy points for LLaMA-2-13B; the paper's claim, not measured here), finding the best and worst format within a call budget by Thompson sampling. psens has its own grammar (`psens.formats`): a format is a point with named coordinates that renders through the same template path as the IPS paper's five templates (which are points of it, as is the EAS 2^3 design), so every psens method accepts it. This notebook adds what the interactions explain: for each *kind* of format change, how much it moves the low-, mid- and high-order interactions (IPS, Qin et al., ICML 2026).
#
# **How to run.** Top to bottom; it opens the shipped format-space run `data/runs/formats.nc` (SmolLM2-135M-Instruct and Gemma-3-270M on 6 ARC-Challenge items, 16 formats, n = 3 words; `scripts/shipped_run.py --only formats` recomputes it) or the run named by `PSENS_RUN`. Nothing calls a model. `PSENS_SIZE` only sets how many bootstrap and permutation draws are made (`tiny`: a few hundred).

# %% tags=["parameters"]
import os

# A stored format-space run (a zarr store or its netCDF export); empty: the shipped one.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "tiny" (default): few resamples, seconds; "full": 2,000 resamples and 20 search seeds.
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
)
from psens.formats.charts import accuracy_chart, dimension_chart
from psens.formats.search import thompson_search

pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)
ROOT = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()
N_BOOT = 300 if PSENS_SIZE != "full" else 2000
SEEDS = 10 if PSENS_SIZE != "full" else 20

# %% [markdown]
# ## 1 · The grammar
#
# Every dimension, its values, and what it changes. A format has one value per dimension; the `default` grammar frees the first ten (the role line and the format directive stay off: they belong to the `eas` grammar). Its id (`fmt-` + one character per dimension) is stable, and `psens.prompts.get_template` builds the template from it.

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
# ## 2 · The run: accuracy per format and its spread
#
# Accuracy is the share of items whose choice among the option tokens is the answer. The spread is max − min over the run's formats, with a percentile-bootstrap CI over items; the permutation column is the spread when formats do not matter (each item's correctness shuffled across formats): a spread not above it (`within_noise`) is not a finding. With 6 items the CIs are wide: this run shows the method, not a measurement of these models.

# %%
RUN = PSENS_RUN or ROOT / "data" / "runs" / "formats.nc"
ds = psens.open_run(RUN).load()
print(
    f"{RUN}: {ds.sizes['model']} models x {ds.sizes['sample']} items x "
    f"{ds.sizes['template']} formats"
)
spread = accuracy_spread(ds, n_boot=N_BOOT, n_perm=N_BOOT)
spread

# %%
acc = accuracy_table(ds, n_boot=N_BOOT)
accuracy_chart(acc).properties(width=380, height=420)

# %% [markdown]
# Formats are coordinates along the `template` dim, so a dimension slices the run: e.g. accuracy by option enumeration.

# %%
acc.groupby(["model", "enum"])["accuracy"].mean().unstack("enum")

# %% [markdown]
# ## 3 · Budgeted best/worst search (Thompson sampling)
#
# Replaying the stored per-item correctness as the answer of a model call, the search gets 30 % of the calls of evaluating every format on every item and answers the best and worst format and the posterior probability that each is so. A seed "finds" the best (worst) when its answer has the highest (lowest) accuracy over all items; ties count. `make bench` reports the same figure.

# %%
rows = []
for model, x in correctness(ds).items():
    true = x.mean(axis=0)
    budget = int(0.3 * x.size)
    res = [thompson_search(x, budget, seed=s) for s in range(SEEDS)]
    rows.append(
        {
            "model": model,
            "calls": f"{budget} of {x.size}",
            "best found": np.mean([true[r.best] == true.max() for r in res]),
            "worst found": np.mean([true[r.worst] == true.min() for r in res]),
            "mean P(best)": np.mean([r.p_best for r in res]),
            "mean P(worst)": np.mean([r.p_worst for r in res]),
            "formats tied best": int((true == true.max()).sum()),
            "formats tied worst": int((true == true.min()).sum()),
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
model = str(ds.model.values[0])
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

# %% [markdown]
# **Reading.** Everything above is measured on 6 items: CIs are wide, and cells flagged `within_noise` are not findings. The grammar, the search and the per-dimension table are the tools; a run with more items (`samples`) and formats (`k`) in `templates = {grammar = "default", k = 16, seed = 0}` gives figures worth reading.
