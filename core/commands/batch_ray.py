"""`leanseg batch ... --ray [ADDRESS]`: the batch job on a Ray actor pool (the `leanseg[cluster]` extra).

Options are added to `leanseg batch` by `add_ray_options`; `run_on_ray` builds what the cluster job
needs from the parsed arguments. No ray import here: without ray, --ray says how to install it.
"""
from __future__ import annotations

import argparse
import threading

from ..cluster.ray_batch import RayBatchError, RayOptions, import_ray, run_batch_on_ray
from ..events import EventSink
from ..jobs.batch import BatchSummary
from ..jobs.batch_plan import BatchSettings
from .common import CommandError, inference_options, load_model

LOCAL = "local"  # --ray with no address: a Ray instance started on this machine for this run


def add_ray_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ray cluster (pip install 'leanseg[cluster]')")
    group.add_argument("--ray", nargs="?", const=LOCAL, default=None, metavar="ADDRESS",
                       help="run on Ray: with no ADDRESS a local instance, else a running cluster's HOST:PORT "
                            "(or 'auto'); IN_DIR and OUT_DIR must be paths every node sees")
    group.add_argument("--actors", type=int, default=None, metavar="N",
                       help="segmenting actors, each with its own compiled model (default: as many as the "
                            "cluster's CPUs allow at --threads-per-actor each)")
    group.add_argument("--threads-per-actor", type=int, default=RayOptions.threads_per_actor, metavar="N",
                       help=f"torch threads (and reserved CPUs) per actor (default {RayOptions.threads_per_actor})")
    group.add_argument("--ray-batch-size", type=int, default=RayOptions.batch_size, metavar="N",
                       help=f"images per call to an actor (default {RayOptions.batch_size})")


def ray_requested(args: argparse.Namespace) -> bool:
    return args.ray is not None


def check_ray_arguments(args: argparse.Namespace) -> RayOptions:
    """Validate the Ray options early; CommandError naming the fix (installing ray, a bad count)."""
    if args.memory_log is not None:
        raise CommandError("--memory-log samples this process, but with --ray the images are segmented in Ray "
                           "actors; drop --memory-log (summary.csv has each image's peak memory)")
    try:
        import_ray()
        return RayOptions(address=None if args.ray == LOCAL else args.ray, actors=args.actors,
                          threads_per_actor=args.threads_per_actor, batch_size=args.ray_batch_size)
    except (RayBatchError, ValueError) as err:
        raise CommandError(str(err)) from err


def run_on_ray(args: argparse.Namespace, settings: BatchSettings, ray_options: RayOptions, *,
               cancel: threading.Event, stop_after_current: threading.Event, on_event: EventSink) -> BatchSummary:
    """Load the model here (it is shipped to the actors) and run the batch on the Ray cluster."""
    loaded = load_model(args.model)
    try:
        options = inference_options(args, want_probs=args.probs)
        averaging = "".join(f", {words}" for words in options.averaging)
        print(f"model {loaded.path}, engine {args.engine}, {args.precision}{averaging}; on Ray "
              f"({ray_options.address or 'a local instance'})", flush=True)
        return run_batch_on_ray(settings, loaded, options, ray_options, cancel=cancel,
                                stop_after_current=stop_after_current, on_event=on_event)
    except (RayBatchError, ValueError) as err:
        raise CommandError(str(err)) from err
