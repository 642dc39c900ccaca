"""Disagreements that rest on KAI's broken node accounting, kept as data with KAI's own figures.

`tests/data/kai-oracle/books/` holds disagreements of the set and of unseen seeds cut down to
three or four jobs (`scripts/kai-diff first`, then `minimize --placements`) and decided by kai-oracle with
its final node figures (`--repeat 3 --all-tasks --node-resources`; docs/reclaim.md, "KAI's node
accounting, checked against its own placements"). Each must still differ from shoal, and KAI's
own final figures must break the accounting its own placements give on a node where a pod that
shoal and KAI place differently lands: the difference is KAI deciding on node figures its own
placements contradict, which shoal does not copy. A file on which shoal starts to agree, or
whose KAI figures add up, fails here: then it is no longer this artefact.
"""

from __future__ import annotations

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
    assert len(list(BOOKS.glob("*.yaml.gz"))) == 8
