"""Simulator input loaders: cluster nodes, queues, and workloads (shoal's format and public traces).

Every loader validates what it reads and raises `shoal.sim.errors.SimInputError` whose message
names the file and the line (or field) of the first problem.
"""
