"""Durations (Go syntax plus days and weeks, or bare seconds): the one parser every layer uses."""

from __future__ import annotations

import pytest

from shoal.model.durations import parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("0", 0.0, id="zero"),
    pytest.param("0s", 0.0, id="zero seconds"),
    pytest.param("90s", 90.0, id="seconds"),
    pytest.param("10m", 600.0, id="minutes"),
    pytest.param("1h30m", 5400.0, id="compound"),
    pytest.param("1.5h", 5400.0, id="fraction of an hour"),
    pytest.param("500ms", 0.5, id="milliseconds"),
    pytest.param("2d", 172800.0, id="days, for trace files"),
    pytest.param("1w", 604800.0, id="weeks, for trace files"),
    pytest.param("42", 42.0, id="bare number is seconds"),
    pytest.param(" 0.25 ", 0.25, id="surrounding blanks are ignored"),
    pytest.param(7, 7.0, id="a YAML number is seconds"),
    pytest.param("-5m", -300.0, id="negative (callers decide whether it is allowed)"),
])
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", [
    pytest.param("10x", id="unknown unit"),
    pytest.param("m", id="unit without a number"),
    pytest.param("1h-5m", id="sign inside"),
    pytest.param("--5m", id="two signs"),
    pytest.param("ten minutes", id="words"),
    pytest.param("", id="empty"),
    pytest.param(True, id="a boolean"),
])
def test_bad_durations_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)
