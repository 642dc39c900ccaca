"""The differential set: scenarios generated and decided by KAI's own scheduler code.

`tests/data/kai-oracle/` holds scenarios made by kai-oracle's generator (random queue trees,
gangs, fractions and priorities from 20 to 500 nodes; KAI's "reclaim large jobs" shapes) with
KAI's decisions written into `expected` by `kai-oracle run --repeat 3 --all-tasks` (decisions that
changed between the three runs - Go map order - are left out). `scripts/gen-kai-oracle-set`
regenerates them. Nodes may differ only between nodes KAI cannot tell apart (see
`shoal.conformance.runner.node_equivalence_problems`).

Every scenario must agree with KAI, except those in `known_disagreements.yaml`, each with what
differs; a listed scenario that agrees fails the test too, so the list only shrinks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shoal.conformance import runner

SET = Path(__file__).resolve().parents[1] / "data" / "kai-oracle"
KNOWN: dict[str, str] = yaml.safe_load((SET / "known_disagreements.yaml").read_text()) or {}


def _files(sub: str) -> list[Path]:
    return sorted((SET / sub).glob("*.yaml.gz"))


def _check(path: Path) -> None:
    sc = runner.load(path)
    result = runner.run(sc)
    assert result.outcome in ("passed", "failed"), f"{sc.id}: {result.outcome}: {result.message}"
    if sc.id in KNOWN:
        assert result.outcome == "failed", f"{sc.id} now agrees with KAI: remove it from known_disagreements.yaml"
    else:
        assert result.outcome == "passed", f"{sc.id} disagrees with KAI: {result.message}"


def _random(large: bool) -> list[Path]:
    return [p for p in _files("random") if p.name.startswith("r500-") == large]


@pytest.mark.parametrize("path", _random(False), ids=lambda p: p.name.removesuffix(".yaml.gz"))
def test_random_scenario_agrees_with_kai(path: Path) -> None:
    _check(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", _random(True), ids=lambda p: p.name.removesuffix(".yaml.gz"))
def test_random_500_node_scenario_agrees_with_kai(path: Path) -> None:
    """The 500-node random scenarios: ~20 s of shoal's CPU each."""
    _check(path)


@pytest.mark.parametrize("path", _files("minimized"), ids=lambda p: p.name.removesuffix(".yaml.gz"))
def test_minimized_regression_agrees_with_kai(path: Path) -> None:
    """Disagreements found on the set, cut down to the few jobs and nodes that show them, fixed."""
    _check(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", _files("large"), ids=lambda p: p.name.removesuffix(".yaml.gz"))
def test_reclaim_large_agrees_with_kai(path: Path) -> None:
    _check(path)


def test_the_set_is_present_and_the_list_names_real_scenarios() -> None:
    ids = {runner.load(p).id for p in _files("random") + _files("large") + _files("minimized")}
    assert len(_files("random")) >= 40
    assert not set(KNOWN) - ids, f"known_disagreements.yaml names unknown scenarios: {set(KNOWN) - ids}"


def test_an_over_eviction_is_reported_first_whatever_else_differs() -> None:
    """The result message keeps only the first problems; an Evict count above KAI's most must be
    among them (r100-s1187: shoal consolidates a gang KAI's drifted bookkeeping refuses, and
    more than six jobs differ besides)."""
    path = SET / "random" / "r100-s1187-consolidation.yaml.gz"
    result = runner.run(runner.load(path))
    assert result.outcome == "failed"
    first = result.message.split("; ")[0]
    assert first.endswith("evictions > allowed 68"), result.message
