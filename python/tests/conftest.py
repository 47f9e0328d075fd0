"""Shared fixtures: where the ldpgraph binaries are ($LDPGRAPH_BIN_DIR, set
by CTest; else ../build beside the source tree).

A missing binary skips the tests that need it, saying which and where it
looked; under CI (CI=true or CI=1) it fails them instead, as the C++ tests
do with a missing dataset (common/testing/missing_input.h)."""
import os
from pathlib import Path

import pytest


def in_ci() -> bool:
    """Whether the environment says this is a CI run: CI=true or CI=1."""
    return os.environ.get("CI", "").lower() in ("true", "1")


def skip_or_fail_in_ci(message: str) -> None:
    """Skips the running test with message, or fails it under CI."""
    if in_ci():
        pytest.fail("CI is set: a missing test input is a failure, not a skip "
                    f"(outside CI this test skips)\n{message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def bin_dir() -> Path:
    d = Path(os.environ.get("LDPGRAPH_BIN_DIR",
                            Path(__file__).resolve().parents[2] / "build"))
    for name in ("ldpctl", "ldpgraph-curator", "ldpgraph-agent"):
        if not (d / name).is_file():
            skip_or_fail_in_ci(f"{d / name} is not built (set LDPGRAPH_BIN_DIR)")
    return d
