"""Options for the whole suite (``tests/``, ``model_tests/``, ``docs/``), wherever pytest is pointed.

``--run-slow`` also runs the tests marked ``slow``: the larger models and the
longer Hypothesis runs (``tox -e tlc``). Without it they are skipped with that
reason.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run the larger models (tox -e tlc)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--run-slow"):
        skip_slow = pytest.mark.skip(reason="larger model: run with --run-slow (tox -e tlc)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip_slow)
