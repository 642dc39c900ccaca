"""The FGD paper's (ATC'23) placement experiment on the Alibaba openb trace, replayed exactly.

Protocol: reference/traces.md §3. Entry points: :func:`runner.run_once` (one seed),
:func:`experiment.run_cell` (one workload x policy over seeds), :func:`experiment.run_grid`.
"""
