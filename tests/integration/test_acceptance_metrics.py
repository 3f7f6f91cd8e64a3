"""The figures the alert on result acceptance reads (deploy/prometheus/podium.rules.yml,
PodiumResultAcceptanceLow): every match answered 200 counts in ``podium_matches_accepted``,
and every 5xx in ``podium_results_rejected{status}``, a bug's 500 included."""

from __future__ import annotations

import pytest

from podium import metrics
from tests.integration.conftest import Api

CONFIG_KINDS = ("embedded",)  # the counting is the API's, the same on every backend


def sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_accepted_matches_and_refusals_are_counted_apart(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    accepted = sample("podium_matches_accepted_total")
    assert (await api.submit("m1", [("a", 1), ("b", 2)])).status_code == 200
    assert (await api.submit("m1", [("a", 1), ("b", 2)])).status_code == 200  # a retry
    assert sample("podium_matches_accepted_total") == accepted + 2

    refused = sample("podium_results_rejected_total", status="422")
    assert (await api.submit("m2", [("a", -5)])).status_code == 422
    assert sample("podium_results_rejected_total", status="422") == refused + 1

    async def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    failed = sample("podium_results_rejected_total", status="500")
    monkeypatch.setattr(api.podium.matches, "record_all", broken)  # what the route calls
    # The app answers 500 (problems.py), then the test transport raises the error again.
    with pytest.raises(RuntimeError, match="a bug"):
        await api.submit("m3", [("a", 1)])
    assert sample("podium_results_rejected_total", status="500") == failed + 1
    assert sample("podium_matches_accepted_total") == accepted + 2
