"""``psens plan``: passes, time, memory, store and downloads without loading weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from psens import plan as plan_mod
from psens import runner
from psens.cli import main
from psens.config import load_config
from psens.models import hardware
from psens.runner import Plan, estimate

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "examples"
PAPER = sorted(EXAMPLES.glob("paper_*.toml"))


def _config(tmp_path, **over) -> Path:
    text = (EXAMPLES / "arc.toml").read_text()
    for key, value in over.items():
        lines = [ln for ln in text.splitlines() if not ln.startswith(f"{key} =")]
        text = "\n".join(lines) + f"\n{key} = {value}\n"
    path = tmp_path / "c.toml"
    path.write_text(text.replace('store = "runs/arc.zarr"', f'store = "{tmp_path / "s.zarr"}"'))
    return path


def test_plan_offline_smollm(capsys, tmp_path):
    cfg = _config(tmp_path)
    assert main(["plan", str(cfg)]) == 0
    out = capsys.readouterr().out
    for word in ("passes", "time", "memory", "store", "download", "smollm2-135m-instruct"):
        assert word in out
    assert plan_mod.cpu_name() in out
    assert not (tmp_path / "s.zarr").exists()
    rp = plan_mod.make_plan(load_config(cfg))
    (m,) = rp.models
    p = Plan(load_config(cfg))
    assert m.passes == p.forward_passes() == 4 * 32 * 5
    assert m.store_bytes == estimate(p)["store_bytes"]
    assert m.download_bytes == 0 and m.params == pytest.approx(0.135e9)
    assert m.memory_bytes > 0.135e9 * 4  # weights at float32 plus activations


def test_run_plan_flag(capsys, tmp_path):
    assert main(["run", "--plan", str(_config(tmp_path))]) == 0
    assert "forward passes" in capsys.readouterr().out
    assert not (tmp_path / "s.zarr").exists()


def test_flop_formula_literal():
    # 2 x P x T x N / R: a 1B model, 100 tokens, 1000 prompts at 1e12 FLOP/s = 200 s
    assert plan_mod.flop_seconds(1e9, 100, 1000, 1e12) == pytest.approx(200.0)
    cfg = load_config(EXAMPLES / "arc.toml")
    rp = plan_mod.make_plan(cfg)
    m = rp.models[0]
    p = Plan(cfg)
    tree, full = runner.prompt_work(p)
    flop = runner.model_scale(cfg.model_specs[0])  # non-embedding: 30 x 3.54M = 106M
    assert flop == pytest.approx(30 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536))
    literal = 2 * flop * (tree.sum() + full.sum()) / plan_mod.THROUGHPUT["cpu"]["float32"]
    assert m.seconds == pytest.approx(literal + 10.0)  # and one load
    # the run's own estimate before its first block is the same function
    assert estimate(p)["seconds"] == pytest.approx(literal + 10.0)
    # a noise floor: the tree scored again at the bfloat16 rate, and a second load
    floor = load_config(EXAMPLES / "arc.toml")
    floor.noise_floor = "bfloat16"
    t = estimate(Plan(floor))["seconds"]
    bf16 = 2 * flop * tree.sum() / plan_mod.THROUGHPUT["cpu"]["bfloat16"]
    assert t == pytest.approx(literal + bf16 + 20.0)


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.stem)
def test_paper_configs_offline(path, capsys):
    assert main(["plan", str(path), "--offline"]) == 0
    out = capsys.readouterr().out
    n_models = len(load_config(path).models)
    assert f"({n_models} models)" in out and "to download" in out
    assert out.count(" hub ") == n_models


@pytest.mark.parametrize("hub", ["off", "unreachable"])
def test_a_hub_model_without_the_network_is_refused_naming_offline(hub, monkeypatch, capsys):
    """The paper configs list hub models: without the network the plan says --offline."""
    if hub == "off":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        import huggingface_hub

        def no_network(self, *args, **kwargs):
            raise ConnectionError("no route to host")

        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setattr(huggingface_hub.HfApi, "model_info", no_network)
    assert main(["plan", str(EXAMPLES / "paper_fewshot.toml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: psens plan: model 'llama-2-7b'") and err.count("\n") == 1
    assert "psens plan CONFIG --offline" in err


def test_unknown_dataset(capsys, tmp_path):
    assert main(["plan", str(_config(tmp_path, dataset='"arc"'))]) == 2
    err = capsys.readouterr().err
    assert "unknown dataset 'arc'" in err and "arc-challenge" in err and "mmlu" in err


def test_unknown_model(capsys, tmp_path):
    assert main(["plan", str(_config(tmp_path, models='["no-such-model"]'))]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err


def test_n_vars_above_dense_limit(capsys, tmp_path):
    assert main(["plan", str(_config(tmp_path, n_vars="20"))]) == 2
    assert "sparse" in capsys.readouterr().err


def test_model_too_large(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(hardware, "free_memory", lambda device: (1e8, "a small machine"))
    assert main(["plan", str(_config(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and 'device = "auto"' in err
    assert main(["plan", str(_config(tmp_path, device='"auto"'))]) == 0


@pytest.mark.parametrize("command", ["plan", "run"])
def test_batch_auto_without_memory_information(command, monkeypatch, capsys, tmp_path):
    """A device that reports no free memory (as mps): refused by the plan and the run alike,
    before any store."""
    monkeypatch.setattr(hardware, "free_memory", lambda device: (None, "mps"))
    cfg = _config(tmp_path, batch_size='"auto"')
    assert main([command, str(cfg), *(["--no-progress"] if command == "run" else [])]) == 2
    err = capsys.readouterr().err.strip()  # the run prints its estimate line first
    assert "Traceback" not in err and 'batch_size = "auto" needs the free memory' in err
    assert 'batch_size = "auto"' in err.splitlines()[-1]
    assert not (tmp_path / "s.zarr").exists()


@pytest.mark.parametrize("command", ["plan", "run"])
def test_cuda_refused_without_cuda(command, capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for over, said in (
        ({"device": '"cuda"'}, "this machine has no CUDA"),
        ({"scheduler": '"cuda"'}, "dask-cuda"),
    ):
        cfg = _config(tmp_path, **over)
        assert main([command, str(cfg), *(["--no-progress"] if command == "run" else [])]) == 2
        err = capsys.readouterr().err.strip()
        assert "Traceback" not in err and said in err.splitlines()[-1]
        assert not (tmp_path / "s.zarr").exists()


def test_plan_prints_the_auto_batch(capsys, tmp_path):
    assert main(["plan", str(_config(tmp_path, batch_size='"auto"'))]) == 0
    # 23 GB free, a 135M model: the cap, 2**5 masked prompts of one prompt
    assert "batch 32" in capsys.readouterr().out


def test_table7_config_is_the_papers_pairs():
    from psens.ips.factors.pairings import MATCHED_ACTIVE_PAIRS

    models = load_config(EXAMPLES / "paper_table7.toml").models
    assert models == [m for dense, moe in MATCHED_ACTIVE_PAIRS for m in (moe, dense)]


def test_model_table_cites_no_missing_file():
    from psens.models.registry import model_table, paper_models

    sources = model_table()["source"].astype(str)
    assert not sources.str.contains(r"\.md\b|docs/", regex=True).any()
    assert len(paper_models()) == 50
    assert sources.str.contains("Evaluating and Explaining Prompt Sensitivity").sum() == 50


def test_calibrate_measures_a_rate(tmp_path):
    """Calibration loads and scores a model: in a fresh process (the suite's earlier tests
    may leave torch's default device changed)."""
    import subprocess
    import sys

    code = (
        "import sys; from psens.cli import main; from psens import plan as P;"
        "from psens.config import load_config;"
        f"cfg = {str(_config(tmp_path))!r};"
        "assert main(['plan', cfg, '--calibrate']) == 0;"
        "rp = P.calibrate(P.make_plan(load_config(cfg))); (m,) = rp.models;"
        "assert rp.calibrated and rp.throughput > 0;"
        "from psens.runner import Plan, model_seconds;"
        "ref = model_seconds(Plan(rp.config), rp.config.model_specs[0], rp.throughput);"
        "assert abs(m.seconds - ref) <= 1e-9 * max(1.0, ref), (m.seconds, ref)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "TFLOP/s measured" in out.stdout and not (tmp_path / "s.zarr").exists()
