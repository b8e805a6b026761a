"""The quantile-forecaster interface shared by every priced forecast model.

A forecaster maps a context (1-D float array of consecutive hourly values, raw units) and a
horizon to the 9 quantiles 0.1..0.9 per step: an array of shape ``(horizon, 9)``, finite and
non-decreasing along the level axis.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fwgym.optimizer import QUANTILE_LEVELS

N_QUANTILES = len(QUANTILE_LEVELS)


class ModelUnavailable(RuntimeError):
    """Weights or packages for a model cannot be found; the message says how to supply them."""


class ForecastBackendError(RuntimeError):
    """A model was loaded but its forecast failed or returned an unusable array."""


@dataclass(frozen=True)
class Availability:
    """Whether a model can be used now, and why not."""

    available: bool
    reason: str = ""
    source: str = ""  #: local directory, ``hf-cache`` or ``hub``


class QuantileForecaster:
    """Base class. Subclasses implement :meth:`_predict` and may override :meth:`availability`.

    Attributes:
        name: model name used by the tools (e.g. ``"chronos2"``).
        min_context: smallest accepted context length.
        revision: model revision identifier for caching (``None`` for deterministic methods).
        bounded: ``True`` when :meth:`predict_quantiles` is a short in-process computation that
            cannot block (no model backend, no I/O): the tools then run it on the calling thread and
            the env's ``forecast_timeout`` does not apply. Default ``False``: with a
            ``forecast_timeout`` the forecast runs on a new worker thread and is abandoned after that
            many seconds. Subclasses inherit the flag: a subclass of a bounded forecaster whose
            prediction may block sets ``bounded = False``.
    """

    name: str = ""
    min_context: int = 2
    revision: str | None = None
    bounded: bool = False

    def availability(self) -> Availability:
        return Availability(True, source="builtin")

    def load(self) -> None:
        """Load weights (no-op for methods without weights). Raises :class:`ModelUnavailable`."""

    def predict_quantiles(self, context: np.ndarray, horizon: int) -> np.ndarray:
        """Quantiles 0.1..0.9 for ``horizon`` steps after the context.

        Args:
            context: float array (T,), consecutive hourly values, T >= ``min_context``. NaN values are
                replaced by linear interpolation (edges by the nearest value) before inference.
            horizon: number of steps, >= 1.

        Returns:
            float64 array (horizon, 9), finite and sorted along the level axis.

        Raises:
            ValueError: bad context or horizon.
            ModelUnavailable: weights cannot be loaded.
            ForecastBackendError: the model failed or returned NaN / a wrong shape.
        """
        ctx = np.asarray(context, dtype=np.float64).ravel()
        if len(ctx) < self.min_context:
            raise ValueError(f"{self.name}: context has {len(ctx)} steps, at least {self.min_context} needed")
        if isinstance(horizon, bool) or int(horizon) != horizon or horizon < 1:
            raise ValueError(f"{self.name}: horizon must be a positive integer, got {horizon!r}")
        ctx = fill_gaps(ctx)
        try:
            q = np.asarray(self._predict(ctx, int(horizon)), dtype=np.float64)
        except (ModelUnavailable, ValueError, ForecastBackendError):
            raise
        except Exception as exc:
            raise ForecastBackendError(f"{self.name}: forecast failed: {type(exc).__name__}: {exc}") from exc
        if q.shape != (horizon, N_QUANTILES):
            raise ForecastBackendError(f"{self.name}: expected quantiles of shape ({horizon}, 9), got {q.shape}")
        if not np.all(np.isfinite(q)):
            raise ForecastBackendError(f"{self.name}: forecast contains NaN or infinite values")
        return np.sort(q, axis=1)

    def _predict(self, context: np.ndarray, horizon: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


def fill_gaps(x: np.ndarray) -> np.ndarray:
    """Linear interpolation over NaN/inf (nearest value at the edges); all-missing -> zeros."""
    ok = np.isfinite(x)
    if ok.all():
        return x
    if not ok.any():
        return np.zeros_like(x)
    idx = np.arange(len(x))
    return np.interp(idx, idx[ok], x[ok])
