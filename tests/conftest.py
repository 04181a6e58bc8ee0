"""Test options: ``--run-slow`` for the larger models; TLC tests need Java."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run the larger models (tox -e tlc)")


def _tlc_unavailable() -> str | None:
    from ledgerspec.tools import tlc

    try:
        tlc.find_tla2tools_jar()
        tlc.find_java()
    except tlc.TlcUnavailable as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--run-slow"):
        skip_slow = pytest.mark.skip(reason="larger model: run with --run-slow (tox -e tlc)")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip_slow)
    if any("tlc" in item.keywords for item in items):
        reason = _tlc_unavailable()
        if reason is not None:
            if os.environ.get("CI") == "true":
                raise pytest.UsageError(f"CI needs TLC: {reason}")
            skip_tlc = pytest.mark.skip(reason=reason)
            for item in items:
                if "tlc" in item.keywords:
                    item.add_marker(skip_tlc)
