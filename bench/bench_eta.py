"""Accuracy of predicted start times on a trace replay (docs/visibility.md, "How good is the ETA").

    python bench/bench_eta.py [SCENARIO.yaml] [--config C.yaml] [--every 1h] [--json OUT.json]

Replays the scenario (default: the built-in Philly day) and every `--every` simulated time predicts
the start of each gang that has not started yet with shoal's forecast (learned and true run times)
and two naive baselines; prints the Markdown table of absolute errors (shoal.sim.eta_check).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from shoal.kai.units import parse_duration
from shoal.sim.eta_check import markdown, run_eta_check
from shoal.sim.scenario import load_scenario
from shoal.sim.schedconf import load_config


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", nargs="?", type=Path, help="scenario file (default: built-in)")
    p.add_argument("--config", type=Path, help="scheduler config (default: the scenario's)")
    p.add_argument("--every", default="1h", help="predict this often (simulated time; default 1h)")
    p.add_argument("--max-cycles", type=int, default=300, help="cycles per forecast (default 300)")
    p.add_argument("--json", type=Path, help="also write the rows and counts here")
    args = p.parse_args()
    sc = load_scenario(args.scenario, config=load_config(args.config) if args.config else None)
    t0, c0 = time.perf_counter(), time.process_time()
    res = run_eta_check(sc, parse_duration(args.every), max_cycles=args.max_cycles,
                        progress=lambda m: print(m, file=sys.stderr, flush=True))
    rows = res.table()
    print(f"scenario {sc.name}: {len(sc.jobs)} jobs, predictions every {args.every}, "
          f"{len(res.predictions)} predictions, {res.forecast_cycles} forecast cycles, "
          f"{time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU")
    print(f"median actual wait of the predicted gangs: {(rows[0]['median_wait_s'] or 0) / 60:.1f} min")
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps({"scenario": sc.name, "every": args.every, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
