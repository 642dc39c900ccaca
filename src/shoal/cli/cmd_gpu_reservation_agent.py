"""`shoal gpu-reservation-agent`: the program of a GPU reservation pod (shoal.kube.gpusharing.agent)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from typing import Any

HELP = """\
Run inside a GPU reservation pod (the scheduler creates them; docs/gpu-sharing.md): find the GPU the
device plugin gave this container (NVIDIA_VISIBLE_DEVICES, else NVML), write its UUID into the pod's
annotation run.ai/reserve_for_gpu_index, then sleep until stopped. Needs POD_NAME and POD_NAMESPACE.
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("gpu-reservation-agent", help="report the GPU of a reservation pod (runs in the pod)",
                              description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: the pod's service account)")
    p.add_argument("--once", action="store_true", help="exit after reporting instead of sleeping")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from shoal.kube.client import ApiError, KubeClient
    from shoal.kube.gpusharing.agent import AgentError, run_agent

    async def main() -> None:
        client = KubeClient(args.kubeconfig)
        task = asyncio.create_task(run_agent(client, os.environ, once=args.once))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass
        finally:
            await client.close()

    try:
        asyncio.run(main())
    except (AgentError, ApiError, ValueError) as e:
        print(f"shoal gpu-reservation-agent: {e}")
        return 1
    return 0
