"""The offline HTML report of a run."""

from __future__ import annotations

import pytest

pytest.importorskip("altair")
pytest.importorskip("vl_convert")

from psens.report import report_chart, write_report
from psens.synthetic import synthetic_run


def test_report_is_offline_and_complete(tmp_path):
    ds = synthetic_run(n_samples=4, n_vars=(3, 4))
    path = write_report(ds, tmp_path / "sub" / "report.html")
    html = path.read_text()
    assert "cdn.jsdelivr" not in html and "esm.sh" not in html  # JavaScript is inlined
    assert "psens run summary" in html and "toy-7b-instruct: IPS" in html
    spec = report_chart(ds).to_dict()
    assert len(spec["vconcat"]) == 3
    titles = str(spec)
    assert "fig. 3a" in titles and "fig. 3b" in titles and "§4.3" in titles


def test_report_skips_unfinished_samples(tmp_path):
    ds = synthetic_run(n_samples=4, n_vars=(3,))
    ds["status"].values[0, 1] = 0  # pending
    spec = report_chart(ds).to_dict()
    assert spec["vconcat"][0]  # still renders from the done samples
