"""GPU sharing on real nodes: reservation pods, the device handshake, the shared-GPU ConfigMaps and
the GPU Fractioning Operator's annotations (docs/gpu-sharing.md).

* `options` — the per-cluster choice (`labels`, `reservation`, `fractioning`, `auto`) and its flags.
* `reservations` — the reservation pods the informer shows, and acquiring a device for a GPU group.
* `binder` — the applier's hook: a shared pod is bound only after its devices are known.
* `reconcile` — clean-up and the rebuild after a restart, from labels and annotations alone.
* `agent` — `shoal gpu-reservation-agent`, which runs inside each reservation pod.
"""
