"""`shoal webhook`: the admission webhook (shoal.kube.webhook) over TLS."""

from __future__ import annotations

import argparse
import asyncio
import signal
import tempfile
from pathlib import Path
from typing import Any

HELP = """\
Serve shoal's admission webhook over HTTPS: refuse pods and PodGroups the scheduler would refuse
(gpu-fraction outside (0, 1] or with whole GPUs, gpu-memory not positive, a missing or non-leaf
queue, an impossible minSubGroup, ...) with a message naming the field, and link fractional pods to
their shared-GPU ConfigMaps (docs/gpu-sharing.md). The certificate comes from --tls-cert/--tls-key
(reloaded when the files change) or is self-signed into --self-signed-dir for --host-name names.
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("webhook", help="serve the admission webhook (TLS)", description=HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: $KUBECONFIG, in-cluster)")
    p.add_argument("--scheduler-name", default="kai-scheduler", help="only pods of this scheduler are checked")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default: %(default)s)")
    p.add_argument("--port", type=int, default=9443, help="port to listen on (default: %(default)s)")
    p.add_argument("--tls-cert", metavar="FILE", help="serving certificate (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="its key (PEM)")
    p.add_argument("--self-signed-dir", metavar="DIR",
                   help="without --tls-cert: write a self-signed tls.crt/tls.key here (the caBundle is tls.crt)")
    p.add_argument("--host-name", action="append", default=[], metavar="NAME",
                   help="DNS name or IP of the self-signed certificate (repeatable; default 127.0.0.1)")
    p.add_argument("--runtime-class", default="", help="runtimeClassName for fractional pods that set none")
    p.add_argument("--default-queue", default="",
                   help="queue label for pods without one whose namespace has no kai.scheduler/queue label")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from shoal.kai.admission import MutationOptions
    from shoal.kube.client import KubeClient
    from shoal.kube.webhook.certs import CertFiles, write_self_signed
    from shoal.kube.webhook.server import AdmissionWebhook, WebhookOptions

    if args.tls_cert and args.tls_key:
        certs = CertFiles(Path(args.tls_cert), Path(args.tls_key))
    elif args.tls_cert or args.tls_key:
        print("shoal webhook: --tls-cert and --tls-key go together")
        return 2
    else:
        directory = Path(args.self_signed_dir or tempfile.mkdtemp(prefix="shoal-webhook-"))
        write_self_signed(directory, args.host_name or ["127.0.0.1"])
        certs = CertFiles(directory / "tls.crt", directory / "tls.key")
        print(f"shoal webhook: self-signed certificate {directory / 'tls.crt'}", flush=True)
    opts = WebhookOptions(args.scheduler_name, MutationOptions(args.runtime_class, args.default_queue))

    async def main() -> None:
        client = KubeClient(args.kubeconfig)
        hook = AdmissionWebhook(client, opts)
        server = await hook.serve(certs, args.host, args.port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            server.close()
            await client.close()

    asyncio.run(main())
    return 0
