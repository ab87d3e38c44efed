"""The GPU path, tested on the CPU: device, dtype and batch "auto", SDPA attention,
trust_remote_code and one dask worker per GPU, on the runner tests' tiny random-weight Llama."""

from __future__ import annotations

import json
import shutil
import sys
import types

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import psens
import psens.runner as runner
from psens.cli import main
from psens.config import RunConfig
from psens.models import hardware, loading
from tests.test_runner import (
    _config,
    _toml,
    assets,  # noqa: F401  (the tiny model and dataset)
)

GAMES = ("v", "I_and", "I_or", "p_target")


def _same_values(a, b, atol=1e-5):
    for name in GAMES:
        np.testing.assert_allclose(b[name].values, a[name].values, atol=atol, equal_nan=True)


@pytest.fixture(scope="module")
def default_run(assets, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("default") / "run.zarr"
    return psens.run(_config(assets, out), progress=False, quiet=True).load()


def test_auto_placement_gives_the_default_values(assets, default_run, tmp_path, monkeypatch):  # noqa: F811
    """device, dtype and batch_size "auto" on the CPU: the values of the default run (1e-5),
    with a batch of 3 (free memory set so that 3 prompts fit) and what was chosen recorded."""
    cfg = _config(assets, tmp_path / "auto.zarr", device="auto", dtype="auto", batch_size="auto")
    plan = runner.Plan(RunConfig.from_dict(cfg))
    spec = plan.cfg.model_specs[0]
    params = hardware.model_params(spec)[0]
    tokens = runner.prompt_tokens(plan, longest=True)
    fits = hardware.memory_bytes(params, "float32", 3, tokens) + 1.0
    monkeypatch.setattr(hardware, "free_memory", lambda d: (fits / 0.5, "a small machine"))
    assert runner.resolve_batch(plan) == 3
    ds = psens.run(cfg, progress=False, quiet=True).load()
    _same_values(default_run, ds)
    assert ds.attrs["batch_size"] == 3 and default_run.attrs["batch_size"] == 32
    (name,) = ds.model.values
    recorded = json.loads(ds.attrs["loading"])
    assert recorded == {str(name): {"dtype": "float32", "attn_implementation": "sdpa"}}
    assert json.loads(ds.attrs["config"])["batch_size"] == "auto"  # the config as written
    # a resume on a machine with more memory goes on with the store's batch
    monkeypatch.setattr(hardware, "free_memory", lambda d: (1e12, "a large machine"))
    psens.store.write_block(
        cfg["store"], 0, 1, {"status": psens.store.PENDING}, run_id=ds.attrs["run_id"]
    )
    used = []
    real = runner.run_scorer
    monkeypatch.setattr(
        runner, "run_scorer", lambda c, *a: used.append(c.batch_size) or real(c, *a)
    )
    again = psens.run(cfg, progress=False, quiet=True).load()
    assert used and set(used) == {3} and again.attrs["batch_size"] == 3
    _same_values(default_run, again)


def test_auto_batch_literal():
    # 1B parameters at float32 (4 GB), 100 tokens: d = (128e9 / 12)^(1/3), L = d / 128
    d = (128e9 / 12) ** (1 / 3)
    seq = 100 * 2 * (d / 128) * d * 4
    free = 2 * (4e9 + 10.5 * seq)  # half of it holds the weights and 10.5 prompts
    assert hardware.largest_batch(free, 1e9, "float32", 100, cap=1024) == 10
    assert hardware.largest_batch(free, 1e9, "float32", 100, cap=8) == 8
    assert hardware.largest_batch(1e9, 1e9, "float32", 100, cap=8) == 1  # no room: one
    # a bfloat16 noise floor keeps its copy (2 GB) too
    free = 2 * (6e9 + 7.5 * seq)
    assert hardware.largest_batch(free, 1e9, "float32", 100, 1024, floor_dtype="bfloat16") == 7
    assert hardware.memory_bytes(1e9, "float32", 10, 100) == pytest.approx(4e9 + 10 * seq)


def test_checkpoint_dtype(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    for conf, want in (
        ({"dtype": "bfloat16"}, "bfloat16"),
        ({"torch_dtype": "float16"}, "float16"),  # written by transformers 4
        ({"text_config": {"dtype": "bfloat16"}}, "bfloat16"),
        ({}, None),
    ):
        (folder / "config.json").write_text(json.dumps(conf))
        src = {"kind": "folder", "path": folder}
        assert loading.checkpoint_dtype(src) == want
        assert loading.resolve_dtype(src, "auto") == (want or "float32")
    assert loading.checkpoint_dtype({"kind": "gguf", "path": None}) == "float32"
    assert loading.resolve_dtype({"kind": "folder", "path": folder}, "bf16") == "bfloat16"


def test_device_auto_loads_with_a_device_map(assets):  # noqa: F811
    scorer = psens.models.load(str(assets["model"]), device="auto", dtype="auto", progress=False)
    assert scorer.info["device_map"] == {"": "cpu"}  # no GPU: everything on the CPU
    assert scorer.info["dtype"] == "float32" and str(scorer.device) == "cpu"
    assert scorer.tree is not None  # one device: the tree walk


def test_a_sharded_model_takes_the_generic_path(assets):  # noqa: F811
    """A model spread over several devices (its hf_device_map) is scored through its own
    forward pass (accelerate moves the activations), with the tree walk's values."""
    from psens import datasets

    item = datasets.load("arc-challenge", path=assets["data"])[0]
    plain = psens.models.load(str(assets["model"]), progress=False, n_max=4)
    masks = np.arange(16)
    want = plain.value(item, "ips1", masks)
    model = plain.model
    model.hf_device_map = {"model.embed_tokens": "cpu", "model.layers": 0, "lm_head": 1}
    sharded = psens.models.Scorer(model, plain.tokenizer, progress=False, n_max=4)
    assert plain.tree is not None and sharded.tree is None
    np.testing.assert_allclose(sharded.value(item, "ips1", masks), want, atol=1e-5)


def test_eager_where_sdpa_is_not_supported(assets, monkeypatch):  # noqa: F811
    from transformers import LlamaForCausalLM

    monkeypatch.setattr(LlamaForCausalLM, "_supports_sdpa", False)
    src = loading.resolve_source(str(assets["model"]))
    assert loading.load_settings(src)["attn_implementation"] == "eager"
    scorer = psens.models.load(str(assets["model"]), progress=False)
    assert scorer.info["attn_implementation"] == "eager"
    assert scorer.model.config._attn_implementation == "eager"


def test_trust_remote_code_only_when_set(assets, tmp_path, monkeypatch):  # noqa: F811
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    seen: list[tuple[str, bool]] = []

    def spy(cls, name):
        real = cls.from_pretrained

        def wrapped(*a, **k):
            seen.append((name, "trust_remote_code" in k and k["trust_remote_code"]))
            return real(*a, **k)

        monkeypatch.setattr(cls, "from_pretrained", wrapped)

    for cls, name in ((AutoConfig, "config"), (AutoModelForCausalLM, "model")):
        spy(cls, name)
    spy(AutoTokenizer, "tokenizer")
    runner._SCORERS.clear()
    psens.models.load(str(assets["model"]), progress=False)
    assert seen and not any(flag for _, flag in seen)
    seen.clear()
    cfg = _config(assets, tmp_path / "remote.zarr", trust_remote_code=True, samples=1)
    ds = psens.run(cfg, progress=False, quiet=True)
    assert {"config", "model", "tokenizer"} <= {n for n, flag in seen if flag is True}
    assert (ds.status.values == psens.store.DONE).all()
    runner._SCORERS.clear()


def test_trust_remote_code_keeps_older_config_hashes(assets, tmp_path):  # noqa: F811
    cfg = _config(assets, tmp_path / "r.zarr")
    plain = RunConfig.from_dict(cfg).fingerprint()
    assert RunConfig.from_dict({**cfg, "trust_remote_code": False}).fingerprint() == plain
    assert RunConfig.from_dict({**cfg, "trust_remote_code": True}).fingerprint() != plain
    assert main(["run", str(_toml({**cfg, "trust_remote_code": "yes"}, tmp_path / "c.toml"))]) == 2


def test_scheduler_cuda_runs_one_worker_per_gpu(assets, default_run, tmp_path, monkeypatch):  # noqa: F811
    """``scheduler = "cuda"`` goes through dask-cuda's LocalCUDACluster (a stand-in with one
    in-process worker here: no GPU), with the serial run's values."""
    from dask.distributed import LocalCluster

    made = []

    def cluster(**kwargs):
        made.append(kwargs)
        return LocalCluster(
            n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None
        )

    monkeypatch.setitem(sys.modules, "dask_cuda", types.SimpleNamespace(LocalCUDACluster=cluster))
    monkeypatch.setattr(hardware, "cuda_count", lambda: 1)
    ds = psens.run(
        _config(assets, tmp_path / "cuda.zarr", scheduler="cuda"), progress=False, quiet=True
    )
    assert made == [{"threads_per_worker": 1, "dashboard_address": None}]
    _same_values(default_run, ds.load(), atol=1e-9)


def test_dtype_auto_into_the_noise_floors_dtype(assets, tmp_path, capsys):  # noqa: F811
    folder = tmp_path / "bf16"
    shutil.copytree(assets["model"], folder)
    conf = json.loads((folder / "config.json").read_text())
    conf["dtype"] = "bfloat16"
    (folder / "config.json").write_text(json.dumps(conf))
    cfg = _config(assets, tmp_path / "s.zarr", models=[str(folder)], dtype="auto")
    cfg["noise_floor"] = "bfloat16"
    assert main(["run", str(_toml(cfg, tmp_path / "c.toml")), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "noise floor's own dtype" in err and not (tmp_path / "s.zarr").exists()
