"""A stored DBSA run: several real generators sampled under the method's perturbations.

``run(config)`` runs :func:`psens.dbsa.dbsa` (algorithm 1 of Rauba, Wei and van der Schaar)
for every prompt of a prompt file and every local model: each tested word is swapped with
its ``k`` dictionary neighbours, the model is sampled ``n`` times on the original and ``m``
times on every perturbed prompt (:func:`psens.dbsa.hf_sampler`, temperature 1 on the full
softmax), the answers are embedded with MiniLM (all-MiniLM-L6-v2), and every (position,
neighbour) pair gets its energy distance and permutation p-value, every word its effect size
and a joint permutation p-value. The results are written as one netCDF file with a group per
prompt and model (``/<prompt>/<model>``); :func:`results` gives them back as the
``{prompt: {model: Dataset}}`` mapping every function of :mod:`psens.dbsa` and the
``DBSAHighlights`` widget take, so every analysis and ablation reruns without a model.

Its config (TOML, ``method = "dbsa"``) names the ``models`` and the ``prompts`` file; every
key is a row of :data:`psens.config_schema.FIELDS` (docs/runs.md).

Words without a dictionary entry (function words, punctuation) are not tested.

References
----------
.. [1] Rauba et al., AISTATS 2025; the full reference is in :mod:`psens.dbsa`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from psens._runfile import MethodConfig, MethodRun, check_models, method_attrs, say, start, steps
from psens._validation import fail
from psens.config_schema import check_fields, declare

__all__ = ["METHOD", "RUN", "DBSAConfig", "read_prompts", "results", "run", "summarize"]

METHOD = "dbsa"
WHERE = "psens dbsa run"


def read_prompts(path: str | Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """``(texts, neighbours)`` of a prompt file, refusing a file of another shape."""
    where = "psens.dbsa.run.read_prompts"
    p = Path(path)
    if not p.is_file():
        fail(where, f"prompt file {p} not found", "Check the path of 'prompts'")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        fail(where, f"{p} is not valid JSON ({exc})", "Fix the file")
    texts, nb = (raw.get("texts"), raw.get("neighbours")) if isinstance(raw, dict) else (None, None)
    if (
        not isinstance(texts, dict)
        or not texts
        or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in texts.items()
        )
    ):
        fail(where, f"{p} has no 'texts' table of name -> text", 'Write {"texts": {"name": "..."}}')
    if not isinstance(nb, dict) or not all(
        isinstance(v, list) and all(isinstance(w, str) for w in v) for v in nb.values()
    ):
        fail(
            where,
            f"{p} has no 'neighbours' table of word -> list of words",
            'Write {"neighbours": {"word": ["other", "words"]}}',
        )
    bad = [name for name in texts if "/" in name or name.startswith(".")]
    if bad:
        fail(
            where, f"text names {bad} cannot name a group", "Use names without '/' or a leading '.'"
        )
    return texts, nb


@declare(METHOD)
class DBSAConfig(MethodConfig):
    """A DBSA run's configuration: the ``"dbsa"`` rows of :data:`psens.config_schema.FIELDS`
    (docs/runs.md lists them)."""

    def check(self) -> None:
        """Cheap checks (the prompt file is read, no model is loaded)."""
        check_fields(self, METHOD, WHERE)
        check_models(list(self.models), WHERE)
        bad = [m for m in self.models if "/" in m and not Path(m).exists()]
        if bad:
            fail(WHERE, f"model names {bad} hold '/'", "Use packaged or table names")
        texts, _ = read_prompts(self.prompts)
        if self.texts is not None:
            unknown = [t for t in self.texts if t not in texts]
            if not self.texts or unknown:
                fail(
                    WHERE,
                    f"texts = {self.texts!r} names unknown texts {unknown}",
                    f"Use some of {list(texts)}",
                )

    @property
    def text_names(self) -> list[str]:
        """The texts to run, in file order."""
        texts, _ = read_prompts(self.prompts)
        return [t for t in texts if self.texts is None or t in self.texts]


def _backend(model: str, cfg: DBSAConfig):
    """The sampling backend of a local model (:func:`psens.dbsa.hf_sampler`)."""
    import psens.models
    from psens import dbsa as D

    lm = psens.models.load(model)
    return D.hf_sampler(lm.model, lm.tokenizer, batch_size=cfg.batch_size)


def _embedder():
    """The answer embedder: the offline all-MiniLM-L6-v2."""
    from psens import dbsa as D

    return D.load_embedder()


def run(
    cfg: DBSAConfig,
    out: str | Path | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
):
    """Sample, embed and test every (text, model) of ``cfg``; write the DataTree to ``out``
    (default ``cfg.store``; an existing file only with ``overwrite`` and when it is a psens
    run file) and return it. Progress goes to stderr."""
    import xarray as xr

    from psens import dbsa as D
    from psens.store import write_method_run

    path = start(cfg, out, overwrite=overwrite)
    texts, neighbours = read_prompts(cfg.prompts)
    embedder = _embedder()
    groups: dict[str, Any] = {"/": xr.Dataset(attrs=method_attrs(METHOD, cfg))}
    for model in steps(cfg.models, method=METHOD, progress=progress):
        backend = _backend(model, cfg)
        sampler = D.CachedSampler(
            backend, model=model, temperature=cfg.temperature, max_tokens=cfg.max_tokens
        )
        for name in cfg.text_names:
            say(f"dbsa: {model} on {name}", progress)
            ds = D.dbsa(
                texts[name],
                sampler,
                neighbours,
                embedder=embedder,
                n=cfg.n,
                m=cfg.m,
                k=cfg.k,
                seed=cfg.seed,
                select="words",
                on_missing="skip",
                permutations=cfg.permutations,
                model=model,
            )
            ds.attrs["prompt_name"] = name
            groups[f"/{name}/{model}"] = ds
        del backend, sampler
    tree = xr.DataTree.from_dict(groups)
    write_method_run(tree, path, overwrite=overwrite)
    return tree


def results(tree) -> dict[str, dict[str, Any]]:
    """``{prompt: {model: analysed Dataset}}`` of a stored DBSA run."""
    out: dict[str, dict[str, Any]] = {}
    for node in tree.subtree:
        parts = node.path.strip("/").split("/")
        if len(parts) == 2:
            out.setdefault(parts[0], {})[parts[1]] = node.to_dataset()
    return out


def summarize(tree) -> str:
    """Per prompt and model: tested words, the top 5 words (effect size, p-value), how many
    words have p < 0.05; per prompt the Spearman ρ between the models' effect sizes."""
    from psens import dbsa as D
    from psens.dbsa import ablations

    res = results(tree)
    attrs = tree.attrs
    lines = [
        f"DBSA run: {len(res)} prompts x {len(next(iter(res.values())))} models; "
        f"n = {attrs.get('n')}, m = {attrs.get('m')}, k = {attrs.get('k')}, "
        f"{attrs.get('permutations')} permutations, "
        "MiniLM embeddings, energy distance (cosine)"
    ]
    for prompt, by_model in res.items():
        for model, ds in by_model.items():
            top = D.top_k(ds, 5)
            n_sig = int((ds["p_value"].values < 0.05).sum())
            words = ", ".join(
                f"{t} ({e:.3f}, p={p:.3f})"
                for t, e, p in zip(top["token"], top["effect_size"], top["p_value"], strict=True)
            )
            lines.append(
                f"{prompt} / {model}: {ds.sizes['token']} words tested, {n_sig} with p < 0.05 "
                f"(about {0.05 * ds.sizes['token']:.1f} expected by chance); top 5: {words}"
            )
        if len(by_model) >= 2:
            rho = ablations.rank_correlations(by_model, tidy=True)
            for r in rho.itertuples():
                lines.append(
                    f"{prompt}: Spearman rho({r.model_a}, {r.model_b}) = {r.spearman:.3f} "
                    f"over {r.n_tokens} words"
                )
    return "\n".join(lines)


def top_table(tree, k: int = 5) -> pd.DataFrame:
    """The top ``k`` words of every prompt and model in one long table."""
    from psens import dbsa as D

    parts = [
        D.top_k(ds, k).assign(prompt=prompt, model=model)
        for prompt, by_model in results(tree).items()
        for model, ds in by_model.items()
    ]
    return pd.concat(parts, ignore_index=True)


#: what :mod:`psens.method_runs` loads, runs and summarises (the ``"dbsa"`` entry of
#: :data:`psens.config_schema.RUN_MODULES`)
RUN = MethodRun(METHOD, DBSAConfig, run, summarize)
