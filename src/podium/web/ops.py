"""The figures behind the ops page: the process's Prometheus registry as plain JSON.

The page polls this once a second and works out rates and percentiles itself, from the
differences between two polls, the way Prometheus's ``rate`` and ``histogram_quantile``
would. So this endpoint only reports the raw, cumulative values, for every family in the
registry: a metric added to ``podium.metrics`` later shows up on the page unasked.
"""

from __future__ import annotations

import math
import time

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from pydantic import BaseModel


class Series(BaseModel):
    labels: dict[str, str]
    value: float


class HistogramSeries(BaseModel):
    labels: dict[str, str]
    # Cumulative counts by upper bound, in increasing order; ``le`` null is +Inf.
    buckets: list[tuple[float | None, float]]
    count: float
    sum: float


class Family(BaseModel):
    name: str
    help: str
    series: list[Series]


class HistogramFamily(BaseModel):
    name: str
    help: str
    series: list[HistogramSeries]


class OpsOut(BaseModel):
    now: float
    counters: list[Family]
    gauges: list[Family]
    histograms: list[HistogramFamily]


def snapshot(registry: CollectorRegistry) -> OpsOut:
    out = OpsOut(now=time.time(), counters=[], gauges=[], histograms=[])
    for family in registry.collect():
        if family.type == "counter":
            out.counters.append(_simple(family, family.name + "_total"))
        elif family.type == "gauge":
            out.gauges.append(_simple(family, family.name))
        elif family.type == "histogram":
            out.histograms.append(_histogram(family))
        # summaries, info and the like: nothing in podium exports them yet
    return out


def _simple(family: Metric, sample_name: str) -> Family:
    series = [
        Series(labels=dict(s.labels), value=s.value)
        for s in family.samples
        if s.name == sample_name
    ]
    return Family(name=family.name, help=family.documentation, series=series)


def _histogram(family: Metric) -> HistogramFamily:
    by_labels: dict[tuple[tuple[str, str], ...], HistogramSeries] = {}

    def series(labels: dict[str, str]) -> HistogramSeries:
        key = tuple(sorted(labels.items()))
        if key not in by_labels:
            by_labels[key] = HistogramSeries(labels=labels, buckets=[], count=0, sum=0)
        return by_labels[key]

    for s in family.samples:
        labels = {k: v for k, v in s.labels.items() if k != "le"}
        if s.name == family.name + "_bucket":
            le = float(s.labels["le"])
            series(labels).buckets.append((None if math.isinf(le) else le, s.value))
        elif s.name == family.name + "_count":
            series(labels).count = s.value
        elif s.name == family.name + "_sum":
            series(labels).sum = s.value
    for h in by_labels.values():
        h.buckets.sort(key=lambda b: math.inf if b[0] is None else b[0])
    return HistogramFamily(
        name=family.name, help=family.documentation, series=list(by_labels.values())
    )
