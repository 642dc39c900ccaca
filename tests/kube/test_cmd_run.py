"""`shoal run` argument handling that needs no cluster: durations, config and kubeconfig errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.cli.cmd_run import parse_duration
from shoal.cli.main import main


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("1s", 1.0, id="seconds"),
    pytest.param("500ms", 0.5, id="milliseconds"),
    pytest.param("2m", 120.0, id="minutes"),
    pytest.param("0.25", 0.25, id="bare number is seconds"),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", [pytest.param("soon", id="word"), pytest.param("1h", id="hours unsupported")])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(("config", "needle"), [
    pytest.param("tiers:\n- plugins:\n  - name: nosuch\n", "unknown plugin 'nosuch'", id="unknown plugin"),
    pytest.param("actions: allocate, dance\n", "unknown action", id="unknown action"),
])
def test_bad_config_fails_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str,
                                   needle: str) -> None:
    cfg = tmp_path / "scheduler.yaml"
    cfg.write_text(config)
    assert main(["run", "--config", str(cfg), "--kubeconfig", str(tmp_path / "none")]) == 2
    assert needle in capsys.readouterr().out


def test_missing_kubeconfig_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--kubeconfig", str(tmp_path / "none")]) == 2
    out = capsys.readouterr().out
    assert out.startswith("shoal run: cannot use kubeconfig") and "not found" in out
