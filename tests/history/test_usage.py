"""The usage history: exact integrals of piecewise-constant allocation, decay, windows (both integrations)."""

from __future__ import annotations

import math

import pytest

from shoal.history.usage import UsageHistory, UsageParams, UsageStore, allocation_sample

CAP = (8000.0, 64000.0, 1e12)


def store(**params: object) -> UsageHistory:
    return UsageHistory(UsageParams(**params))  # type: ignore[arg-type]


def test_is_a_usage_store() -> None:
    s: UsageStore = store()
    s.record(0, {"q": (1000.0, 0.0, 0.0)}, CAP)
    assert s.usage(10)["q"]["gpu"] == pytest.approx(1 / 8)


@pytest.mark.parametrize(("samples", "now", "params", "want"), [
    pytest.param([(0, 4000)], 100, {}, 0.5, id="constant-half"),
    pytest.param([(0, 8000), (50, 0)], 100, {}, 0.5, id="full-then-idle-plain-average"),
    pytest.param([(0, 0), (50, 8000)], 100, {}, 0.5, id="idle-then-full-plain-average"),
    # With a half-life, recent use weighs more: half-life 50 s over [0, 100].
    pytest.param([(0, 0), (50, 8000)], 100, {"half_life": 50.0}, 2 / 3, id="recent-use-weighs-more"),
    pytest.param([(0, 8000), (50, 0)], 100, {"half_life": 50.0}, 1 / 3, id="old-use-decays"),
    pytest.param([(0, 8000), (50, 0)], 100, {"window": 50.0}, 0.0, id="sliding-window-forgets"),
    pytest.param([(0, 8000), (90, 0)], 100, {"window": 60.0, "window_type": "tumbling"}, 0.75,
                 id="tumbling-window-restarts-at-60"),
    pytest.param([(0, 0), (50, 8000)], 100, {"window": math.inf, "window_type": "tumbling", "half_life": 50.0},
                 2 / 3, id="tumbling without a window: the running integrals"),
    pytest.param([(0, 8000), (50, 0)], 100, {"window": math.inf, "window_type": "tumbling"}, 0.5,
                 id="tumbling without a window or half-life: plain average"),
])
def test_usage_share(samples: list[tuple[float, float]], now: float, params: dict[str, object],
                     want: float) -> None:
    s = store(**params)
    for t, gpu in samples:
        s.record(t, {"q": (gpu, 0.0, 0.0)}, CAP)
    assert s.usage(now)["q"]["gpu"] == pytest.approx(want)


def test_decay_matches_closed_form() -> None:
    h = 30.0
    s = store(half_life=h)
    s.record(0, {"a": (8000.0, 0.0, 0.0)}, CAP)
    s.record(60, {"a": (0.0, 0.0, 0.0), "b": (8000.0, 0.0, 0.0)}, CAP)
    u = s.usage(90)
    def integral(a: float, b: float) -> float:
        return h / math.log(2) * (0.5 ** ((90 - b) / h) - 0.5 ** ((90 - a) / h))
    total = integral(0, 90)
    assert u["a"]["gpu"] == pytest.approx(integral(0, 60) / total)
    assert u["b"]["gpu"] == pytest.approx(integral(60, 90) / total)
    assert u["a"]["gpu"] + u["b"]["gpu"] == pytest.approx(1.0)


def test_old_samples_are_dropped() -> None:
    s = store(window=10.0)
    for t in range(100):
        s.record(float(t), {"q": (1000.0, 0.0, 0.0)}, CAP)
    assert len(s.samples) <= 12


@pytest.mark.parametrize("params", [
    pytest.param({"window": 0.0}, id="zero-window"),
    pytest.param({"window_type": "cron"}, id="unknown-window-type"),
    pytest.param({"half_life": -1.0}, id="negative-half-life"),
])
def test_bad_params_are_refused(params: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        UsageParams(**params)  # type: ignore[arg-type]


def test_samples_must_not_go_back_in_time() -> None:
    s = store()
    s.record(10, {}, CAP)
    with pytest.raises(ValueError, match="older"):
        s.record(5, {}, CAP)


def test_usage_lowers_an_over_quota_share() -> None:
    """Two equal queues, one with past usage: the fresh one gets more of the surplus (kValue 1)."""
    from core.reclaim_world import World

    w = World().node("n0", 8).queue("q0", quota=0).queue("q1", quota=0)
    for q in ("q0", "q1"):
        w.job(f"{q}-big", q, gpus=1, tasks=8, min_member=1)
    w.snapshot.usage = {"q0": {"gpu": 0.9, "cpu": 0.0, "memory": 0.0}}
    shares = {name: q.fair_share[0] for name, q in w.run().session.queues.items()}
    assert shares["q1"] > shares["q0"]


def test_allocation_sample_rolls_up_to_departments() -> None:
    from core.reclaim_world import World

    w = World().node("n0", 8).node("n1", 8).queue("dep").queue("a", parent="dep").queue("b")
    w.job("ja", "a", gpus=2, nodes=["n0"]).job("jb", "b", gpus=1, tasks=2, nodes=["n1", "n1"]).job("wait", "a")
    allocated, capacity = allocation_sample(w.snapshot)
    assert {q: v[0] for q, v in allocated.items()} == {"a": 2000.0, "b": 2000.0, "dep": 2000.0}
    assert capacity[0] == 16000.0
    s = UsageHistory()
    s.record(0.0, allocated, capacity)
    assert s.usage(60.0)["dep"]["gpu"] == pytest.approx(2 / 16)


def test_decayed_usage_is_normalised_and_decays() -> None:
    u = store(window=math.inf, window_type="tumbling", half_life=100.0)
    u.record(0.0, {"a": (500.0, 0.0, 0.0)}, (1000.0, 1.0, 1.0))
    assert u.usage(100.0)["a"]["gpu"] == pytest.approx(0.5)
    u.record(100.0, {}, (1000.0, 1.0, 1.0))
    # after one idle half-life the queue's share of the decayed capacity drops to 1/3:
    # used 0.5*x*0.5 against capacity x*0.5 + x  (x = integral of one busy interval)
    assert u.usage(200.0)["a"]["gpu"] == pytest.approx(0.25 / 1.5)


@pytest.mark.parametrize(
    "times", [pytest.param([50.0, 120.0, 300.0], id="irregular"), pytest.param([300.0], id="one step")]
)
def test_running_integrals_match_the_samples(times: list[float]) -> None:
    """The two integrations agree where their windows do (none here)."""
    samples = store(window=10**9, half_life=100.0)
    running = store(window=math.inf, window_type="tumbling", half_life=100.0)
    allocs = [{"a": (300.0, 0.0, 0.0), "b": (600.0, 0.0, 0.0)}, {"a": (900.0, 0.0, 0.0)}, {}]
    t = 0.0
    for k, nxt in enumerate(times):
        for s in (samples, running):
            s.record(t, allocs[k % 3], (1000.0, 1.0, 1.0))
        t = nxt
    for q in ("a", "b"):
        assert running.usage(t + 40)[q]["gpu"] == pytest.approx(samples.usage(t + 40)[q]["gpu"], rel=1e-9)


@pytest.mark.parametrize("params", [
    pytest.param({"window": 300.0, "half_life": 100.0}, id="sliding with decay"),
    pytest.param({"window": 300.0}, id="sliding without decay"),
    pytest.param({"window": 250.0, "window_type": "tumbling", "half_life": 100.0}, id="tumbling"),
])
def test_export_and_restore_give_the_same_usage(params: dict[str, object]) -> None:
    import json

    a = store(**params)
    for t in range(0, 400, 7):
        a.record(float(t), {"x": (float(t % 3) * 1000, 0.0, 0.0), "y": (1000.0, 5.0, 0.0)}, CAP)
    b = UsageHistory.restore(a.params, json.loads(json.dumps(a.export())))
    for s in (a, b):
        s.record(420.0, {"x": (8000.0, 0.0, 0.0)}, CAP)
    for now in (430.0, 700.0):
        ua, ub = a.usage(now), b.usage(now)
        assert ua.keys() == ub.keys()
        for q in ua:
            assert ub[q]["gpu"] == pytest.approx(ua[q]["gpu"], rel=1e-9, abs=1e-12)


def test_a_long_window_is_compacted_for_export() -> None:
    a = store(window=10_000.0, half_life=5_000.0)
    for t in range(0, 20_000, 3):
        a.record(float(t), {"x": (8000.0 if (t // 900) % 2 else 0.0, 0.0, 0.0)}, CAP)
    state = a.export(max_marks=256)
    assert len(state["marks"]) == 256
    b = UsageHistory.restore(a.params, state)
    assert b.usage(20_000.0)["x"]["gpu"] == pytest.approx(a.usage(20_000.0)["x"]["gpu"], abs=0.01)


def test_kai_usage_params_defaults() -> None:
    p = UsageParams.from_kai({"halfLifePeriod": "10m"})
    assert (p.window, p.window_type, p.half_life) == (7 * 86400.0, "sliding", 600.0)
    assert UsageParams.from_kai({"halfLifePeriod": 0, "windowSize": "1h"}).half_life is None
    with pytest.raises(ValueError, match="usageParams"):
        UsageParams.from_kai({"windowSize": "soon"})
