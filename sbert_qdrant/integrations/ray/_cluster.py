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

#: CPUs a task asks of Ray when its dataset's plan cannot tell (Ray's own default).
_DEFAULT_TASK_CPUS = 1.0


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
        """Refuse, before any work, a pool the cluster cannot hold next to every other stage: each task the
        dataset's plan asks for (``stage_cpus``: its reads, Ray's Parquet file listing, its maps) and the write tasks
        (``write_cpus`` each). Ray Data starts the actors first, and a task that waits for a CPU the actors hold waits
        forever (ray-project/ray#44687); a stalled write stalls the actors too, once their output fills the object
        store."""
        have = ray.cluster_resources()
        cpus = float(have.get("CPU", 0))
        self.check_size(cpus, float(have.get("GPU", 0)))
        stages = stage_cpus(dataset)
        need = max([*stages.values(), write_cpus], default=0.0)
        if self.actors * self.cpus + need > cpus:
            asked = ", ".join(f"{name} {amount:g}" for name, amount in stages.items()) or "none"
            raise InvalidArgumentError(
                f"actors={self.actors} x cpus_per_actor={self.cpus:g} holds {self.actors * self.cpus:g} of the Ray "
                f"cluster's {cpus:g} CPUs, and the dataset's tasks ask CPUs of their own ({asked} a task; the write "
                f"tasks {write_cpus:g}): they would wait forever (ray-project/ray#44687). Keep actors x cpus_per_actor "
                f"<= {cpus - need:g}, or read the files with read_files (its tasks ask no CPU) or "
                "ray.data.read_json / read_csv (..., num_cpus=0)."
            )


def stage_cpus(dataset: ray.data.Dataset) -> dict[str, float]:
    """The CPUs one task of each stage of the dataset asks for, by the stage's name, as Ray will run it: read from
    Ray's own execution plan of the dataset (its reads, the file listing Ray 2.60 puts before a Parquet read whatever
    its ``num_cpus=``, its maps); stages that ask none left out (an in-memory or materialized dataset runs no task).
    No public API tells it; where the plan cannot be made (a Ray whose planner moved), Ray's default for a task."""
    try:
        from ray.data._internal.logical.interfaces import LogicalPlan
        from ray.data._internal.logical.optimizers import get_execution_plan

        # a plan of its own: planning rewires the plan it is given
        physical, _ = get_execution_plan(LogicalPlan(dataset._logical_plan.dag, dataset.context))
        found: dict[str, float] = {}
        stages = [physical.dag]
        while stages:
            stage = stages.pop()
            stages.extend(stage.input_dependencies)
            cpus = float(stage.incremental_resource_usage().cpu or 0)
            if cpus:
                found[stage.name] = max(cpus, found.get(stage.name, 0.0))
        return found
    except Exception:  # noqa: BLE001 (Ray's private planner changed: assume its default, refuse rather than hang)
        return {"each task (Ray's default)": _DEFAULT_TASK_CPUS}
