"""Disagreements that rest on KAI's broken node accounting, kept as data with KAI's own figures.

`tests/data/kai-oracle/books/` holds disagreements of the set and of unseen seeds cut down to
three or four jobs (`scripts/kai-diff first`, then `minimize --placements`; a 500-node one, too
slow to minimize, only cut at a preemptor) and decided by kai-oracle with
its final node figures (`--repeat 3 --all-tasks --node-resources`; docs/reclaim.md, "KAI's node
accounting, checked against its own placements"). Each must still differ from shoal, and KAI's
own final figures must break the accounting its own placements give on a node where a pod that
shoal and KAI place differently lands: the difference is KAI deciding on node figures its own
placements contradict, which shoal does not copy. A file on which shoal starts to agree, or
whose KAI figures add up, fails here: then it is no longer this artefact.
"""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path

import pytest

from shoal.conformance import kai_books, runner
from shoal.conformance.loader import Scenario

BOOKS = Path(__file__).resolve().parents[1] / "data" / "kai-oracle" / "books"


def _differing_nodes(sc: Scenario) -> set[str]:
    """The nodes where a pod lands whose status or node differs between KAI and shoal."""
    return {n for kai, got in runner.differing_tasks(sc).values() for n in (kai[1], got[1]) if n}


@pytest.mark.parametrize("path", sorted(BOOKS.glob("*.yaml.gz")), ids=lambda p: p.name.removesuffix(".yaml.gz"))
def test_the_difference_lands_where_kais_own_books_break(path: Path) -> None:
    sc = runner.load(path)
    assert sc.data["oracle"].get("deterministic") is True  # no Go map-order tie in the way
    result = runner.run(sc)
    assert result.outcome == "failed", f"{sc.id}: shoal now agrees with KAI ({result.outcome})"
    breaks = kai_books.node_accounting_breaks(sc)
    broken = {b.node for b in breaks}
    assert broken & _differing_nodes(sc), f"{sc.id}: no broken node where the decisions differ: {breaks}"


def test_the_artefact_files_are_there() -> None:
    assert len(list(BOOKS.glob("*.yaml.gz"))) == 9


def _with_gpus(sc: Scenario, node: str, gpus: int) -> Scenario:
    """`sc` with `node` holding `gpus` GPUs (in the node list and in the derived block alike)."""
    data = copy.deepcopy(sc.data)
    for n in data["nodes"]:
        if n["name"] == node:
            n["gpus"] = gpus
    for key in ("allocatable", "capacity"):
        data["derived"]["nodes"][node][key]["gpus"] = gpus
    return runner.parse(data, sc.id)


def test_r500_s679_over_eviction_is_kais_one_gpu_drift_on_node18() -> None:
    """r500-s679 reclaim (unseen seeds 675-686, 500 nodes), cut at its 51st preemptor `pend-13`,
    where shoal starts to evict more than KAI (docs/reclaim.md). KAI's books lose one GPU on node18
    (from the 43rd preemptor on). Given node18 as KAI's books read it - its GPUs less the gap -
    shoal makes exactly KAI's Evict and Pipeline calls, and the pods still placed differently
    only trade nodes within one job (the same nodes, other pod names): the extra evictions are
    the search's answer to the GPU KAI's books lost, not a rule shoal lacks."""
    sc = runner.load(BOOKS / "r500-s679-reclaim-cut-node18-drift.yaml.gz")
    kai_calls = sc.data["expected"]["max_cache_calls_per_session"]
    # the over-eviction, on the true node
    assert runner.cache_calls(runner.decide(sc))["evictions"] > kai_calls["evictions"]
    [drift] = kai_books.node_accounting_breaks(sc)
    assert drift.node == "node18" and drift.gap >= 1
    as_kai_reads = _with_gpus(sc, drift.node, drift.gpus - int(drift.gap))
    ssn = runner.decide(as_kai_reads)
    assert runner.cache_calls(ssn) == kai_calls
    differ = runner.differing_tasks(as_kai_reads, ssn)
    assert len({uid.rsplit("-", 1)[0] for uid in differ}) <= 1
    assert Counter(kai[1] for kai, _ in differ.values()) == Counter(got[1] for _, got in differ.values())
