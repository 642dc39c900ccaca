"""`scripts/kai-unseen`: the unseen-seed agreement measurement, driven by a stand-in oracle.

The stand-in answers `gen` with a copy of one of the test set's KAI-decided scenarios and `run`
by copying its input to `--out` (the decisions are already in it), so the whole pipeline -
generation, scoring, ten-run re-decision of the disagreeing ones, the final score - runs without
KAI."""

from __future__ import annotations

import gzip
import os
import stat
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kai-unseen"
SET = ROOT / "tests" / "data" / "kai-oracle"


def _fake_oracle(tmp: Path, source: Path) -> Path:
    scenario = tmp / "source.yaml"
    scenario.write_bytes(gzip.decompress(source.read_bytes()))
    oracle = tmp / "oracle"
    oracle.write_text(f"""#!/usr/bin/env bash
set -eu
case "$1" in
  gen) cat '{scenario}' ;;
  run) src="$2"; shift 2; out=""
       rep=""
       while [ $# -gt 0 ]; do
         case "$1" in --out) out="$2"; shift 2 ;; --repeat) rep="$2"; shift 2 ;; *) shift ;; esac
       done
       echo "run $(basename "$src") repeat $rep" >> '{tmp}/calls'
       cp "$src" "$out/$(basename "$src")" ;;
esac
""")
    oracle.chmod(oracle.stat().st_mode | stat.S_IXUSR)
    return oracle


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAI_ORACLE": ""}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, check=False,
                          timeout=600)


def _listed() -> set[str]:
    known = yaml.safe_load((SET / "known_disagreements.yaml").read_text())
    return {k.removeprefix("gen.random-") for k in known}


def _pick(agreeing: bool) -> Path:
    listed = _listed()
    for path in sorted((SET / "random").glob("r20-*.yaml.gz")):
        size, seed, kind = path.name.removesuffix(".yaml.gz").split("-", 2)
        if kind == "full_cycle":
            continue
        if (f"n{size[1:]}-{seed}-{kind}" in listed) != agreeing:
            return path
    raise AssertionError("no such 20-node scenario in the set")


def _measure(tmp: Path, agreeing: bool, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the script with the stand-in oracle answering an (agreeing or not) set scenario; the
    run must succeed. Returns it and its output directory."""
    oracle = _fake_oracle(tmp, _pick(agreeing))
    out = tmp / "u"
    res = _run("--oracle", str(oracle), *args, "--out", str(out))
    assert res.returncode == 0, res.stderr
    return res, out


def test_agreeing_scenarios_score_full_agreement(tmp_path: Path) -> None:
    res, out = _measure(tmp_path, True, "--first-seed", "900", "--per-size", "1")
    assert sorted(p.name for p in (out / "random").iterdir()) == [
        "r100-s902-reclaim.yaml.gz", "r20-s900-reclaim.yaml.gz", "r50-s901-reclaim.yaml.gz"]
    assert "3 scenarios, 3 agree (100.0 %)" in res.stdout
    assert not list((out / "r10").glob("*.yaml"))  # nothing to decide again
    calls = (tmp_path / "calls").read_text().split("\n")
    assert sum("run" in c for c in calls) == 3


def test_disagreeing_scenarios_are_decided_again_and_rescored(tmp_path: Path) -> None:
    res, out = _measure(tmp_path, False, "--first-seed", "10", "--per-size", "1")
    assert "3 scenarios, 0 agree (0.0 %), 3 differ" in res.stdout
    assert len(list((out / "r10").glob("*.yaml"))) == 3
    assert len(list((out / "final").iterdir())) == 3
    # Resuming keeps what is there: no scenario is generated or decided again.
    before = (tmp_path / "calls").read_text()
    again = _run("--oracle", str(tmp_path / "oracle"), "--first-seed", "10", "--per-size", "1",
                 "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "calls").read_text() == before


def test_reruns_choose_how_often_the_disagreeing_are_decided_again(tmp_path: Path) -> None:
    res, out = _measure(tmp_path, False, "--first-seed", "20", "--per-size", "1", "--sizes", "20 50",
                        "--reruns", "30")
    calls = [c for c in (tmp_path / "calls").read_text().split("\n") if c]
    assert sorted(c.split(" repeat ")[1] for c in calls) == ["3", "3", "30", "30"]
    assert len(list((out / "r30").glob("*.yaml"))) == 2
    assert not (out / "r10").exists()
    assert (out / "eval30.txt").is_file()
    assert "30 runs for the disagreeing:" in res.stdout


def test_bad_arguments_are_refused_with_a_reason(tmp_path: Path) -> None:
    oracle = _fake_oracle(tmp_path, _pick(agreeing=True))
    cases = [
        (["--first-seed", "1200", "--oracle", str(oracle)], "belong to the test set"),
        (["--first-seed", "abc", "--oracle", str(oracle)], "must be a number"),
        (["--first-seed", "5", "--oracle", str(tmp_path / "missing")], "pass --oracle"),
        (["--frobnicate"], "unknown argument --frobnicate"),
        (["--first-seed", "5", "--oracle", str(oracle), "--sizes", "200 x"], "node counts above 0"),
        (["--first-seed", "5", "--oracle", str(oracle), "--kinds", "reclaim evict"], "got 'evict'"),
        (["--first-seed", "5", "--oracle", str(oracle), "--kinds", " "], "names no action kind"),
        (["--first-seed", "5", "--oracle", str(oracle), "--reruns", "1"], "2 or more"),
        (["--first-seed", "5", "--oracle", str(oracle), "--reruns", "many"], "got 'many'"),
    ]
    for args, message in cases:
        res = _run(*args)
        assert res.returncode == 2, (args, res.stdout)
        assert message in res.stderr, (args, res.stderr)


def test_sizes_choose_the_node_counts(tmp_path: Path) -> None:
    res, out = _measure(tmp_path, True, "--first-seed", "700", "--per-size", "2", "--sizes", "200 500")
    assert sorted(p.name for p in (out / "random").iterdir()) == [
        "r200-s700-reclaim.yaml.gz", "r200-s701-preempt.yaml.gz",
        "r500-s702-reclaim.yaml.gz", "r500-s703-preempt.yaml.gz"]
    assert "4 scenarios, 4 agree (100.0 %)" in res.stdout


def test_kinds_choose_the_actions_in_turn(tmp_path: Path) -> None:
    _res, out = _measure(tmp_path, True, "--first-seed", "800", "--per-size", "3", "--sizes", "500",
                         "--kinds", "reclaim allocate")
    assert sorted(p.name for p in (out / "random").iterdir()) == [
        "r500-s800-reclaim.yaml.gz", "r500-s801-allocate.yaml.gz", "r500-s802-reclaim.yaml.gz"]
