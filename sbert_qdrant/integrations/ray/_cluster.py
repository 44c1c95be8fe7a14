"""Joining a Ray cluster, or starting Ray on this machine; the actor pool that encodes, and whether the cluster can
run it next to the dataset's reads."""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

import ray
import ray.data

from ...errors import InvalidArgumentError
from ._reaper import watch_here

#: CPUs a read task asks of Ray when its dataset's plan cannot tell (Ray's own default).
_DEFAULT_READ_CPUS = 1.0


def connect(address: str | None = None) -> None:
    """Join the Ray cluster at ``address`` (``"auto"``: the one this machine belongs to; ``ray://host:10001``: a
    remote one) or, with None, start Ray here on this machine's CPUs (``local_cpus``), its processes ended with this
    one even when it is killed (``_reaper``); when this process is already connected, only the watcher (where Ray
    runs below this process: started by ``ray.init()`` or Ray Data). Ray's INFO lines (its start) are left out."""
    if not ray.is_initialized():
        if address is None:
            ray.init(num_cpus=int(local_cpus()), include_dashboard=False, logging_level=logging.WARNING)
        else:
            ray.init(address=address, logging_level=logging.WARNING)
    watch_here()


def local_cpus() -> float:
    """The CPUs ``connect()`` starts a local Ray with: those this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return float(len(affinity(0)) if affinity is not None else os.cpu_count() or 1)


class Pool(NamedTuple):
    """The actors that encode: how many, what each holds, and the rows each is given at a time."""

    actors: int
    cpus: float
    gpus: float
    batch_size: int

    def check(self) -> None:
        """Refuse counts and amounts that are not numbers of the right kind."""
        for name, count in (("actors", self.actors), ("batch_size", self.batch_size)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise InvalidArgumentError(f"{name}={count!r} must be a positive integer.")
        for name, amount in (("cpus_per_actor", self.cpus), ("gpus_per_actor", self.gpus)):
            if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
                raise InvalidArgumentError(f"{name}={amount!r} must be a number >= 0.")

    def check_size(self, cpus: float, gpus: float | None) -> None:
        """Refuse a pool larger than ``cpus`` and ``gpus`` (None: not known yet, not checked), with the numbers."""
        pool = f"actors={self.actors} x cpus_per_actor={self.cpus:g}"
        if self.actors * self.cpus > cpus:
            raise InvalidArgumentError(
                f"{pool} asks {self.actors * self.cpus:g} CPUs, the Ray cluster has {cpus:g}: pass fewer actors or a "
                "smaller cpus_per_actor (--actors, --cpus-per-actor), or add nodes."
            )
        if gpus is not None and self.actors * self.gpus > gpus:
            raise InvalidArgumentError(
                f"actors={self.actors} x gpus_per_actor={self.gpus:g} asks {self.actors * self.gpus:g} GPUs, the Ray "
                f"cluster has {gpus:g}: pass fewer actors or a smaller gpus_per_actor."
            )

    def check_fits(self, dataset: ray.data.Dataset, write_cpus: float = 0) -> None:
        """Refuse, before any work, a pool the cluster cannot hold next to every other stage: the dataset's read tasks
        and the write tasks (``write_cpus`` each). Ray Data starts the actors first, and a task that waits for a CPU
        the actors hold waits forever (ray-project/ray#44687); a stalled write stalls the actors too, once their
        output fills the object store."""
        have = ray.cluster_resources()
        cpus = float(have.get("CPU", 0))
        self.check_size(cpus, float(have.get("GPU", 0)))
        pool = f"actors={self.actors} x cpus_per_actor={self.cpus:g}"
        read = read_cpus(dataset)
        if self.actors * self.cpus + read + write_cpus > cpus:
            raise InvalidArgumentError(
                f"{pool} holds {self.actors * self.cpus:g} of the Ray cluster's {cpus:g} CPUs and the dataset's read "
                f"tasks ask {read:g} CPU each, its write tasks {write_cpus:g}: they would wait forever "
                f"(ray-project/ray#44687). Keep actors x cpus_per_actor <= {cpus - read - write_cpus:g}, or read the "
                "files with read_files (its reads ask no CPU) or ray.data.read_*(..., num_cpus=0)."
            )


def read_cpus(dataset: ray.data.Dataset) -> float:
    """The most CPUs any read task of the dataset asks for (0: it reads no files, or read them already, e.g. a
    materialized dataset). No public API tells it, so it is read from the plan; where the plan cannot be read, Ray's
    default, 1."""
    if not dataset.input_files():
        return 0.0
    plan = getattr(dataset, "_logical_plan", None)
    if plan is None:
        return _DEFAULT_READ_CPUS
    found: list[float] = []
    ops = [plan.dag]
    while ops:
        op = ops.pop()
        ops.extend(op.input_dependencies)
        remote_args = getattr(op, "ray_remote_args", None)
        if type(op).__name__.startswith("Read") and isinstance(remote_args, dict):
            found.append(float(remote_args.get("num_cpus", _DEFAULT_READ_CPUS)))
    return max(found, default=0.0)  # no read in the plan: read already (a materialized dataset), no CPU asked
