"""Options for the whole suite (``tests/``, ``model_tests/``, ``docs/``), wherever pytest is pointed.

``--run-slow`` also runs the tests marked ``slow``: the larger models and the
longer Hypothesis runs (``tox -e tlc``). Without it they are skipped with that
reason.

The tests see the command line's output as a pipe sees it, at the width
``tools/console.py`` gives piped output: a ``COLUMNS`` from the shell, or the
one pytest-xdist's workers get (80), would wrap what they compare. A test
that needs another width sets it itself.
"""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ.pop("COLUMNS", None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run the larger models (tox -e tlc)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--run-slow"):
        skip_slow = pytest.mark.skip(reason="larger model: run with --run-slow (tox -e tlc)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip_slow)
