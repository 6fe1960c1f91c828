"""Shared fixtures of the pagedkv pytest suite, and a guard that fails a run in which a test file
contributes no test (pytest itself exits with status 5 when nothing at all is collected)."""

from __future__ import annotations

import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).parent


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    whole_suite = [pathlib.Path(config.invocation_params.dir, a).resolve() for a in config.args]
    if config.option.keyword or config.option.markexpr or whole_suite != [HERE.resolve()]:
        return  # a selection (a file, -k, -m): no completeness check
    files = {p.name for p in HERE.glob("test_*.py")}
    collected = {pathlib.Path(str(item.fspath)).name for item in session.items}
    missing = sorted(files - collected)
    if not files or missing:
        raise pytest.UsageError(f"pytest collected no test from: {missing or 'tests/python'}")


def shared_data_dir() -> pathlib.Path:
    """../shared/data (PAGEDKV_SHARED_DATA_DIR when set by CTest)."""
    env = os.environ.get("PAGEDKV_SHARED_DATA_DIR")
    return pathlib.Path(env) if env else HERE.parents[2] / "shared" / "data"


def cli_path() -> pathlib.Path:
    """The `pagedkv` CLI (PAGEDKV_CLI when set by CTest, else build/pagedkv)."""
    env = os.environ.get("PAGEDKV_CLI")
    return pathlib.Path(env) if env else HERE.parents[1] / "build" / "pagedkv"


def source_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("PAGEDKV_SOURCE_DIR", HERE.parents[1]))


@pytest.fixture
def aidreams() -> pathlib.Path:
    d = shared_data_dir() / "aidreams260K"
    if not (d / "aidreams260K.bin").exists() or not (d / "tok512.bin").exists():
        pytest.skip(f"aidreams260K not found under {d}")
    return d


@pytest.fixture
def cli() -> pathlib.Path:
    p = cli_path()
    if not p.exists():
        pytest.skip(f"the pagedkv CLI is not built at {p}")
    return p
