"""The quantile-forecaster interface shared by every priced forecast model.

A forecaster maps a context (1-D float array of consecutive hourly values, raw units) and a
horizon to the 9 quantiles 0.1..0.9 per step: an array of shape ``(horizon, 9)``, finite and
non-decreasing along the level axis.
"""
from __future__ import annotations

import hashlib
import inspect
import os
from dataclasses import dataclass
from importlib import metadata
from typing import Sequence

import numpy as np

from fwgym.errors import DataIntegrityError
from fwgym.core.optimizer import QUANTILE_LEVELS
from fwgym.validation import check_int

__all__ = ["N_QUANTILES", "ModelUnavailable", "ForecastBackendError", "Availability", "QuantileForecaster", "fill_gaps",
           "package_versions", "code_digest"]

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
            ``forecast_timeout`` the forecast runs on a new (daemon) thread and is abandoned after that
            many seconds. Subclasses inherit the flag: a subclass of a bounded forecaster whose
            prediction may block sets ``bounded = False``. A plug-in's flag is ignored: plug-ins run in
            a worker process with a hard deadline (:mod:`fwgym.forecasters.hosted`).
        store_audit: see the attribute.
    """

    name: str = ""
    min_context: int = 2
    revision: str | None = None
    bounded: bool = False
    #: fraction of this forecaster's forecast-store hits that evaluation recomputes and compares bit for bit
    #: (the first hit of each model always): a store whose forecasts differ is refused
    #: (:meth:`fwgym.forecasters.store.read.ForecastStore.get`). ``0`` for forecasters too costly to
    #: recompute (the TSFMs); the cheap ones (seasonal, statsmodels) set it
    store_audit: float = 0.0
    #: distributions (names as pip knows them) whose versions join :meth:`fingerprint`
    fingerprint_packages: tuple[str, ...] = ()
    #: instance attributes left out of :meth:`fingerprint`'s settings (they do not change a forecast)
    fingerprint_exclude: tuple[str, ...] = ()

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
            fwgym.errors.DataIntegrityError: a packaged file the model read failed its check (not wrapped).
        """
        ctx = self._checked_context(context)
        horizon = self._checked_horizon(horizon)
        try:
            q = np.asarray(self._predict(ctx, horizon), dtype=np.float64)
        except (ModelUnavailable, ValueError, ForecastBackendError, DataIntegrityError):
            raise
        except Exception as exc:
            raise ForecastBackendError(f"{self.name}: forecast failed: {type(exc).__name__}: {exc}") from exc
        return self._checked_quantiles(q, horizon)

    def predict_quantiles_batch(self, contexts: Sequence[np.ndarray], horizon: int) -> list[np.ndarray]:
        """:meth:`predict_quantiles` of several contexts with one horizon.

        This default calls :meth:`predict_quantiles` once per context, so its results are those of
        the single-series path by construction. Forecasters whose backend takes a batch of series
        (the TSFMs of :mod:`fwgym.forecasters.tsfm`) override it with one backend call per batch;
        such an override documents how far its results may differ from :meth:`predict_quantiles`
        (float rounding of batched kernels at most) and the forecast store
        (:mod:`fwgym.forecasters.store`) stores batched results only where they were found equal bit
        for bit to the single-series path.

        Args:
            contexts: float arrays (T_i,), each as the ``context`` of :meth:`predict_quantiles`
                (lengths may differ).
            horizon: number of steps, >= 1, for every context.

        Returns:
            one float64 array (horizon, 9) per context, in order.

        Raises:
            as :meth:`predict_quantiles`, for the first context that fails (no partial result).
        """
        return [self.predict_quantiles(c, horizon) for c in contexts]

    def fingerprint(self) -> dict:
        """What this forecaster's forecasts depend on, as JSON-safe data: the forecast store
        (:mod:`fwgym.forecasters.store`) serves stored forecasts only to a forecaster with the same
        fingerprint as the one that computed them.

        The default: the model name, the forecaster's class (module and qualified name), its
        ``revision``, its ``settings`` (every public instance attribute except those of
        :attr:`fingerprint_exclude`, as JSON values: numbers, strings, ``None``, lists; paths as
        strings, classes by qualified name, anything else by its type's qualified name only), its
        ``code`` (:func:`code_digest`: the sha256 of the source file of every class it inherits from,
        so an edited forecaster is another forecaster) and the installed versions of NumPy and of the
        distributions in :attr:`fingerprint_packages`. The TSFMs add the identity of their weights
        (:meth:`fwgym.forecasters.tsfm.HubForecaster.fingerprint`); a plug-in's is made in the evaluating
        process from its files and distribution (:meth:`fwgym.forecasters.hosted.HostedForecaster.fingerprint`).
        A plug-in whose forecasts depend on state that is none of these should override it.

        Returns:
            ``{"model", "class", "revision", "settings", "code", "packages", ...}``.
        """
        cls = type(self)
        skip = {"name", "min_context", "revision", "bounded", "store_audit", *self.fingerprint_exclude}
        settings = {k: _plain(v) for k, v in sorted(vars(self).items()) if not k.startswith("_") and k not in skip}
        return {"model": self.name, "class": f"{cls.__module__}.{cls.__qualname__}", "revision": self.revision,
                "settings": settings, "code": code_digest(cls),
                "packages": package_versions(("numpy",) + tuple(self.fingerprint_packages))}

    def _checked_context(self, context: np.ndarray) -> np.ndarray:
        """The context as float64 (T,) with gaps filled (:func:`fill_gaps`); ValueError if too short."""
        ctx = np.asarray(context, dtype=np.float64).ravel()
        if len(ctx) < self.min_context:
            raise ValueError(f"{self.name}: context has {len(ctx)} steps, at least {self.min_context} needed")
        return fill_gaps(ctx)

    def _checked_horizon(self, horizon) -> int:
        return check_int(f"{self.name}: horizon", horizon, minimum=1)

    def _checked_quantiles(self, q: np.ndarray, horizon: int) -> np.ndarray:
        """A backend's output checked (shape (horizon, 9), finite) and sorted along the level axis."""
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


_FILE_DIGESTS: dict[tuple, str] = {}


def _file_sha256(path: str) -> str:
    """sha256 of a file's bytes, cached per (path, size, mtime)."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    digest = _FILE_DIGESTS.get(key)
    if digest is None:
        with open(path, "rb") as fh:
            digest = _FILE_DIGESTS[key] = hashlib.sha256(fh.read()).hexdigest()
    return digest


def code_digest(cls: type) -> dict[str, str]:
    """``{module: sha256 of its source file}`` of every class in ``cls``'s method resolution order that has
    a source file (``object`` and built-in classes have none): what a forecaster's code is, in its
    :meth:`~QuantileForecaster.fingerprint`. Keyed by module name, so equal code on two machines gives the
    same digest wherever it is installed.

    Code outside these files that the forecast depends on (a helper module it imports) is not covered:
    give its version in :attr:`QuantileForecaster.fingerprint_packages` or override ``fingerprint``.
    """
    out = {}
    for c in cls.__mro__:
        try:
            path = inspect.getsourcefile(c)
        except TypeError:  # object, builtins
            continue
        if path and os.path.isfile(path):
            out[c.__module__] = _file_sha256(os.path.realpath(path))
    return dict(sorted(out.items()))


def package_versions(distributions) -> dict:
    """``{distribution: version or None}`` of installed distributions (read from their metadata, no import)."""
    out = {}
    for d in distributions:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = None
    return out


def _plain(value):
    """A fingerprint setting as JSON data (see :meth:`QuantileForecaster.fingerprint`)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"
