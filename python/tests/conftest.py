"""Shared fixtures: where the ldpgraph binaries are ($LDPGRAPH_BIN_DIR, set
by CTest; else ../build beside the source tree)."""
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def bin_dir() -> Path:
    d = Path(os.environ.get("LDPGRAPH_BIN_DIR",
                            Path(__file__).resolve().parents[2] / "build"))
    for name in ("ldpctl", "ldpgraph-curator", "ldpgraph-agent"):
        if not (d / name).is_file():
            pytest.skip(f"{d / name} is not built (set LDPGRAPH_BIN_DIR)")
    return d
