"""`shoal run` argument handling that needs no cluster: config and kubeconfig errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.cli.main import main


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
