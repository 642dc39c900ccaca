"""shoal.experiments: reproductions of published results, kept apart from the simulator.

`fgd/` replays the FGD paper's (ATC'23) fragmentation experiment on the Alibaba openb trace
with its own minimal cluster model and random streams (`shoal fgd`). Experiments may use the
policy math, the model and the simulator's trace loaders; nothing but the CLI imports them.
"""
