"""shoal.history: what an adapter remembers between cycles, handed to the core as snapshot fields.

The core keeps no state between cycles and reads no clock. Time-based fair share needs each
queue's decayed past usage (`usage.UsageHistory` -> `ClusterSnapshot.usage`), and the
``fragaware`` plugin needs the mix of pods seen recently (`podmix.PodMixFeed` ->
`ClusterSnapshot.pod_mix` and `pods_departed`). The simulator (virtual clock) and the live
service (wall clock) use the same classes, so a policy that learns from history learns the same
way in both. Depends only on the model and the policy math.
"""
