"""Test options: ``--run-slow`` for the larger models; TLC and Spark tests need Java; ZooKeeper tests need ZooKeeper.

Tests marked ``zookeeper`` talk to a real ZooKeeper server that the
``zookeeper_server`` fixture starts once per session. Where none can be
started they are skipped with the reason, except in CI (``CI=true``), where
that is an error, as for TLC.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest
from metadata_backends import BACKEND_PARAMS, MetadataBackend
from zookeeper_server import ZooKeeperServer, ZooKeeperUnavailableError, find_zkserver


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
    zookeeper_items = [item for item in items if item.get_closest_marker("zookeeper")]
    if zookeeper_items:
        try:
            find_zkserver()
        except ZooKeeperUnavailableError as exc:
            if os.environ.get("CI") == "true":
                raise pytest.UsageError(f"CI needs ZooKeeper: {exc}") from None
            for item in zookeeper_items:
                item.add_marker(pytest.mark.skip(reason=str(exc)))
    _skip_without_spark(items)
    if any("tlc" in item.keywords for item in items):
        reason = _tlc_unavailable()
        if reason is not None:
            if os.environ.get("CI") == "true":
                raise pytest.UsageError(f"CI needs TLC: {reason}")
            skip_tlc = pytest.mark.skip(reason=reason)
            for item in items:
                if "tlc" in item.keywords:
                    item.add_marker(skip_tlc)


def _spark_unavailable() -> str | None:
    from ledgerspec.conformance.spark import find_java_home

    return None if find_java_home() is not None else "Spark needs a Java runtime (17 or 21): none found"


def _skip_without_spark(items: list[pytest.Item]) -> None:
    spark_items = [item for item in items if item.get_closest_marker("spark")]
    reason = _spark_unavailable() if spark_items else None
    if reason is not None:
        if os.environ.get("CI") == "true":
            raise pytest.UsageError(f"CI needs Spark: {reason}")
        for item in spark_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One Spark session (``local[2]``) for the whole test session: starting one takes seconds."""
    from ledgerspec.conformance.spark import spark_session

    with spark_session("local[2]", app_name="ledgerspec tests") as session:
        yield session


def _zookeeper_unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs ZooKeeper: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper server on a loopback port, for the whole test session."""
    try:
        server = ZooKeeperServer(find_zkserver(), tmp_path_factory.mktemp("zookeeper"))
    except ZooKeeperUnavailableError as exc:
        _zookeeper_unavailable(str(exc))
    try:
        server.start()
    except ZooKeeperUnavailableError as exc:
        server.stop()
        _zookeeper_unavailable(str(exc))
    yield server
    server.stop()


@pytest.fixture(params=BACKEND_PARAMS)
def metadata_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetadataBackend]:
    """Each metadata store implementation in turn: in memory, SQLite, and a real ZooKeeper."""
    kind: str = request.param
    hosts = request.getfixturevalue("zookeeper_server").hosts if kind == "zookeeper" else None
    backend = MetadataBackend(kind, tmp_path_factory.mktemp("metadata"), hosts)
    yield backend
    backend.close()
