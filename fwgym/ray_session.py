"""The one way fwgym starts Ray for a job (``fwgym evaluate --backend ray``, ``fwgym forecasts build
--backend ray``): :func:`ray_session`."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

__all__ = ["ray_session"]


@contextmanager
def ray_session(workers: int, address: str | None = None) -> Iterator:
    """The ``ray`` module, initialised for the job when it is not already (and shut down after it).

    Ray's token authentication is off unless the environment sets ``RAY_AUTH_MODE``; the dashboard and
    driver logging are off.

    Args:
        workers: CPUs of a local Ray instance (at least 1); ignored with ``address``.
        address: an existing Ray cluster's address, or ``None`` for a local instance.

    Raises:
        ImportError: the ray package is not installed (``pip install 'fwgym[ray]'``).
    """
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("backend='ray' needs the ray package: pip install 'fwgym[ray]'") from exc
    started = False
    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        kw = {"address": address} if address else {"num_cpus": max(1, workers)}
        ray.init(include_dashboard=False, ignore_reinit_error=True, log_to_driver=False, **kw)
        started = True
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()
