"""Joining a Ray cluster, or starting Ray on this machine."""

from __future__ import annotations

import ray


def connect(address: str | None = None) -> None:
    """Join the Ray cluster at ``address`` (``"auto"``: the one this machine belongs to; ``ray://host:10001``: a
    remote one) or, with None, start Ray here on every CPU; nothing when this process is already connected."""
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False if address is None else None)
