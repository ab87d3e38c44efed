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
    bf16 = 2 * flop * tree.sum() / runner.throughput(floor, "bfloat16")
    assert t == pytest.approx(literal + bf16 + 20.0)


@pytest.mark.parametrize(
    ("flags", "factor"),
    [
        ({"avx2", "fma"}, hardware.HALF_SLOWDOWN_CPU),  # AVX2 only (the AMD EPYC)
        ({"avx2", "avx512f", "avx512_bf16"}, 1.0),
        ({"avx2", "amx_bf16", "amx_tile"}, 1.0),  # AMX (the Intel Xeon of the table)
    ],
)
def test_the_half_precision_factor_only_without_native_bf16(flags, factor, monkeypatch):
    """On a CPU without native bfloat16 the noise floor is scored HALF_SLOWDOWN_CPU times
    slower than float32; with native bfloat16, at the table's rate; never on float32 or a
    GPU."""
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(flags))
    assert hardware.half_factor("bfloat16") == factor
    assert hardware.half_factor("float32") == 1.0
    want = hardware.THROUGHPUT["cpu"]["float32"] / factor if factor != 1.0 else None
    rate = hardware.rate("cpu", "bfloat16")
    assert rate == (want or hardware.THROUGHPUT["cpu"]["bfloat16"])
    assert hardware.rate("cpu", "float32") == hardware.THROUGHPUT["cpu"]["float32"]
    assert hardware.rate("cuda", "bfloat16") == hardware.THROUGHPUT["cuda"]["bfloat16"]
    # float16 needs its own flags: AVX-512 BF16 does not compute float16 natively
    assert hardware.half_factor("float16") == hardware.HALF_SLOWDOWN_CPU
    cfg = load_config(EXAMPLES / "arc.toml")
    cfg.noise_floor = "bfloat16"
    p = Plan(cfg)
    tree, full = runner.prompt_work(p)
    spec = cfg.model_specs[0]
    flop = runner.model_scale(spec)
    f32 = 2 * flop * (tree.sum() + full.sum()) / hardware.THROUGHPUT["cpu"]["float32"]
    floor = 2 * flop * tree.sum() / rate
    assert runner.model_seconds(p, spec) == pytest.approx(f32 + floor + 20.0)
    rp = plan_mod.make_plan(cfg)
    assert rp.floor_factor == factor
    line = plan_mod.format_plan(rp).splitlines()[-1]
    assert line.startswith("noise floor in bfloat16")
    assert (f"{factor:g}x slower than float32" in line) == (factor != 1.0)


def test_cloze_tokens_literal(tmp_path):
    """A cloze run computes per masked prompt its prefix tree's share and every option as a
    branch (k options, padded to the longest: delimiter and text), and per prompt one
    unmasked prediction; a predictions-only cloze run the prompt, the options and the
    prediction."""
    from psens import prompts
    from psens.config import RunConfig
    from tests.test_cloze import _base

    cfg = RunConfig.from_dict(_base(tmp_path))
    p = Plan(cfg)
    tree, full = runner.prompt_work(p)
    opts = runner.cloze_work(p)
    assert opts.shape == tree.shape == (2, 1, 2)
    for s, it in enumerate(p.items):
        for t, name in enumerate(p.templates):
            assert prompts.get_template(name).answer_prefix == " "
            width = max(len(" " + text) for _, text in it.options)
            n = len(p.variables[s])
            literal = 2**n * len(it.options) * width
            assert opts[s, 0, t] * hardware.CHARS_PER_TOKEN == pytest.approx(literal)
            assert full[s, 0, t] * hardware.CHARS_PER_TOKEN == len(p.prompts[s, 0, t])
    spec = cfg.model_specs[0]
    assert runner.block_work(p, 0, spec) == pytest.approx(
        tree[0].sum() + opts[0].sum() + full[0].sum()
    )
    # counted by hand: "What do bees make?" masks one word ("bees", 2 masked prompts); its
    # 3 options milk, honey, silk are padded to " honey"
    assert p.items[0].id == "q4" and [str(v) for v in p.variables[0]] == ["bees"]
    assert opts[0, 0, 0] * hardware.CHARS_PER_TOKEN == 2 * 3 * len(" honey")
    assert full[0, 0, 0] * hardware.CHARS_PER_TOKEN == len("Question: What do bees make?\nAnswer:")
    # n_vars = 0: no tree; the prompt once with its options, and the prediction
    pred = Plan(RunConfig.from_dict(_base(tmp_path, n_vars=0)))
    tree0, full0 = runner.prompt_work(pred)
    opts0 = runner.cloze_work(pred)
    assert not tree0.any()
    for s, it in enumerate(pred.items):
        width = max(1 + len(text) for _, text in it.options)
        for t in range(len(pred.templates)):
            literal = len(pred.prompts[s, 0, t]) + len(it.options) * width
            assert opts0[s, 0, t] * hardware.CHARS_PER_TOKEN == pytest.approx(literal)
    est = estimate(pred)
    per = (opts0.sum() + full0.sum()) / (len(pred.items) * len(pred.templates))
    assert est["computed_tokens"] == pytest.approx(per)
    # the letter formulation computes no options
    letter = Plan(RunConfig.from_dict(_base(tmp_path, answer="letter", templates="ips5")))
    assert not runner.cloze_work(letter).any()


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
