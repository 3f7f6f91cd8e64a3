"""The alerting rules shipped in ``deploy/prometheus``: valid, their own unit tests passing
under ``promtool`` (Debian's ``prometheus`` package; CI installs it), and every metric they
name one that podium exports, so a renamed metric cannot leave an alert that never fires."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from podium import metrics
from tests.conftest import REQUIRE

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if REQUIRE:
            pytest.fail("promtool is not installed and PODIUM_REQUIRE_SERVICES=1")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def test_the_rules_are_valid_and_their_tests_pass() -> None:
    tool = promtool()
    for args in (
        ["check", "rules", "podium.rules.yml"],
        ["test", "rules", "podium.rules.test.yml"],
    ):
        done = subprocess.run([tool, *args], cwd=RULES, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def exported() -> set[str]:
    """Every series name podium's registry exposes, whether or not it has a value yet:
    counters with ``_total``, histograms with ``_bucket``, ``_sum`` and ``_count``."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    return {
        family.name + suffix
        for family in metrics.REGISTRY.collect()
        for suffix in suffixes.get(family.type, ("",))
    }


def test_every_metric_the_rules_name_is_exported() -> None:
    groups = yaml.safe_load((RULES / "podium.rules.yml").read_text())["groups"]
    named = {
        m
        for g in groups
        for rule in g["rules"]
        for m in re.findall(r"podium_[a-z_]+", rule["expr"])
    }
    assert named, "no rule names a podium metric"
    assert named <= exported(), named - exported()
