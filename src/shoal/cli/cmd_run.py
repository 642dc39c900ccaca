"""`shoal run`: the scheduler service against a Kubernetes API server."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path
from typing import Any

import yaml

from shoal.framework.config import ConfigError, SchedulerConfig
from shoal.kai.units import parse_duration

logger = logging.getLogger(__name__)

HELP = """\
Schedule the pods whose spec.schedulerName is NAME (default kai-scheduler, so KAI manifests run
unchanged), using KAI's CRDs (Queue, PodGroup, Topology; install them with `shoal install-crds`).
Credentials come from --kubeconfig, else $KUBECONFIG, else the in-cluster service account (the
mounted token and KUBERNETES_SERVICE_HOST/PORT), else ~/.kube/config. With leader election (the
default) several instances may run; one schedules.
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="run the scheduler against a Kubernetes cluster", description=HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, in-cluster)")
    p.add_argument("--scheduler-name", default="kai-scheduler", metavar="NAME",
                   help="spec.schedulerName of the pods to schedule (default: %(default)s)")
    p.add_argument("--config", metavar="scheduler.yaml", help="KAI-style scheduler config (actions, tiers)")
    p.add_argument("--config-map", metavar="[NAMESPACE/]NAME", default="",
                   help="watch this ConfigMap's config (key --config-map-key, KAI format) and apply each change "
                        "from the next cycle on, without a restart; namespace default: --lease-namespace")
    p.add_argument("--config-map-key", default="config.yaml", metavar="KEY",
                   help="the ConfigMap key holding the config (default: %(default)s)")
    p.add_argument("--period", default="1s", help="cycle period, e.g. 1s, 500ms (default: %(default)s)")
    p.add_argument("--usage-persist-period", default="60s", metavar="DURATION",
                   help="time-based fair share (usageDBConfig in the config): how often the leader writes the "
                        "queue usage history to ConfigMap <lease name>-usage (default: %(default)s)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="N",
                   help="serve /healthz, /readyz and /metrics on this port (0 = any free port)")
    p.add_argument("--metrics-host", default="127.0.0.1", help="address to serve metrics on")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help="take part in leader election on a Lease (default: on)")
    p.add_argument("--lease-namespace", default="shoal-system", help="namespace of the leader Lease")
    p.add_argument("--lease-name", default="", help="name of the leader Lease (default: the scheduler name)")
    p.add_argument("--identity", default="", help="leader-election identity (default: host-pid)")
    p.add_argument("--fast-binds", action=argparse.BooleanOptionalAction, default=True,
                   help="send binds, evictions, patches and other writes over lean pipelined HTTP/1.1 "
                        "connections (default; --no-fast-binds: through the httpx client like the reads)")
    p.add_argument("--pod-grouper", action=argparse.BooleanOptionalAction, default=True,
                   help="create PodGroups from pods' top owners like KAI's pod grouper (default: on); "
                        "off = a pod naming no PodGroup is its own gang of one")
    add_shard_args(p)
    add_visibility_args(p)
    add_sharing_args(p)
    p.set_defaults(func=run)


def add_shard_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scheduling shards (KAI's node pools; docs/kubernetes.md, 'When to shard')")
    g.add_argument("--node-pool-label", "--nodepool-label-key", dest="node_pool_label", default="", metavar="KEY",
                   help="serve one node pool: only the Nodes, Queues and PodGroups whose label KEY is --node-pool "
                        "(without --node-pool: those lacking the label KEY); default: the whole cluster")
    g.add_argument("--node-pool", "--partition-label-value", dest="node_pool", default="", metavar="VALUE",
                   help="the pool's label value (alone: with KAI's key kai.scheduler/node-pool); the lease, report "
                        "and events are named <scheduler-name>-VALUE")


def shard_of(args: argparse.Namespace) -> Any:
    """The Shard the flags select; ValueError naming the problem."""
    from shoal.kube.shard import DEFAULT_NODE_POOL_LABEL, Shard

    label = args.node_pool_label or (DEFAULT_NODE_POOL_LABEL if args.node_pool else "")
    return Shard(label=label, pool=args.node_pool)


def add_sharing_args(p: argparse.ArgumentParser) -> None:
    from shoal.kai.sharing import ReservationSpec
    from shoal.kube.gpusharing.options import MODES

    d = ReservationSpec()
    g = p.add_argument_group("GPU sharing (how gpu-fraction / gpu-memory pods get their device; docs/gpu-sharing.md)")
    g.add_argument("--gpu-sharing", choices=MODES, default="labels",
                   help="labels: group label and annotations only; reservation: KAI's reservation pods and shared-GPU "
                        "ConfigMaps; fractioning: reservation pods and the GPU Fractioning Operator's annotations; "
                        "auto: reservation if the reservation namespace exists (default: %(default)s)")
    g.add_argument("--reservation-namespace", default=d.namespace, help="namespace of the reservation pods")
    g.add_argument("--reservation-image", default=d.image, help="image of the reservation pods (shoal's own)")
    g.add_argument("--reservation-service-account", default=d.service_account,
                   help="service account of the reservation pods (may patch its own pod)")
    g.add_argument("--reservation-runtime-class", default="", help="runtimeClassName of the reservation pods")
    g.add_argument("--gpu-sharing-timeout", default="60s", metavar="DURATION",
                   help="a shared pod whose device is not known by then gives its GPU group back "
                        "(default: %(default)s)")


def sharing_options(args: argparse.Namespace) -> Any:
    """SharingOptions from the flags; ValueError naming the flag."""
    from shoal.kai.sharing import ReservationSpec
    from shoal.kube.gpusharing.options import SharingOptions

    timeout = parse_duration(args.gpu_sharing_timeout)
    if timeout <= 0:
        raise ValueError(f"--gpu-sharing-timeout {args.gpu_sharing_timeout!r}: must be positive")
    spec = ReservationSpec(namespace=args.reservation_namespace, image=args.reservation_image,
                           service_account=args.reservation_service_account,
                           runtime_class=args.reservation_runtime_class)
    return SharingOptions(mode=args.gpu_sharing, reservation=spec, timeout=timeout)


def add_visibility_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("visibility (the report read by shoal queues/pending/explain, predicted starts)")
    g.add_argument("--report", action=argparse.BooleanOptionalAction, default=True,
                   help="publish the scheduling report to ConfigMap <lease-namespace>/<scheduler-name>-visibility "
                        "(default: on)")
    g.add_argument("--ui-port", type=int, default=None, metavar="N",
                   help="serve the read-only dashboard on this port (0 = any free port; the URL is logged)")
    g.add_argument("--ui-host", default="127.0.0.1", metavar="ADDR",
                   help="address to serve the dashboard on (default: %(default)s, loopback only)")
    g.add_argument("--eta-period", default="30s", metavar="DURATION",
                   help="predict start times this often in a worker thread; 0 = off (default: %(default)s)")
    g.add_argument("--eta-horizon", default="7d", metavar="DURATION",
                   help="predict no further ahead than this (default: %(default)s)")
    g.add_argument("--eta-budget", default="10s", metavar="DURATION",
                   help="wall time one forecast may take; gangs it has not reached by then get no prediction "
                        "(default: %(default)s)")
    g.add_argument("--eta-default-runtime", default="1h", metavar="DURATION",
                   help="run time of a job with no annotation, no learned estimate and no queue default "
                        "(default: %(default)s)")
    g.add_argument("--eta-queue-runtime", action="append", default=[], metavar="QUEUE=DURATION",
                   help="default run time for one queue's jobs (repeatable; the Queue's shoal.dev/default-runtime "
                        "annotation wins)")


def visibility_options(args: argparse.Namespace) -> Any:
    """VisibilityOptions from the flags; ValueError naming the flag."""
    from shoal.kube.visibility import VisibilityOptions

    queues = {}
    for item in args.eta_queue_runtime:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"--eta-queue-runtime {item!r}: expected QUEUE=DURATION")
        queues[name] = parse_duration(value)
    return VisibilityOptions(namespace=args.lease_namespace, publish=args.report,
                             eta_seconds=parse_duration(args.eta_period), eta_horizon=parse_duration(args.eta_horizon),
                             eta_budget=parse_duration(args.eta_budget),
                             default_runtime=parse_duration(args.eta_default_runtime), queue_runtimes=queues,
                             nodes=args.ui_port is not None)


def load_config(path: str | None) -> SchedulerConfig:
    """The config file (KAI format), checked by opening a session on an empty cluster: an unknown
    plugin fails here, at start-up, instead of in every cycle."""
    from shoal.kube.config_watch import config_from_yaml

    if not path:
        return SchedulerConfig()
    return config_from_yaml(Path(path).read_text(), path)


def run(args: argparse.Namespace) -> int:
    from shoal.kube.client import KubeClient
    from shoal.kube.service import SchedulerService, ServiceOptions

    try:
        period = parse_duration(args.period)
        if period < 0:
            raise ValueError(f"--period {args.period!r}: must not be negative")
        config = load_config(args.config)
        usage_persist = parse_duration(args.usage_persist_period)
        visibility = visibility_options(args)
        sharing = sharing_options(args)
        shard = shard_of(args)
    except (ValueError, ConfigError, OSError, yaml.YAMLError) as e:
        print(f"shoal run: {e}")
        return 2
    opts = ServiceOptions(scheduler_name=args.scheduler_name, config=config, period=period,
                          metrics_port=args.metrics_port, metrics_host=args.metrics_host,
                          leader_elect=args.leader_elect, lease_namespace=args.lease_namespace,
                          lease_name=args.lease_name, identity=args.identity, pod_grouper=args.pod_grouper,
                          config_map=args.config_map, config_map_key=args.config_map_key, visibility=visibility,
                          gpu_sharing=sharing, usage_persist_seconds=usage_persist, shard=shard)

    try:
        client = KubeClient(args.kubeconfig, fast_binds=getattr(args, "fast_binds", True))
    except Exception as e:  # missing file, no context, bad credentials: one line, not a traceback
        print(f"shoal run: cannot use kubeconfig {args.kubeconfig or '(default)'}: {e}")
        return 2

    async def main() -> None:
        service = SchedulerService(client, opts)
        ui = None
        if args.ui_port is not None:
            from shoal.dashboard.server import serve_dashboard

            ui = await serve_dashboard(args.ui_port, lambda: service.visibility.report, args.ui_host)
        task = asyncio.create_task(service.run())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass
        finally:
            if ui is not None:
                ui.close()
            await client.close()

    if not logging.getLogger().isEnabledFor(logging.INFO):
        logging.getLogger("shoal").setLevel(logging.INFO)
    # One line per HTTP request drowns the scheduler's own log.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    asyncio.run(main())
    return 0
