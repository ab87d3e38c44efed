"""The model table: the IPS paper's 50 models (appendix E.2, table 1) and the offline models.

``data/models.csv`` (repo top level) has one row per model: ``name``, ``hub_id``,
``family``, ``series``, ``kind`` (base/instruct/chat), ``arch`` (dense/moe), ``params``
and ``active_params`` (billions; MoE activated parameters as in table 1),
``mask_token`` / ``mask_token_id`` (appendix E.4, as the token string in the model's
vocabulary), ``mask_token_paper`` (E.4's own wording), ``package`` (the PyPI package
of an offline model) and ``source`` (the paper's full reference for its 50 models).

References
----------
Qin, R., Wang, Q., Wang, T., Wei, Z. and Shen, W. Evaluating and Explaining Prompt
Sensitivity of LLMs Using Interactions. ICML 2026 (PMLR 306).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

from psens._validation import fail

__all__ = ["data_dir", "lookup", "model_table", "paper_models"]


def data_dir() -> Path:
    """The ``data/`` folder: the checkout's (editable installs), else the copy a wheel
    installs under ``<prefix>/share/psens`` (``[tool.setuptools.data-files]``)."""
    checkout = Path(__file__).resolve().parents[2] / "data"
    if (checkout / "models.csv").exists():
        return checkout
    return Path(sys.prefix) / "share" / "psens"


@lru_cache(maxsize=1)
def _table():
    import pandas as pd

    path = data_dir() / "models.csv"
    if not path.exists():
        fail(
            "psens.models.model_table",
            f"{path} is missing",
            "Install psens from a checkout that includes data/ (pip install -e .)",
            FileNotFoundError,
        )
    df = pd.read_csv(path, dtype={"mask_token_id": "Int64"}, keep_default_na=False, na_values=[""])
    return df


def model_table():
    """The model table as a pandas DataFrame (a copy; one row per model).

    Examples
    --------
    >>> t = model_table()
    >>> int((t["source"].str.startswith("IPS paper")).sum())
    50
    """
    return _table().copy()


def paper_models() -> list[str]:
    """Names of the IPS paper's models (table 1; rows whose ``source`` is the paper), in
    table order; the offline models the table also lists are left out.

    Examples
    --------
    >>> len(paper_models())
    50
    """
    df = _table()
    return df.loc[df["source"].str.startswith("IPS paper"), "name"].astype(str).tolist()


def _key(name: str) -> str:
    return str(name).strip().lower().replace("_", "-")


def lookup(name: str) -> dict | None:
    """The table row of ``name`` (short name or hub id, case-insensitive), or None."""
    df = _table()
    key = _key(name)
    hit = df[(df["name"].str.lower() == key) | (df["hub_id"].str.lower() == str(name).lower())]
    if hit.empty:
        tail = key.rsplit("/", 1)[-1]
        hit = df[df["hub_id"].str.lower().str.rsplit("/", n=1).str[-1] == tail]
    if hit.empty:
        return None
    row = hit.iloc[0].to_dict()
    return {k: (None if (v is None or v != v) else v) for k, v in row.items()}  # NaN -> None
