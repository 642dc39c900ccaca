"""Time-based fair share in `shoal run`: KAI's two-queue oscillation example, live (#17).

The simulator runs the example with one cycle per minute, window 256 min, half-life 128 min
(tests/sim/test_time_fairshare.py: turns of 240 cycles, 47 % / 52 %). Usage depends on time only
through window and half-life, so the live run scales time down 480 times: window 32 s, half-life
16 s, kValue 1, a cycle every 0.25 s (window / 128). A whole turn should then last about
240/256 of the window (30 s); the run lasts four windows from the first bind, as the simulator's
1024 cycles. The measured turns and shares are printed (`pytest -s`) and in docs/fairness.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .cluster import KEnv
from .oscillation import Oscillation, held, queue_tree, shares, summary
from .scheduler_fixtures import shoal_runner  # noqa: F401  (fixture)

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
