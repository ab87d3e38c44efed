# %% [markdown]
# # 07 · Altering tokens vs adding tokens (IPS paper appendix G)
#
# The five templates of fig. 15 differ from template 1 by *altering* tokens (case: `Answers` → `ANSWERS`; option markers `A.` → `A)`) or *adding* tokens (`:` → `::`). Appendix G splits IPS by the kind of change between the two templates of a pair and finds an architectural divide: **dense models are more sensitive to adding tokens** (9 of 10, table 4), **MoE models to altering tokens** (5 of 6, table 5).

# %% [markdown]
# ## Parameters
#
# Without `PSENS_RUN` the notebook builds a **synthetic run** (`psens.synthetic.paper_run`): real model names and metadata from `data/models.csv`, but toy interactions whose instability follows the directions the paper reports (instruct < base, larger < smaller, dense < MoE, fewer shots → more sensitive). The numbers are illustrative only; point `PSENS_RUN` at a stored run (`psens run …`) to analyse real models. `PSENS_SIZE=full` uses all 50 paper models. The synthetic run has no built-in difference between the kinds, so the differences below are noise — which the p-values should show.

# %% tags=["parameters"]
import os

# Parameters (papermill can override them; CI sets the environment variables)
PSENS_RUN = os.environ.get("PSENS_RUN", "")  # path of a stored run; empty -> synthetic run
PSENS_SIZE = os.environ.get("PSENS_SIZE", "tiny")  # "tiny" (seconds) or "full"


# %%
import altair as alt
import pandas as pd

import psens.ips.factors as F
from psens.ips.factors import charts as plots
from psens.synthetic import TINY_MODELS

try:  # interactive, offline charts in Jupyter; harmless when run headless
    alt.renderers.enable("jupyter", offline=True)
except Exception as exc:  # e.g. anywidget missing: keep altair's default renderer
    print(f"altair jupyter renderer unavailable ({exc}); using the default renderer")
pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)

TINY = PSENS_SIZE != "full"
N_BOOT, N_PERM = (200, 500) if TINY else (1000, 2000)
if PSENS_RUN:
    from psens.store import open_run

    ds = F.attach_metadata(open_run(PSENS_RUN))  # fills empty model metadata from models.csv
else:
    names = TINY_MODELS if TINY else None  # None = all 50 paper models
    ds = F.paper_run(names, n_samples=12 if TINY else 60, shots=(0, 1, 2, 3))
print(dict(ds.sizes))

# %% [markdown]
# ## The kind of every template pair
#
# From the registered templates (`psens.prompts.pair_perturbation`), or else from the run's `perturbation` coordinate. Pairs that both alter and add tokens are left out of the comparison.

# %%
F.pair_kinds(ds).to_frame()

# %% [markdown]
# ## IPS per kind, per model
#
# IPS restricted to the altering pairs and to the adding pairs, with bootstrap CIs; `difference` = adding − altering (the paper's column) with a paired sign-flip `p_value` over samples. The paper's models for tables 4/5 are used when present.

# %%
paper = [m for ms in F.pairings.PERTURBATION_MODELS.values() for m in ms]
present = [m for m in paper if m in set(ds.model.values)]
sub = F.select_models(ds, names=present) if len(present) >= 2 else ds
kinds = F.ips_by_perturbation(sub, n_boot=N_BOOT, n_perm=N_PERM)
kinds[["model", "arch", "ips_altering", "ips_adding", "difference", "p_value", "more_sensitive_to"]]

# %% [markdown]
# ## Tables 4 and 5 layout
#
# One table per architecture, and how many models are more sensitive to each kind (paper: dense 9/10 adding, MoE 5/6 altering).

# %%
from IPython.display import display

tables = F.perturbation_tables(kinds)
for arch, t in tables.items():
    print(arch, t.attrs["more_sensitive"])
    display(t)

# %%
plots.perturbation_chart(kinds)
