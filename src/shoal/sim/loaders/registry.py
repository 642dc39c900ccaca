"""The workload sources a scenario can name (`workload: {source: ...}`): one registry of loaders.

A loader reads one file into `JobSpec`s and raises `SimInputError` naming the file and line.
To add a trace format: write `load_<name>(path, options, queue)` in its own module under
`shoal.sim.loaders` (validate every row; `TraceOptions` carries the scenario's `workload:` keys,
`queue` is the default queue) and add it to `trace_loaders()`. The registry is built per call:
no module-level state.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shoal.sim.loaders.jobs import load_jobs
from shoal.sim.loaders.traces import TraceOptions, load_openb, load_philly, load_pollux
from shoal.sim.workload import JobSpec

#: (file, the scenario's trace options, the default queue) -> jobs.
TraceLoader = Callable[[Path, TraceOptions, str], list[JobSpec]]


def trace_loaders() -> dict[str, TraceLoader]:
    """Source name -> loader, in the order the scenario documentation lists them."""
    return {
        "jobs": lambda path, opts, queue: load_jobs(path),
        "philly": lambda path, opts, queue: load_philly(path, opts),
        "pollux": load_pollux,
        "sia": load_pollux,
        "openb": load_openb,
    }
