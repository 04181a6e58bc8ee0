"""Model tests share the ``--run-slow`` option with tests/ (defined here too, for ``pytest model_tests`` alone)."""

from __future__ import annotations

import contextlib

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    with contextlib.suppress(ValueError):  # tests/conftest.py defines it when both are collected
        parser.addoption("--run-slow", action="store_true", help="also run the longer profiles")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--run-slow"):
        skip_slow = pytest.mark.skip(reason="longer profile: run with --run-slow")
        for item in items:
            if "slow" in item.keywords and item.path.is_relative_to(config.rootpath / "model_tests"):
                item.add_marker(skip_slow)
