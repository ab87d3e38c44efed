# %% [markdown]
# # 07 · Altering tokens vs adding tokens (IPS paper appendix G)
#
# The five templates of fig. 15 differ from template 1 by *altering* tokens (case: `Answers` → `ANSWERS`; option markers `A.` → `A)`) or *adding* tokens (`:` → `::`). Appendix G splits IPS by the kind of change between the two templates of a pair and **the paper reports** an architectural divide: dense models are more sensitive to adding tokens (9 of 10, table 4), MoE models to altering tokens (5 of 6, table 5). The cells below compute the same split on the run at hand.

# %% [markdown]
# ## Parameters
#
# `PSENS_RUN` opens a stored run (`.zarr` or `.nc`); without it the shipped real run `data/runs/arc.nc` when the checkout has it. Otherwise — or with `PSENS_SIZE=tiny` — a **synthetic run** over ten of the paper's model names with toy interactions (every table and chart of it says "synthetic data"). The synthetic run has no built-in difference between the kinds, so its differences are noise — which the p-values should show.

# %% tags=["parameters"]
import os

# Parameters (papermill can override them; CI sets the environment variables)
PSENS_RUN = os.environ.get("PSENS_RUN", "")  # a .zarr/.nc run; empty: shipped run or synthetic
PSENS_SIZE = os.environ.get("PSENS_SIZE", "")  # "": shipped run, else "tiny"; or "full"


# %%
import pandas as pd

import psens.ips.factors as F
import psens.widgets as pw
from psens.ips.factors import charts as plots
from psens.store.labels import model_names
from psens.synthetic import TINY_MODELS

pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)

N_BOOT, N_PERM = (200, 500) if PSENS_SIZE != "full" else (1000, 2000)
TINY = dict(models=F.paper_models(TINY_MODELS), n_samples=12, seed=0)
FULL = pw.paper_config("table1")  # data/examples/paper_table1.toml
ds = F.attach_metadata(pw.load_run(PSENS_RUN, PSENS_SIZE, tiny=TINY, full=FULL))
SHOTS = [int(ds["shot"].values[0])] if "shot" in ds.dims else None  # the kinds at 0 shots
# The verdicts use only the models whose IPS is a finding at the shot setting they use (the
# one rule, psens.ips.verdicts.findings_models)
fds, note = pw.findings_run(ds, shots=SHOTS)
if SHOTS:
    ds, fds = ds.sel(shot=SHOTS[0]), fds.sel(shot=SHOTS[0])
print(pw.describe(ds))
print("verdicts use the models that are findings at", pw.shots_text(SHOTS))
print(note or "every model is a finding: all enter the verdicts")

# %% [markdown]
# ## The kind of every template pair
#
# From the registered templates (`psens.prompts.pair_perturbation`), or else from the run's `perturbation` coordinate. Pairs that both alter and add tokens are left out of the comparison.

# %%
kinds_of_pairs = F.pair_kinds(ds).to_frame()
kinds_of_pairs

# %% [markdown]
# ## IPS per kind, per model
#
# IPS restricted to the altering pairs and to the adding pairs, with bootstrap CIs; `difference` = adding − altering (the paper's column) with a paired sign-flip `p_value` over samples. The paper's models for tables 4/5 are used when at least two are present, else every model of the run.

# %%
paper = [m for ms in F.pairings.PERTURBATION_MODELS.values() for m in ms]
present = [m for m in paper if m in set(model_names(fds))]
sub = F.select_models(fds, names=present) if len(present) >= 2 else fds
kinds = None
try:
    kinds = F.ips_by_perturbation(sub, n_boot=N_BOOT, n_perm=N_PERM)
except ValueError as exc:  # e.g. no altering or no adding pair among the run's templates
    print(f"not on this run — {exc}")
cols = ["model", "arch", "ips_altering", "ips_adding", "difference", "p_value", "more_sensitive_to"]
pw.show(kinds[cols], ds) if kinds is not None else None

# %% [markdown]
# ## Tables 4 and 5 layout
#
# One table per architecture, how many models are more sensitive to each kind, and the paper's claim for each architecture the run has.

# %%
from IPython.display import display

CLAIM = {"dense": ("adding", "9 of 10", "table 4"), "moe": ("altering", "5 of 6", "table 5")}
if kinds is not None:
    for arch, t in F.perturbation_tables(kinds).items():
        counts = t.attrs["more_sensitive"]
        n = sum(counts.values())
        print(f"{arch or 'models without architecture metadata'}: {counts}")
        if arch in CLAIM:
            kind, paper_count, where = CLAIM[arch]
            k = int(counts.get(kind, 0))
            print(
                pw.paper_vs_run(
                    f"that {arch} models are more sensitive to {kind} tokens ({paper_count}, "
                    f"{where})",
                    f"{k} of {n} {arch} model(s) are more sensitive to {kind} tokens",
                    k > n / 2,
                    fds,
                )
            )
        display(pw.show(t, ds))
    if "moe" not in set(kinds["arch"].astype(str)):
        print("this run has no MoE model: table 5 (MoE models) cannot be checked")
    if "dense" not in set(kinds["arch"].astype(str)):
        print("this run has no dense model: table 4 (dense models) cannot be checked")

# %%
plots.perturbation_chart(kinds) if kinds is not None else None
