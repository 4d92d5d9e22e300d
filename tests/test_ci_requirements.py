"""Missing test data or packages: a skip on a developer machine, a failure in CI."""
from __future__ import annotations

import pytest

from .conftest import in_ci, skip_or_fail


@pytest.mark.parametrize("value, expected", [("", False), ("0", False), ("false", False), ("1", True), ("true", True)])
def test_in_ci_reads_the_ci_variable(monkeypatch, value, expected):
    monkeypatch.setenv("CI", value)
    assert in_ci() is expected


def test_missing_requirement_fails_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        skip_or_fail("data missing")


def test_missing_requirement_skips_elsewhere(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="data missing"):
        skip_or_fail("data missing")
