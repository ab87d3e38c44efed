"""The offline HTML report of a run."""

from __future__ import annotations

import html
import json
import warnings

import numpy as np
import pytest

pytest.importorskip("altair")
pytest.importorskip("vl_convert")

from psens.report import report_chart, write_report
from psens.synthetic import synthetic_run
from tests.support import HOSTILE


def test_report_is_offline_and_complete(tmp_path):
    ds = synthetic_run(n_samples=4, n_vars=(3, 4))
    path = write_report(ds, tmp_path / "sub" / "report.html")
    html = path.read_text()
    assert "cdn.jsdelivr" not in html and "esm.sh" not in html  # JavaScript is inlined
    assert "psens run summary" in html and "toy-7b-instruct: IPS" in html
    assert "noise floor (jitter: v + N(0, 0.09²)" in html and "IPS − floor" in html
    spec = report_chart(ds).to_dict()
    assert len(spec["vconcat"]) == 3
    titles = str(spec)
    assert "fig. 3a" in titles and "fig. 3b" in titles and "§4.3" in titles


def test_report_skips_unfinished_samples(tmp_path):
    ds = synthetic_run(n_samples=4, n_vars=(3,))
    ds["status"].values[0, 1] = 0  # pending
    spec = report_chart(ds).to_dict()
    assert spec["vconcat"][0]  # still renders from the done samples


def _spec_json(page: str) -> dict:
    """The chart spec embedded in the report (``const spec = {...};``)."""
    start = page.index("const spec = ") + len("const spec = ")
    spec, _end = json.JSONDecoder().raw_decode(page, start)
    return spec


def test_report_escapes_hostile_ids_and_names(tmp_path):
    """Ids and model names are shown as text: they cannot close the chart's <script> tag."""
    models = {
        HOSTILE: ("toy", "toy", "instruct", "dense", 7.0, 7.0, 0.5),
        "toy & <b>": ("toy", "toy", "base", "dense", 7.0, 7.0, 0.8),
    }
    ds = synthetic_run(models, n_samples=4, n_vars=(3,))
    ids = [f"{HOSTILE}{k}" for k in range(ds.sizes["sample"])]
    ds = ds.assign_coords(sample=ids)
    page = write_report(ds, tmp_path / "report.html").read_text()
    assert "</script><script>alert(1)" not in page
    assert "<script>alert" not in page and "<b>" not in page
    spec = _spec_json(page)  # parses back to the very same strings
    assert spec["vconcat"][1]["title"]["text"].startswith(f"{HOSTILE}, sample {ids[0]}:")
    models_seen = {row.get("model") for rows in spec["datasets"].values() for row in rows} - {None}
    assert models_seen == set(models)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = report_chart(ds).to_dict()
    assert json.dumps(spec, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert html.escape("toy & <b>") in page.split("<body>")[-1]  # the summary text, escaped


def test_report_explains_each_chart_and_the_case(tmp_path):
    ds = synthetic_run(n_samples=4, n_vars=(3, 4))
    words = np.array(ds["word"].values)
    words[0, :3] = ["lay", "eggs", "NOT"]
    prompts = np.array(ds["prompt"].values)
    prompts[0, :] = "Question: Which one does NOT lay eggs?\nAnswer:"
    config = json.dumps({"store": "runs/my run.zarr"})
    ds = ds.assign_coords(word=(("sample", "var"), words)).assign(
        prompt=(ds["prompt"].dims, prompts)
    )
    ds.attrs["config"] = config
    page = write_report(ds, tmp_path / "r.html").read_text()
    body = page.split("<body>")[-1].split("<script")[0]
    # one sentence per chart: IPS and its scale, the dashed tau lines, the classes
    assert "0–2 scale" in body and "0 means the same interactions" in body
    assert "dashed lines at ±τ = ±0.1" in body
    assert "same sign, similar effect" in body and "Output consistency" in body
    # the templates' texts
    assert "Question: … / ANSWERS: / A.… / B.… / ANSWER:" in body  # ips2
    assert "A)… / B)…" in body  # ips5
    # the case study names its question and words, not only the sample id
    assert "Which one does NOT lay eggs?" in body and "lay, eggs, NOT" in body
    # what next: exact commands on this store (quoted for the shell)
    assert "PSENS_RUN=&#x27;runs/my run.zarr&#x27; make lab" in body
    assert "psens summary &#x27;runs/my run.zarr&#x27;" in body
    assert "psens.widgets.OrderIPS(ds)" in body


def test_report_text_escapes_hostile_words_prompts_and_store(tmp_path):
    ds = synthetic_run(n_samples=3, n_vars=(3,))
    words = np.array(ds["word"].values)
    words[0, 0] = HOSTILE
    prompts = np.array(ds["prompt"].values, dtype=object)
    prompts[0, :] = f"Question: {HOSTILE}"
    ds = ds.assign_coords(word=(("sample", "var"), words)).assign(
        prompt=(ds["prompt"].dims, prompts)
    )
    ds.attrs["config"] = json.dumps({"store": f"runs/{HOSTILE}.zarr"})
    page = write_report(ds, tmp_path / "r.html").read_text()
    assert "<script>alert" not in page and "</script><script>" not in page
    body = page.split("<body>")[-1]
    assert html.escape(HOSTILE) in body  # shown, as text
