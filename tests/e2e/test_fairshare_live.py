"""Time-based fair share in `shoal run`: KAI's two-queue oscillation example, live (#17).

The simulator runs the example with one cycle per minute, window 256 min, half-life 128 min
(tests/sim/test_time_fairshare.py: turns of 240 cycles, 47 % / 52 %). Usage depends on time only
through window and half-life, so the live run scales time down 480 times: window 32 s, half-life
16 s, kValue 1, a cycle every 0.25 s (window / 128). A whole turn should then last about
240/256 of the window (30 s); the run lasts four windows from the first bind, as the simulator's
1024 cycles. The measured turns and shares are printed (`pytest -s`) and in docs/fairness.md.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
from lightkube.resources.coordination_v1 import Lease

from kube.fake_prometheus import FakePrometheus, vector

from .cluster import KEnv
from .oscillation import Oscillation, held, queue_tree, shares, summary
from .scheduler_fixtures import QueueRes, shoal_runner, wait_until  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e

WINDOW, HALF_LIFE = 32.0, 16.0
#: Whole turns in the simulator: 240 cycles of a 256-cycle window.
TURN = WINDOW * 240 / 256
#: The simulator's run: 1024 cycles, four windows.
RUN = 4 * WINDOW


def _config(tmp_path: Path, usage: bool) -> list[str]:
    """`--config` with KAI's usageDBConfig (the defaults otherwise: proportion's kValue is 1)."""
    if not usage:
        return []
    path = tmp_path / "fairshare.yaml"
    path.write_text(f"usageDBConfig:\n  usageParams: {{windowSize: {WINDOW:g}s, halfLifePeriod: {HALF_LIFE:g}s, "
                    "windowType: sliding}\n")
    return ["--config", str(path)]


def _start(kenv: KEnv, shoal_runner: Any, tmp_path: Path, usage: bool) -> Oscillation:
    (node,) = kenv.add_gpu_nodes(1, gpus=16)
    kenv.wait_nodes_ready([node])
    queues = queue_tree(kenv, kenv.node_prefix[-6:])
    sched = shoal_runner(None, *_config(tmp_path, usage), "--period", "0.25s")
    return Oscillation(kenv, sched.scheduler_name, queues)


def test_two_equal_queues_take_turns_with_time_based_fair_share(kenv: KEnv, shoal_runner: Any,
                                                                 tmp_path: Path) -> None:
    osc = _start(kenv, shoal_runner, tmp_path, usage=True)
    start = osc.first_bind()
    osc.run(RUN)
    runs = osc.turns(since=start)
    turns = held(runs)
    print(f"\nlive turns (window {WINDOW:g}s, half-life {HALF_LIFE:g}s): {summary(runs)}")
    print(f"held turns: {summary(turns)}; shares {shares(runs, osc.queues)}")
    assert all(who != "both" for who, _ in runs), summary(runs)
    full = [s for _, s in turns[1:-1]]  # whole turns: not the first nor the cut-off last
    assert len(full) >= 3, summary(runs)
    assert all(0.8 * TURN <= s <= 1.25 * TURN for s in full), summary(turns)
    for q, share in shares(runs, osc.queues).items():
        assert 0.45 <= share <= 0.55, (q, share, summary(runs))


def test_without_time_based_fair_share_one_queue_holds_the_node(kenv: KEnv, shoal_runner: Any,
                                                                tmp_path: Path) -> None:
    osc = _start(kenv, shoal_runner, tmp_path, usage=False)
    start = osc.first_bind()
    osc.run(1.5 * TURN)
    runs = osc.turns(since=start)
    print(f"\nlive, time-based fair share off: {summary(runs)}")
    holders = [who for who, _ in held(runs)]
    assert len(holders) == 1 and holders[0] in osc.queues, summary(runs)
    assert runs[-1][0] == holders[0] and runs[-1][1] >= TURN, summary(runs)


#: The failover run: a longer window (64 s: whole turns of 60 s) so that a leader killed early in a
#: turn is replaced (~12 s: a 10 s lease) well before the turn would end.
FO_WINDOW = 64.0
FO_TURN = FO_WINDOW * 240 / 256


def _holder(kenv: KEnv, lease: str) -> str | None:
    return kenv.client.get(Lease, lease, namespace="shoal-system").spec.holderIdentity


def _step_until(osc: Oscillation, done: Any, timeout: float, what: str) -> float:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if done(osc.step()):
            return osc.samples[-1][0]
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {summary(osc.turns())}")


def test_a_new_leader_carries_on_the_turn_in_progress(kenv: KEnv, shoal_runner: Any, tmp_path: Path) -> None:
    """Two instances on one lease, usage persisted every second; the leader is SIGKILLed 4 s into
    the first whole turn. The standby takes over with the persisted usage, so that turn lasts as
    long as a whole turn (from scratch the holder would have used all of a fresh window and lose
    the node within a cycle or two of the takeover), and the other queue then gets its turn."""
    (node,) = kenv.add_gpu_nodes(1, gpus=16)
    kenv.wait_nodes_ready([node])
    suffix = kenv.node_prefix[-6:]
    queues = queue_tree(kenv, suffix)
    name, lease = f"shoal-{suffix}", f"lease-shoal-{suffix}"
    path = tmp_path / "fairshare.yaml"
    path.write_text(f"usageDBConfig:\n  usageParams: {{windowSize: {FO_WINDOW:g}s, "
                    f"halfLifePeriod: {FO_WINDOW / 2:g}s, windowType: sliding}}\n")
    procs = {ident: shoal_runner(name, "--config", str(path), "--period", "0.25s", "--usage-persist-period", "1s",
                                 "--leader-elect", "--lease-name", lease, "--identity", ident)
             for ident in ("a", "b")}
    osc = Oscillation(kenv, name, queues)
    osc.first_bind()
    first = osc.samples[-1][1]
    began = _step_until(osc, lambda h: h not in ("-", first), FO_WINDOW, "the first whole turn")
    holder_queue = osc.samples[-1][1]
    _step_until(osc, lambda h: osc.samples[-1][0] - began >= 4.0, 10, "4 s into the turn")
    leader = _holder(kenv, lease)
    assert leader in procs
    procs[leader].kill()
    killed = osc.samples[-1][0]
    survivor = next(i for i in procs if i != leader)
    took_over = _step_until(osc, lambda h: _holder(kenv, lease) == survivor, 30, "the standby taking the lease")
    ended = _step_until(osc, lambda h: h not in ("-", holder_queue), 2 * FO_TURN, "the turn's end")
    other = osc.samples[-1][1]
    _step_until(osc, lambda h: osc.samples[-1][0] - ended >= 5.0, 10, "5 s of the other queue's turn")
    runs = held(osc.turns(since=began))
    print(f"\nfailover (window {FO_WINDOW:g}s): killed {killed - began:.1f}s into the turn, lease taken "
          f"{took_over - killed:.1f}s later, turn ended {ended - took_over:.1f}s after that, "
          f"{ended - began:.1f}s in all; then: {summary(runs)}")
    assert took_over < ended, "the turn ended before the standby led: nothing tested"
    assert 0.8 * FO_TURN <= ended - began <= 1.25 * FO_TURN, summary(runs)
    assert ended - took_over >= 0.25 * FO_TURN, "the new leader reset the turn in progress"
    assert runs[0][0] == holder_queue and len(runs) == 2 and runs[1][0] == other != holder_queue, summary(runs)
    assert "usage history taken over" in procs[survivor].tail(10**6)


def test_usage_read_from_prometheus_decides_who_goes_first(kenv: KEnv, shoal_runner: Any, tmp_path: Path) -> None:
    """KAI's `clientType: prometheus`: a fake Prometheus on loopback says that team-a, which takes
    the node first without usage (the tests above), has used all the GPUs of the window and team-b
    none. team-b's pod gets the node and keeps it; team-a's usage shows in its Queue status."""
    (node,) = kenv.add_gpu_nodes(1, gpus=16)
    kenv.wait_nodes_ready([node])
    a, b = queue_tree(kenv, kenv.node_prefix[-6:])

    def answer(query: str) -> tuple[int, dict[str, Any]]:
        if "kube_node_status_capacity" in query:
            return 200, vector([({}, 100.0)])
        return 200, vector([({"queue_name": a}, 100.0)] if "kai_queue_allocated_gpus" in query else [])

    prom = FakePrometheus(answer)
    try:
        path = tmp_path / "prometheus.yaml"
        path.write_text(f"usageDBConfig:\n  clientType: prometheus\n  connectionString: {prom.url}\n"
                        f"  usageParams: {{windowSize: {WINDOW:g}s, halfLifePeriod: {HALF_LIFE:g}s, "
                        "fetchInterval: 2s}\n")
        sched = shoal_runner(None, "--config", str(path), "--period", "0.25s")
        osc = Oscillation(kenv, sched.scheduler_name, (a, b))
        start = osc.first_bind()
        osc.run(10)
        runs = osc.turns(since=start)
        print(f"\nusage from Prometheus: {summary(runs)}; {len(prom.asked)} queries")
        assert [who for who, _ in held(runs)] == [b], summary(runs)
        status = wait_until(lambda: (kenv.client.get(QueueRes, a).status or {}).get("usage"), 15, "Queue status usage")
        assert status["gpu"] == pytest.approx(1.0), status
        assert len(prom.asked) >= 12 and all(q["path"] == "/api/v1/query" for q in prom.asked)  # two fetches
        assert "sum_over_time" in prom.asked[0]["query"] and f"[{WINDOW:g}s:60s]" in prom.asked[0]["query"]
    finally:
        prom.close()


def test_prometheus_down_schedules_without_usage(kenv: KEnv, shoal_runner: Any, tmp_path: Path) -> None:
    """The endpoint refuses connections: cycles run on (plain fair share: team-a, the tie's
    winner, takes the node) and the failure is logged once, not every fetch."""
    (node,) = kenv.add_gpu_nodes(1, gpus=16)
    kenv.wait_nodes_ready([node])
    a, b = queue_tree(kenv, kenv.node_prefix[-6:])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again when the scheduler starts
    path = tmp_path / "prometheus-down.yaml"
    path.write_text(f"usageDBConfig:\n  clientType: prometheus\n  connectionString: {url}\n"
                    "  usageParams: {windowSize: 32s, fetchInterval: 1s}\n")
    sched = shoal_runner(None, "--config", str(path), "--period", "0.25s")
    osc = Oscillation(kenv, sched.scheduler_name, (a, b))
    start = osc.first_bind()
    osc.run(5)
    runs = osc.turns(since=start)
    log = sched.tail(10**6)
    assert [who for who, _ in held(runs)] == [a], summary(runs)
    assert log.count("usage from Prometheus failed") == 1 and "ConnectError" in log, log[-3000:]
    assert "scheduling cycle failed" not in log
