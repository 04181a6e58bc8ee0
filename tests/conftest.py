"""Test options: TLC and Spark tests need Java, ZooKeeper tests a ZooKeeper server, Chromium tests Chromium.

``--run-slow`` is in the root conftest.py.

Tests marked ``zookeeper`` talk to a real ZooKeeper server that the
``zookeeper_server`` fixture starts once per session. Where none can be
started they are skipped with the reason, except in CI (``CI=true``), where
that is an error, as for TLC. Tests marked ``chromium`` render pages in a
real headless Chromium, and tests marked ``spark`` run Spark (PySpark's JVM
needs Java), under the same rule.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest
from headless_chromium import ChromiumUnavailableError, find_chromium
from ledgerspec.conformance.adapters.jars import JavaSetupError, check_tools
from ledgerspec.conformance.spark import SparkUnavailable, find_java_home
from metadata_backends import BACKEND_PARAMS, MetadataBackend
from zookeeper_server import ZooKeeperServer, ZooKeeperUnavailableError, find_zkserver

from ledgerspec.java import JavaNotFound, jvm_library


def _tlc_unavailable() -> str | None:
    from ledgerspec.tools.model_checking.tlc.output import TlcUnavailable
    from ledgerspec.tools.model_checking.tlc.runner import find_tla2tools_jar

    try:
        find_tla2tools_jar()
        jvm_library()
    except (TlcUnavailable, JavaNotFound) as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _needs(items, "zookeeper", "ZooKeeper", find_zkserver, ZooKeeperUnavailableError)
    _needs(items, "chromium", "Chromium", find_chromium, ChromiumUnavailableError)
    _needs(items, "spark", "Spark", find_java_home, SparkUnavailable)
    _needs(items, "real_bookkeeper", "Java with javac, and Maven", check_tools, JavaSetupError)
    if any("tlc" in item.keywords for item in items):
        reason = _tlc_unavailable()
        if reason is not None:
            if os.environ.get("CI") == "true":
                raise pytest.UsageError(f"CI needs TLC: {reason}")
            skip_tlc = pytest.mark.skip(reason=reason)
            for item in items:
                if "tlc" in item.keywords:
                    item.add_marker(skip_tlc)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One Spark session (``local[2]``) for the whole test session: starting one takes seconds."""
    from ledgerspec.conformance.spark import spark_session

    with spark_session("local[2]", app_name="ledgerspec tests") as session:
        yield session


def _needs(
    items: list[pytest.Item], marker: str, what: str, find: Callable[[], object], missing: type[Exception]
) -> None:
    """Skip the tests marked ``marker`` when ``find`` raises ``missing``; under CI=true that is an error."""
    marked = [item for item in items if item.get_closest_marker(marker)]
    if not marked:
        return
    try:
        find()
    except missing as exc:
        if os.environ.get("CI") == "true":
            raise pytest.UsageError(f"CI needs {what}: {exc}") from None
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=str(exc)))


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
