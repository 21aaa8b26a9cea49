"""Running one scripted scenario against Quire and Apache Kafka and comparing the results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compat_tests.support.allowlist import Differences
from compat_tests.support.targets import Target

Observations = dict[str, Any]


def run_both(differences: Differences, quire: Target, kafka: Target,
             scenario: Callable[[str], Observations]) -> tuple[Observations, Observations]:
    """Run `scenario(bootstrap)` on Kafka first (the reference), then on Quire, compare every
    observation and fail on differences not in the allow-list."""
    expected = scenario(kafka.bootstrap)
    got = scenario(quire.bootstrap)
    differences.compare_all(got, expected)
    differences.verify()
    return got, expected
