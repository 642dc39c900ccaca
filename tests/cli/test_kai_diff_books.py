"""`scripts/kai-diff books`: KAI's final node accounting checked, driven by a stand-in oracle that
answers with a decided scenario (tests/core/test_kai_books.py) and records how it was asked."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import yaml

from core.test_kai_books import scenario

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kai-diff"


def _stand_in(tmp: Path, resources: dict[str, tuple[float, float]], fail: bool = False) -> Path:
    answer = tmp / "answer.yaml"
    answer.write_text(yaml.safe_dump(scenario(resources), sort_keys=False))
    oracle = tmp / "oracle"
    oracle.write_text(f"""#!/usr/bin/env bash
echo "$@" >> '{tmp}/calls'
{"echo 'rejected: unknown field' >&2; exit 2" if fail else f"cat '{answer}'"}
""")
    oracle.chmod(oracle.stat().st_mode | stat.S_IXUSR)
    return oracle


def _books(tmp: Path, oracle: Path) -> subprocess.CompletedProcess[str]:
    source = tmp / "in.yaml"
    source.write_text(yaml.safe_dump(scenario(None), sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(SCRIPT), "books", "--oracle", str(oracle), str(source)],
                          capture_output=True, text=True, env=env, check=False, timeout=300)


def test_broken_books_are_listed_with_the_nodes_where_placements_differ(tmp_path: Path) -> None:
    res = _books(tmp_path, _stand_in(tmp_path, {"node0": (0, 2), "node1": (0, -8)}))
    assert res.returncode == 0, res.stderr
    # shoal leaves the shares on node0 (nothing to reclaim); KAI's answer has them on node1.
    assert "in.yaml: KAI's node accounting breaks on 1 node(s), up to 9 GPUs; 1 of them hold" in res.stdout
    assert "node1 (4 GPUs): KAI ends with idle 0, releasing -8; its 3 pods there leave 1 to 2 free" in res.stdout
    call = (tmp_path / "calls").read_text()
    assert "--node-resources" in call and "--all-tasks" in call and "--repeat 1" in call


def test_books_that_add_up_are_said_to(tmp_path: Path) -> None:
    res = _books(tmp_path, _stand_in(tmp_path, {"node0": (0, 2), "node1": (2, 0)}))
    assert res.returncode == 0, res.stderr
    assert "in.yaml: KAI's node accounting adds up on every node" in res.stdout


def test_a_refused_scenario_is_named_and_fails_the_run(tmp_path: Path) -> None:
    res = _books(tmp_path, _stand_in(tmp_path, {}, fail=True))
    assert res.returncode == 1
    assert "in.yaml: the oracle did not decide it: rejected: unknown field" in res.stdout
