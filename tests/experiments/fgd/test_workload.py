"""Arrival sequence, tuning and typical pods of the FGD experiment (reference/traces.md §3.1, §3.3)."""

from __future__ import annotations

from collections import Counter

import pytest

from shoal.experiments.fgd.streams import make_stream
from shoal.experiments.fgd.workload import TUNE_RATIO, build_arrivals, typical_pods
from shoal.sim.datafiles import PACKAGE_TRACES
from shoal.sim.loaders.openb import (
    NODE_FILE,
    OPENB_DIR,
    OpenbNode,
    OpenbPod,
    load_nodes,
    load_pods,
    pod_file,
)

TRACES = PACKAGE_TRACES  # the traces shipped with shoal (not $SHOAL_TRACES): what users get


def _load(workload: str) -> tuple[list[OpenbNode], list[OpenbPod]]:
    return load_nodes(TRACES / OPENB_DIR / NODE_FILE), load_pods(pod_file(TRACES, workload))


def test_typical_pods_of_default() -> None:
    """35 of the 91 pod groups cover 95% of the default list; frequencies are renormalised."""
    _, pods = _load("default")
    typical = typical_pods(pods)
    assert len(typical.freq) == 35
    assert typical.freq.sum() == pytest.approx(1.0)
    assert list(typical.freq) == sorted(typical.freq, reverse=True)


@pytest.mark.parametrize(
    ("workload", "rng", "tuned_up"),
    [
        pytest.param("default", "go", True, id="default (98% of capacity) is tuned up by resampling, go"),
        pytest.param("default", "py", True, id="default tuned up, python rng"),
        pytest.param("multigpu50", "go", False, id="multigpu50 (183%) is tuned down by deleting pods"),
    ],
)
def test_tuning_reaches_the_target(workload: str, rng: str, tuned_up: bool) -> None:
    nodes, pods = _load(workload)
    arrivals = build_arrivals(pods, nodes, make_stream(rng, 42))
    capacity = sum(n.gpu for n in nodes) * 1000
    total = sum(p.gpu_request_milli for p in arrivals.pods)
    assert total <= TUNE_RATIO * capacity
    assert total > TUNE_RATIO * capacity - 8000  # stops within one pod of the target
    names = Counter(p.name for p in arrivals.pods)
    if tuned_up:
        head = arrivals.pods[: len(pods)]
        assert sorted(p.name for p in head) == sorted(p.name for p in pods)  # a permutation first
        assert len(arrivals.pods) > len(pods)
    else:
        assert max(names.values()) == 1 and len(arrivals.pods) < len(pods)
    assert sorted(arrivals.node_priority) == list(range(len(nodes)))


def test_go_stream_gives_the_authors_sequence_length() -> None:
    """Seed 42 on default: 10,866 arrivals (this length reproduces the published curves)."""
    nodes, pods = _load("default")
    assert len(build_arrivals(pods, nodes, make_stream("go", 42)).pods) == 10866


def test_same_seed_same_arrivals_different_seed_differs() -> None:
    nodes, pods = _load("default")
    a = build_arrivals(pods, nodes, make_stream("go", 42))
    b = build_arrivals(pods, nodes, make_stream("go", 42))
    c = build_arrivals(pods, nodes, make_stream("go", 43))
    assert a == b
    assert a.pods[:50] != c.pods[:50]
