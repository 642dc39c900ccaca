"""Where the forecast's run times come from."""

from __future__ import annotations

from shoal.visibility.runtimes import JobFacts, RuntimeEstimator, podgroup_facts, queue_defaults


def test_sources_in_order_annotation_learned_queue_default() -> None:
    est = RuntimeEstimator(default=3600.0, queue_defaults={"q": 600.0})
    key = ("PyTorchJob", "q")
    assert est.estimate(JobFacts(key, declared=120.0)) == (120.0, "annotation")
    assert est.estimate(JobFacts(key)) == (600.0, "queue-default")
    assert est.estimate(JobFacts(("Job", "other"))) == (3600.0, "default")
    for r in (100.0, 200.0, 300.0, 4000.0):
        est.observe(key, r)
    assert est.estimate(JobFacts(key)) == (300.0, "learned")  # median of four: the upper middle
    assert est.estimate(JobFacts(("Job", "q"))) == (600.0, "queue-default")  # other owner kind


def test_learned_remaining_time_is_conditional_on_elapsed() -> None:
    est = RuntimeEstimator()
    key = ("Job", "q")
    for r in (100.0, 200.0, 300.0, 1000.0, 2000.0):
        est.observe(key, r)
    assert est.estimate(JobFacts(key), elapsed=250.0) == (1000.0 - 250.0, "learned")
    value, _ = est.estimate(JobFacts(key), elapsed=5000.0)  # longer than every sample seen
    assert value == 2500.0


def test_an_overrun_declared_runtime_gets_more_time() -> None:
    est = RuntimeEstimator()
    assert est.estimate(JobFacts(("Job", "q"), declared=100.0), elapsed=400.0) == (200.0, "annotation")


def test_facts_from_objects() -> None:
    pg = {"metadata": {"name": "a", "ownerReferences": [{"kind": "PyTorchJob", "name": "x"}],
                       "annotations": {"shoal.dev/expected-runtime": "2h"}}}
    assert podgroup_facts("ns/a", pg, "q") == JobFacts(("PyTorchJob", "q"), 7200.0)
    assert podgroup_facts("pod:123", None, "q") == JobFacts(("Pod", "q"), None)
    bad = {"metadata": {"annotations": {"shoal.dev/expected-runtime": "soon"}}}
    assert podgroup_facts("ns/b", bad, "q").declared is None
    queues = [{"metadata": {"name": "q", "annotations": {"shoal.dev/default-runtime": "30m"}}},
              {"metadata": {"name": "r", "annotations": {"shoal.dev/default-runtime": "x"}}}]
    assert queue_defaults(queues) == {"q": 1800.0}


def test_export_restore_keeps_the_learned_samples_before_new_ones() -> None:
    est = RuntimeEstimator(window=4)
    for r in (100.0, 200.0, 300.0):
        est.observe(("Job", "q"), r)
    est.observe(("PyTorchJob", "p"), 50.0)
    state = est.export()
    assert state == [["Job", "q", [100.0, 200.0, 300.0]], ["PyTorchJob", "p", [50.0]]]
    heir = RuntimeEstimator(window=4)
    heir.observe(("Job", "q"), 400.0)
    heir.observe(("Job", "q"), 500.0)
    assert heir.restore(state) == 4
    assert heir.export()[0] == ["Job", "q", [200.0, 300.0, 400.0, 500.0]]  # the newest four
    assert heir.estimate(JobFacts(("Job", "q"))) == (400.0, "learned")
    assert heir.estimate(JobFacts(("PyTorchJob", "p"))) == (3600.0, "default")  # one sample: not enough
