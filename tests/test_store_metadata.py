"""A store's array metadata: what verify checks is what open_run decodes.

Each tamper below leaves the chunks alone and edits only metadata, the way an edit through
zarr's own API (which rewrites the array's document and, when consolidating, the root's copy)
or by hand would: both ``verify`` and ``open_run`` must refuse it, in one line, before a
value is decoded. Stores of an older psens (checksum format 1) keep verifying, and still
refuse encodings psens never writes.
"""

from __future__ import annotations

import base64
import json
import shutil
import struct

import numpy as np
import pytest

from psens import store
from psens.store.checksums import _attr_digests
from psens.synthetic import assert_run_equal, synthetic_run


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    run = synthetic_run(n_samples=2, n_vars=(3,))
    path = store.save(run, tmp_path_factory.mktemp("saved") / "r.zarr")
    return run, path


@pytest.fixture
def copy(saved, tmp_path):
    run, path = saved
    return run, shutil.copytree(path, tmp_path / "r.zarr")


def _edit(path, name, change, *, where="both"):
    """Apply ``change(doc)`` to array ``name``'s metadata document (``where``: "both" its own
    and the root's consolidated copy, "own", or "consolidated")."""
    if where in ("both", "own"):
        own = path / name / "zarr.json"
        doc = json.loads(own.read_text())
        change(doc)
        own.write_text(json.dumps(doc))
    if where in ("both", "consolidated"):
        root = path / "zarr.json"
        doc = json.loads(root.read_text())
        change(doc["consolidated_metadata"]["metadata"][name])
        root.write_text(json.dumps(doc))


def _attrs(**extra):
    return lambda doc: doc["attributes"].update(extra)


def _set(key, value):
    return lambda doc: doc.update({key: value})


def _big_endian(doc):
    doc["codecs"][0]["configuration"]["endian"] = "big"


def _drop_coordinates(doc):
    doc["attributes"].pop("coordinates")


NAN_B64 = base64.b64encode(struct.pack("<d", float("nan"))).decode()
POINT_3 = base64.b64encode(struct.pack("<d", 0.3)).decode()

#: (array, change, where, what verify and open_run name)
TAMPERS = {
    "scale_factor": ("correct", _attrs(scale_factor=0), "both", "scale_factor"),
    "add_offset": ("I_and", _attrs(add_offset=0.3), "both", "add_offset"),
    "dtype": ("v", lambda d: d.update(data_type="int64", fill_value=0), "both", "data type"),
    "dtype_float32": ("p_target", _set("data_type", "float32"), "both", "data type"),
    "fill_value": ("confidence", _set("fill_value", 0.3), "both", "fill value"),
    "_FillValue": ("gamma", _attrs(_FillValue=POINT_3), "both", "_FillValue"),
    "units": ("matching_error", _attrs(units="days since 2000-01-01"), "both", "units"),
    "coordinates": ("correct", _drop_coordinates, "both", "metadata changed"),
    "codec": ("I_or", _big_endian, "both", "endian"),
    "own_only": ("I_or", _set("dimension_names", ["a", "b", "c", "d"]), "own", "consolidated"),
    "dimension_names": ("I_or", _set("dimension_names", ["a", "b", "c", "d"]), "both", "changed"),
    "consolidated_only": ("v", _big_endian, "consolidated", "consolidated copy"),
    "consolidated_dtype": ("v", _set("data_type", "float32"), "consolidated", "consolidated"),
}


def test_an_untampered_store_verifies_and_opens(copy):
    run, path = copy
    found = store.verify(path)
    assert found.ok and found.checksum_version == store.CHECKSUM_VERSION
    assert store.metadata_problems(path) == []
    assert "arrays' metadata match their checksums" in found.report()
    back = store.open_run(path, verify=True)
    assert_run_equal(run, back)
    assert store.CHECKSUM_VERSION_ATTR not in back.attrs


def test_the_issue_tamper_would_change_the_numbers(copy):
    """Without the refusal, xarray would decode what the edited metadata says (the reason the
    checks exist): scale_factor = 0 turns accuracy into 0."""
    import xarray as xr

    run, path = copy
    _edit(path, "correct", _attrs(scale_factor=0))
    raw = xr.open_zarr(path, consolidated=False)["correct"].values
    assert np.nanmax(raw) == 0 and np.nanmax(run["correct"].values) == 1


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_a_metadata_tamper_fails_verify_and_open_run(copy, case):
    _, path = copy
    name, change, where, needle = TAMPERS[case]
    _edit(path, name, change, where=where)
    found = store.verify(path)
    assert not found.ok
    reasons = {n: why for n, why in found.damaged_arrays}
    assert name in reasons and needle in reasons[name], found.damaged_arrays
    assert name in found.brief()
    for check in (False, True):
        with pytest.raises(ValueError, match=name) as err:
            store.open_run(path, verify=check)
        assert "\n" not in str(err.value)


def test_the_cli_reports_the_tamper_and_refuses_the_summary(copy, capsys):
    from psens.cli import main

    _, path = copy
    _edit(path, "correct", _attrs(scale_factor=0))
    assert main(["verify", str(path)]) == 1
    assert "correct: the attributes ['scale_factor']" in capsys.readouterr().out
    assert main(["summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert "scale_factor" in err and "Traceback" not in err


def _as_format_1(path):
    """Rewrite a store's checksums as an older psens wrote them: no version attr, no
    metadata digests (the block and coordinate digests are the same in both formats)."""
    import warnings

    import zarr

    group = zarr.open_group(str(path), mode="r+", use_consolidated=False)
    group.attrs.pop(store.CHECKSUM_VERSION_ATTR)
    sums = dict(group.attrs[store.CHECKSUM_ATTR])
    sums.pop(store.METADATA_KEY)
    sums[store.ATTRS_KEY] = _attr_digests(dict(group.attrs))
    group.attrs[store.CHECKSUM_ATTR] = sums
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(path))


def test_a_format_1_store_verifies_and_still_refuses_foreign_encodings(copy, capsys):
    from psens.cli import main

    run, path = copy
    _as_format_1(path)
    found = store.verify(path)
    assert found.ok and found.has_checksums and found.checksum_version == 1
    assert main(["verify", str(path)]) == 0
    assert "checksum format 1" in capsys.readouterr().out
    assert_run_equal(run, store.open_run(path, verify=True))
    docs = {p: p.read_bytes() for p in path.glob("**/zarr.json")}
    for case in ("scale_factor", "add_offset", "dtype", "fill_value", "consolidated_only"):
        name, change, where, needle = TAMPERS[case]
        _edit(path, name, change, where=where)
        assert needle in dict(store.verify(path).damaged_arrays)[name]
        with pytest.raises(ValueError, match=name):
            store.open_run(path)
        for doc, text in docs.items():
            doc.write_bytes(text)
    assert store.verify(path).ok


def test_an_unknown_checksum_format_is_refused(copy):
    import warnings

    import zarr

    _, path = copy
    group = zarr.open_group(str(path), mode="r+", use_consolidated=False)
    group.attrs[store.CHECKSUM_VERSION_ATTR] = 99
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(path))
    with pytest.raises(ValueError, match="checksum format 99"):
        store.open_run(path)


def test_a_created_store_records_format_2(tmp_path):
    from tests.test_store import _schema

    path = tmp_path / "c.zarr"
    store.create(path, **_schema())
    found = store.verify(path)
    assert found.ok and found.checksum_version == 2 and found.pending > 0


def test_the_fill_value_forms_xarray_writes_are_accepted():
    from psens.store.schema import _is_nan, attrs_problem

    for fill in (NAN_B64, "NaN", float("nan"), np.array([np.nan], dtype=np.float32)):
        assert _is_nan(fill) and attrs_problem({"_FillValue": fill}, "f") == ""
    for fill in (POINT_3, 0.0, "zero", "AAAA"):
        assert "_FillValue" in attrs_problem({"_FillValue": fill}, "f")
    assert attrs_problem({"dtype": "bool", "coordinates": "x"}, "i") == ""
    assert "dtype" in attrs_problem({"dtype": "timedelta64[ns]"}, "i")
    assert "DIMENSION_LIST" in attrs_problem({"DIMENSION_LIST": 1}, "f")
    assert attrs_problem({"DIMENSION_LIST": 1}, "f", internal=True) == ""
