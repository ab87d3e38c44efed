"""Shared test set-up: never reach a model hub; locate ../shared when present."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's ../shared folder (read-only); tests needing it skip when absent."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not found (the shared reference data sits beside the repo)")
    return SHARED
