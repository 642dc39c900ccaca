"""KAI's API names: CRD groups, and the labels and annotations the scheduler reads or writes."""

from __future__ import annotations

QUEUE_API = "scheduling.run.ai/v2"
PODGROUP_API = "scheduling.run.ai/v2alpha2"
TOPOLOGY_API = "kai.scheduler/v1alpha1"

QUEUE_LABEL = "kai.scheduler/queue"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
TASK_PRIORITY_LABEL = "kai.scheduler/task-priority"
PODGROUP_ANNOTATION = "pod-group-name"
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
GPU_DEVICES = "gpu-fraction-num-devices"
#: Written at bind on a pod sharing a GPU: `runai-gpu-group` or `runai-gpu-group/<group>`.
GPU_GROUP_LABEL = "runai-gpu-group"
LAST_START_ANNOTATION = "kai.scheduler/last-start-timestamp"
STALE_ANNOTATION = "kai.scheduler/stale-podgroup-timestamp"
#: Node labels of the NVIDIA GPU feature discovery.
GPU_MEMORY_NODE_LABEL = "nvidia.com/gpu.memory"
GPU_COUNT_NODE_LABEL = "nvidia.com/gpu.count"
GPU_PRODUCT_NODE_LABEL = "nvidia.com/gpu.product"
MIG_STRATEGY_NODE_LABEL = "nvidia.com/mig.strategy"
MIG_ENABLED_NODE_LABEL = "node-role.kubernetes.io/mig-enabled"

DEFAULT_QUEUE = "default-queue"
