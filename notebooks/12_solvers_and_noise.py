# %% [markdown]
# # 12 · How much of IPS is the model? Solvers and numerical noise
#
# IPS is computed from the AND-OR split of eq. 12 of the IPS paper (Qin et al., ICML 2026). That split is an L1 problem with **many optimal solutions**, and IPS depends on which one a solver returns; it also moves with rounding noise in the scored log-odds $v$. Before reading a model's IPS, this notebook measures both on one run:
#
# 1. IPS under several solvers — `canonical` (the least-norm optimum, psens's default), `exact` (an optimal vertex), `sgd` and the paper's own procedure (`sgd`, `preset="paper"`) — and under random optimal vertices (equally optimal splits);
# 2. the **noise floor**: the IPS between $v$ and $v$ plus noise of the size half-precision scoring causes, and whether template IPS exceeds it;
# 3. whether two claims of the paper hold on this run under each solver.
#
# **The paper reports** that low-order interactions are the least sensitive and high-order ones the most (fig. 9), and that few-shot prompting lowers IPS (fig. 8). The cells below compute what **this run** shows; a synthetic run (no model is called) illustrates the method only, and its charts say so.
#
# **How to run.** `PSENS_RUN=path` analyses a stored run (a `.zarr` store, e.g. `runs/demo.zarr` after `make demo`, or a `.nc` export); without it the shipped real run `data/runs/arc.nc` when the checkout has it, else (or with `PSENS_SIZE=tiny`) a small synthetic run built in seconds. Every decomposition is redone with each solver, so at the default size the notebook looks at the first two models, four samples and the first and last shot setting of the run (it prints what it kept); `PSENS_SIZE=full` uses the whole run, with more random vertices and noise draws.

# %% tags=["parameters"]
import os

# A stored run: a .zarr store or a .nc export. Empty: the shipped run data/runs/arc.nc when
# the checkout has it, else a synthetic run.
PSENS_RUN = os.environ.get("PSENS_RUN", "")
# "": a slice of the run (the shipped one, or a synthetic run when it is absent); "tiny": a
# synthetic run; "full": the whole run, more random vertices and noise draws.
PSENS_SIZE = os.environ.get("PSENS_SIZE", "")

# %%
import altair as alt
import pandas as pd

import psens.widgets as pw
from psens import run_settings
from psens.ips import sample_ips, solver_sensitivity, solver_table
from psens.ips.floor import PRECISION_SIGMA, floor_test, floor_test_line, run_floor
from psens.ips.headline import headline
from psens.store.labels import model_names

TINY = PSENS_SIZE != "full"
ds = pw.load_run(
    PSENS_RUN,
    "" if PSENS_SIZE == "full" else PSENS_SIZE,
    tiny=dict(n_samples=6, n_vars=(4, 5), shots=[0, 1], seed=0),
)
SOURCE = PSENS_RUN or ("a synthetic run" if ds.attrs.get("synthetic") else str(pw.SHIPPED_RUN.name))
print(pw.describe(ds))
if TINY:  # every game is decomposed again per solver: look at a slice
    keep = dict(model=slice(0, 2), sample=slice(0, 8))
    if "shot" in ds.dims and ds.sizes["shot"] > 2:
        keep["shot"] = [0, ds.sizes["shot"] - 1]
    ds = ds.isel(keep)
    print("this notebook looks at a slice of it (PSENS_SIZE=full: all):", pw.describe(ds))
N_VERTICES, DRAWS = (2, 2) if TINY else (4, 8)

# %% [markdown]
# ## 1 · IPS under each solver
#
# `solver_sensitivity` decomposes every sample's games again with each solver (and `N_VERTICES` random optimal vertices: the optimal point minimising a random linear function), then computes IPS per sample for all orders and the bands of §4.3. `max_excess` is how far a solver's objective lies above the LP optimum (0 for the optimal ones); the `spread` rows are the per-sample max − min over solvers.

# %%
sens = solver_sensitivity(ds, n_vertices=N_VERTICES, tau=run_settings(ds).tau)
table = solver_table(sens)
table.round(3)

# %%
ips_first = sens["ips"]  # the first shot setting, as the headline: shots are never pooled
SHOT = "one shot setting"
if "shot" in ips_first.dims:
    SHOT = f"{int(ips_first['shot'].values[0])}-shot"
    ips_first = ips_first.isel(shot=0)
pooled = ", ".join(d for d in ips_first.dims if d not in ("model", "solver", "order"))
long = ips_first.mean(pooled.split(", "), skipna=True).to_dataframe().reset_index()
title = f"IPS by model, solver and order, {SHOT} (mean over {pooled}) — {SOURCE}"
chart = (
    alt.Chart(long, title=title)
    .mark_bar()
    .encode(
        x=alt.X("solver:N", sort=list(sens["solver"].values)),
        y=alt.Y("ips:Q", title="mean IPS"),
        color="solver:N",
        column=alt.Column("order:N", sort=["all", "low", "mid", "high"]),
        row=alt.Row("model:N"),
        tooltip=["model", "solver", "order", alt.Tooltip("ips:Q", format=".3f")],
    )
    .properties(width=150, height=160)
)
pw.label_synthetic(chart, ds)

# %% [markdown]
# ## 2 · The noise floor
#
# `run_floor` decomposes each game and the same game plus Gaussian noise of σ (the measured mean change of $v$ when scoring in float16 or bfloat16, `PRECISION_SIGMA`), and computes IPS between the two as if they were two templates. `floor_test` then asks, per model and order band, whether template IPS exceeds that floor (paired sign-flip permutation test over samples, bootstrap CI of the difference, effect size $d_z$), at the first shot setting. A run made with `noise_floor = "bfloat16"` (such as the shipped run) also has the *measured* floor: every masked prompt scored again with the model in bfloat16, and the IPS between the two scorings; its row is the headline's (`headline(ds)`, the numbers `psens summary` prints). Every row gets the one rule of the headline (`psens.ips.floor.exceeds_floor`): above the floor when the lower end of the CI of IPS − floor is above 0 *and* the sign-flip test rejects, with the headline's resamples (1000 bootstrap, 2000 sign flips, seed 0), so the measured row's p is the one `psens summary` prints.

# %%
head = headline(ds)  # the first shot setting: psens summary's numbers and its floor test
n_boot = 1000  # the headline's default: 1000 bootstrap resamples, 2 × 1000 sign flips
per_sample = sample_ips(ds, run_settings(ds).tau, orders=("all", "low", "mid", "high"))
if "shot" in per_sample.dims:
    per_sample = per_sample.isel(shot=0)
rows = []
for name, sigma in PRECISION_SIGMA.items():
    floor = run_floor(ds, sigma, draws=DRAWS)
    if "shot" in floor.dims:
        floor = floor.isel(shot=0)
    test = floor_test(per_sample, floor, n_boot=n_boot, n_perm=2 * n_boot)
    rows.append(test.assign(noise=f"simulated {name} (σ = {sigma})"))
if head["floor_kind"].eq("measured").all():  # the run scored every prompt in half precision
    cols = ["model", "order", "ips", "floor", "diff", "diff_lo", "diff_hi", "effect_size"]
    measured = head[[*cols, "p_value", "exceeds", "n_paired"]].rename(columns={"n_paired": "n"})
    rows.append(measured.assign(noise=f"measured ({head.attrs['floor']}; the headline)"))
floors = pd.concat(rows, ignore_index=True)
print(f"IPS of {head.attrs['pools']}:")
for row in floors[floors["order"] == "all"].itertuples():
    if row.exceeds:  # the headline's rule: CI lower end above 0 and p < 0.05
        verdict = "above the floor"
    elif row.diff > 0:  # a sign-flip test over n samples cannot give p below 2 / 2**n
        verdict = (
            "not above the floor: the CI of IPS − floor reaches 0 or p ≥ 0.05 (with "
            f"n = {row.n} samples the smallest possible p is {2 / 2**row.n:.3f})"
        )
    else:
        verdict = "NOT above the floor: this IPS is within numerical noise"
    print(
        f"{row.model}, floor {row.noise}: IPS {row.ips:.3f} vs floor {row.floor:.3f} → "
        f"{verdict} ({floor_test_line(row._asdict())})"
    )
floors.round(3)

# %% [markdown]
# ## 3 · Do the paper's claims hold on this run, under each solver?
#
# Computed below per model, whichever way it comes out: "low-order interactions are the least sensitive" holds for a solver when the model's mean low-order IPS is below both its mid- and high-order IPS. Under each solver the cell also prints the model's IPS at each shot setting (all template pairs, as the headline); the few-shot verdict itself (only for runs with a `shot` dim) is the one of notebook 05, `psens.ips.claims.few_shot_claim` on the run's stored split: templates 1 and 4, ΔIPS with its CI and p, and the answer confound. A model that is not a finding (`psens.ips.verdicts.findings`: below its noise floor, answering one letter, at chance, or copying the few-shot examples' letter) gets its numbers but no verdict; models are never averaged together.

# %%
from psens.ips.verdicts import findings_models

shots_here = [int(s) for s in ds["shot"].values] if "shot" in ds.dims else None
why = findings_models(ds, shots_here)  # the one rule, at the shots this section uses
print("verdicts use the models that are findings at", pw.shots_text(shots_here))
means = sens["ips"].mean(
    [d for d in sens["ips"].dims if d not in ("model", "solver", "order", "shot")]
)
lines, verdicts = [], {}
for model in model_names(means):
    reason = why.get(str(model), "")
    lines.append(f"{model}" + (f" — not a finding ({reason}): no verdict" if reason else ""))
    for solver in means["solver"].values:
        m = means.sel(model=model, solver=solver)
        at0 = m.isel(shot=0) if "shot" in m.dims else m
        low, mid, high = (float(at0.sel(order=o)) for o in ("low", "mid", "high"))
        holds = low < mid and low < high
        text = f"  {solver}: low {low:.3f}, mid {mid:.3f}, high {high:.3f}"
        if not reason:
            text += f" → low-order least sensitive: {'holds' if holds else 'does not hold'}"
            verdicts[(str(model), str(solver))] = holds
        lines.append(text)
        if "shot" in m.dims and m.sizes["shot"] > 1:
            by_shot = ", ".join(
                f"{int(k)}-shot {float(m.sel(order='all', shot=k)):.3f}" for k in m["shot"].values
            )
            lines.append(f"    IPS (all template pairs) {by_shot}")
print(f"{SOURCE}:\n" + "\n".join(lines))
if "shot" in ds.dims and ds.sizes["shot"] > 1 and 0 in ds["shot"].values:
    from psens.ips.claims import few_shot_claim

    claim = few_shot_claim(ds, reasons=why)  # the one few-shot verdict (notebook 05's)
    print(f"\nFew-shot, the run's stored {run_settings(ds).solver} split (few_shot_claim):")
    print("\n".join(pw.few_shot_verdicts(claim, ds)))
for model in model_names(means):
    v = {s: h for (m, s), h in verdicts.items() if m == str(model)}
    if not v:
        continue
    print(
        f"{model}: the solvers agree on the order claim."
        if len(set(v.values())) == 1
        else f"{model}: the verdict on the order claim depends on the solver: "
        + ", ".join(f"{k} {'holds' if h else 'fails'}" for k, h in v.items())
    )
if not verdicts:
    print("no model of this slice is a finding: no verdict on the paper's claims here")
