"""Fixtures of the compat suite: the Quire targets (one standalone and one cluster per session,
or the deployment given by --bootstrap / QUIRE_COMPAT_BOOTSTRAP), Apache Kafka for the
differential runs, the `compat(suite=, client=)` marker and the summary table."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.support.allowlist import Differences
from compat_tests.support.summary import CompatResults
from compat_tests.support.targets import KAFKA_BOOTSTRAP_ENV, Target, external_bootstrap

pytest_plugins = ["tests.support.zookeeper", "tests.support.bookies", "tests.support.gateway"]

_RESULTS = CompatResults()
_ALLOWED_KEY = "compat_allowed_difference"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("compat", "Quire compat suite")
    group.addoption("--bootstrap", default=None, metavar="HOST:PORT[,HOST:PORT]",
                    help="run the compat scenarios against this Kafka-protocol endpoint instead of "
                         "starting Quire (env QUIRE_COMPAT_BOOTSTRAP)")
    group.addoption("--kafka-bootstrap", default=None, metavar="HOST:PORT",
                    help="the Apache Kafka the differential runs compare with, instead of starting "
                         f"one (env {KAFKA_BOOTSTRAP_ENV})")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "compat(suite, client): a compat scenario, grouped in the summary table")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        mark = item.get_closest_marker("compat")
        if mark is None:
            continue
        client = mark.kwargs.get("client", "?")
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("target") == "cluster":
            client = f"{client} @cluster"
        _RESULTS.label(item.nodeid, mark.kwargs.get("suite", "?"), client)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    allowed = [str(v) for k, v in report.user_properties if k == _ALLOWED_KEY]
    _RESULTS.record(report.nodeid, report.when, report.outcome, allowed)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = _RESULTS.render()
    if lines:
        terminalreporter.section("compat: unchanged clients and differential runs vs Apache Kafka")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def external(pytestconfig: pytest.Config) -> str | None:
    """The --bootstrap address when the user points the suite at their own deployment."""
    return external_bootstrap(pytestconfig.getoption("--bootstrap"))


@pytest.fixture(scope="session")
def quire_standalone_target(external: str | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    if external:
        yield Target("external", external)
        return
    from compat_tests.support.targets import quire_standalone

    with quire_standalone(tmp_path_factory.mktemp("compat-standalone") / "data") as gw:
        yield Target("standalone", gw.bootstrap)


@pytest.fixture(scope="session")
def quire_cluster_target(external: str | None, request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    if external:
        yield Target("external", external)
        return
    from compat_tests.support.targets import QuireCluster

    zk = request.getfixturevalue("zookeeper")
    cluster = QuireCluster(zk.url(), tmp_path_factory.mktemp("compat-cluster"))
    try:
        cluster.start()
        yield Target("cluster", cluster.bootstrap)
    finally:
        cluster.stop()


@pytest.fixture
def target(request: pytest.FixtureRequest, external: str | None) -> Target:
    """Quire standalone by default; `@pytest.mark.parametrize("target", ["standalone",
    "cluster"], indirect=True)` runs a scenario on both (once when --bootstrap is given)."""
    kind = getattr(request, "param", "standalone")
    if kind == "cluster":
        if external:
            pytest.skip("--bootstrap given: the standalone variant already ran against it")
        return request.getfixturevalue("quire_cluster_target")
    return request.getfixturevalue("quire_standalone_target")


@pytest.fixture(scope="session")
def apache_kafka(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A single-node Apache Kafka 4.x (KRaft) for the session, or --kafka-bootstrap."""
    import os

    given = pytestconfig.getoption("--kafka-bootstrap") or os.environ.get(KAFKA_BOOTSTRAP_ENV)
    if given:
        yield Target("kafka", given)
        return
    if shutil.which("java") is None:
        pytest.skip("java is not installed: no Apache Kafka to compare with")
    from compat_tests.support.apache_kafka import start_apache_kafka

    kafka = start_apache_kafka(Path(tmp_path_factory.mktemp("apache-kafka")))
    try:
        yield Target("kafka", kafka.bootstrap)
    finally:
        kafka.stop()


@pytest.fixture
def differences(request: pytest.FixtureRequest) -> Differences:
    """Compare Quire's and Kafka's observations; call `.verify()` at the end of the test."""
    node = request.node

    def on_allowed(diff_id: str) -> None:
        node.user_properties.append((_ALLOWED_KEY, diff_id))

    return Differences(node.originalname.removeprefix("test_"), on_allowed)
