"""Visibility: why gangs are pending and when they will start, as plain data for every surface.

Pure like the core (no I/O, no clock): `report` turns a finished session into a JSON-able
scheduling report (queue tree, pending gangs in try order, explanations), `explain` analyses one
pending gang (failing condition per node group, what would make it schedulable), `forecast`
predicts start times by running the same core forward on a copy of the snapshot, `runtimes`
estimates when running jobs end. The live service (`shoal.kube.visibility`), the simulator, the
CLI and the dashboard all read the same report.
"""
