"""shoal.kai: KAI's objects and unit rules -> the model, in one place for every adapter.

Pure decoding (no I/O, no clock): Kubernetes and KAI objects as JSON dicts (`pods`, `nodes`,
`crds`), KAI's names (`names`) and unit rules (`units`: 0.01-GPU fractions, the GPU-memory floor,
queue units, priority classes and preemptibility, durations). The live service (`shoal.kube`),
the simulator (`shoal.sim`), the conformance harness and the CLI's cluster file all decode
through here, so a job is the same model object whichever way it enters. New decoding of a
Kubernetes or KAI field belongs here too. Depends only on `shoal.model`.
"""
