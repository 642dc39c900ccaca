"""`scripts/kai-diff first`: where shoal's and KAI's preemptor searches part, driven by a stand-in
oracle.

The stand-in decides nothing itself: it answers every cut with the source scenario's `derived`
block and an expectation that one chosen preemptor (the "marked" job) stays Pending, so shoal and
the stand-in disagree exactly on the cuts that still hold the marked job. The bisection must land
on it, whatever its place in shoal's order."""

from __future__ import annotations

import gzip
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shoal.conformance import runner

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kai-diff"
SOURCE = ROOT / "tests" / "data" / "kai-oracle" / "random" / "r50-s1085-reclaim.yaml.gz"


def _shoal(source: Path) -> tuple[list[str], list[str]]:
    """From one shoal session on `source`: the preemptors in the order tried, and those it found
    room for, in that order (a marked job must be one of these to differ from shoal)."""
    sc = runner.load(source)
    ssn = runner.decide(sc)
    order = [ssn.jobs[uid].pg.name for action, uid in ssn.decisions.attempts if action == sc.kind]
    placed = [n for n in order if any(t.status.title == "Pipelined" for t in ssn.jobs[n].tasks)]
    return order, placed


def _stand_in(tmp: Path, source: Path, marked: str) -> Path:
    original = tmp / "source.yaml"
    original.write_bytes(gzip.decompress(source.read_bytes()))
    body = tmp / "stand_in.py"
    body.write_text(f"""
import sys, yaml
src = yaml.safe_load(open(sys.argv[2]))
derived = yaml.safe_load(open({str(original)!r}))["derived"]
src["derived"] = derived
names = {{j["name"] for j in src["jobs"]}}
tasks = {{}}
for j in src["jobs"]:
    if j["name"] == {marked!r}:
        for i, t in enumerate(j["tasks"]):
            tasks[t.get("name") or f"{{j['name']}}-{{i}}"] = {{"status": "Pending"}}
src["expected"] = {{"tasks": tasks}}
src["oracle"] = {{"deterministic": True}}
with open({str(tmp / "calls")!r}, "a") as f:
    f.write(str(len(src["jobs"])) + "\\n")
print(yaml.safe_dump(src, sort_keys=False))
""")
    oracle = tmp / "oracle"
    oracle.write_text(f"#!/usr/bin/env bash\nexec {sys.executable} {body} \"$@\"\n")
    oracle.chmod(oracle.stat().st_mode | stat.S_IXUSR)
    return oracle


def _first(oracle: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(SCRIPT), "first", "--oracle", str(oracle), str(SOURCE), str(out)],
                          capture_output=True, text=True, env=env, check=False, timeout=600)


def test_the_attempt_order_lists_every_preemptor_tried() -> None:
    order, _ = _shoal(SOURCE)
    sc = runner.load(SOURCE)
    pending = {j["name"] for j in sc.data["jobs"] if all(t.get("state") == "Pending" for t in j["tasks"])}
    assert len(order) >= 3
    assert len(set(order)) == len(order)  # each tried once
    assert set(order) <= pending


@pytest.mark.parametrize("place", [0, 2, -1])
def test_the_bisection_lands_on_the_preemptor_where_they_part(tmp_path: Path, place: int) -> None:
    order, placed = _shoal(SOURCE)
    assert len(placed) >= 3
    marked = placed[place]
    k = order.index(marked) + 1
    oracle = _stand_in(tmp_path, SOURCE, marked)
    res = _first(oracle, tmp_path / "cut.yaml")
    assert res.returncode == 0, res.stderr
    assert f"part at preemptor {k} of {len(order)}, {marked} " in res.stdout
    cut = yaml.safe_load((tmp_path / "cut.yaml").read_text())
    kept = {j["name"] for j in cut["jobs"]}
    assert marked in kept and not kept & set(order[k:])  # the preemptors tried later are cut
    assert set(order[:k]) <= kept
    assert f"{marked}-0: KAI Pending on None, shoal " in res.stdout
    # A bisection, not a walk: about log2(n) cuts besides the whole scenario.
    calls = (tmp_path / "calls").read_text().split()
    assert len(calls) <= len(order).bit_length() + 2


def test_agreement_on_the_whole_scenario_is_reported_and_nothing_written(tmp_path: Path) -> None:
    oracle = _stand_in(tmp_path, SOURCE, "no-such-job")
    res = _first(oracle, tmp_path / "cut.yaml")
    assert res.returncode == 1
    assert "agree on the whole scenario" in res.stderr
    assert not (tmp_path / "cut.yaml").exists()
