"""Time-series foundation models behind the :class:`~fwgym.forecasters.base.QuantileForecaster` interface.

* ``chronos_bolt_tiny`` -- ``amazon/chronos-bolt-tiny`` and ``chronos2`` -- ``amazon/chronos-2``, via
  chronos-forecasting's ``BaseChronosPipeline.from_pretrained`` and ``predict_quantiles``;
* ``timesfm25`` -- ``google/timesfm-2.5-200m-pytorch``, via ``timesfm.TimesFM_2p5_200M_torch`` with a
  ``ForecastConfig`` covering 336 context and 336 horizon steps, continuous quantile head, flip
  invariance, positivity inference and quantile-crossing fix (as the FWBench protocol §3.2).

Weights are resolved in this order (DESIGN §6):

1. an explicit local directory (constructor ``local_dir``) or the environment variable
   ``FWGYM_<NAME>_PATH`` (e.g. ``FWGYM_CHRONOS2_PATH``);
2. the Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``);
3. the Hugging Face hub (unless ``HF_HUB_OFFLINE=1``, or the hub's host does not answer a TCP
   connection within 3 s: :func:`hub_unreachable`; without a proxy configured).

A revision may be pinned with the constructor or ``FWGYM_<NAME>_REVISION``. Inference runs on the
CPU in float32 by default (``device`` argument or ``FWGYM_DEVICE``); ``torch_threads`` sets the
thread count. torch, chronos-forecasting and timesfm are imported lazily (the ``tsfm`` extra), so
fwgym imports without them.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from fwgym.forecasters.base import Availability, ForecastBackendError, ModelUnavailable, QuantileForecaster
from fwgym.core.optimizer import QUANTILE_LEVELS

__all__ = ["INSTALL_HINT", "hub_unreachable", "weights_identity", "HubForecaster", "ChronosForecaster",
           "ChronosBoltTiny", "Chronos2", "TimesFM25"]

INSTALL_HINT = "install the extra: pip install 'fwgym[tsfm]' (torch==2.13.0, chronos-forecasting, timesfm)"


def _env_key(name: str, what: str) -> str:
    return f"FWGYM_{name.upper()}_{what}"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
_HUB_PROBES: dict[tuple[str, int], str | None] = {}
_HUB_LOCK = threading.Lock()


def hub_unreachable(endpoint: str | None = None, timeout: float = 3.0) -> str | None:
    """Why the Hugging Face hub cannot be reached from this process, or ``None`` when it can (or
    when a proxy is configured: the download then goes through it and reports its own errors).

    One TCP connection to the endpoint's host (``huggingface_hub.constants.ENDPOINT``, i.e.
    ``HF_ENDPOINT`` or https://huggingface.co), name lookup included, given at most ``timeout``
    seconds; made once per process and host (threads wait for the first probe; its answer is kept
    for the life of the process). Without it a machine without network access spends tens of
    seconds per model in huggingface_hub's download retries before the model is reported unavailable.

    Args:
        endpoint: URL to probe (default: the hub endpoint).
        timeout: seconds to wait for the name lookup and the connection.

    Returns:
        ``None`` or a phrase completing "the hub ...", e.g. ``"huggingface.co:443 is unreachable
        (gaierror: ...)"``.
    """
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return None
    if endpoint is None:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    try:
        url = urlsplit(endpoint)
        host, port = url.hostname, url.port or (80 if url.scheme == "http" else 443)
    except ValueError as exc:
        return f"endpoint {endpoint!r} (HF_ENDPOINT) is not a valid URL ({exc})"
    if not host or url.scheme not in ("http", "https"):
        return f"endpoint {endpoint!r} (HF_ENDPOINT) is not an http(s) URL with a host"
    key = (host, port)
    with _HUB_LOCK:
        if key not in _HUB_PROBES:
            _HUB_PROBES[key] = _probe(host, port, timeout)
        return _HUB_PROBES[key]


def _probe(host: str, port: int, timeout: float) -> str | None:
    """Connect to ``host:port`` on a daemon thread (the name lookup has no timeout of its own) and
    wait at most ``timeout`` seconds for it."""
    answer: list[str | None] = []

    def connect():
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            answer.append(None)
        except Exception as exc:  # OSError; UnicodeError from the name encoder (e.g. a label over 63 characters)
            answer.append(f"({type(exc).__name__}: {exc})")

    thread = threading.Thread(target=connect, name="fwgym-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if not answer:
        return f"{where} did not answer within {timeout:g} s"
    return None if answer[0] is None else f"{where} is unreachable {answer[0]}"


_DIGESTS: dict[tuple, str] = {}


def weights_identity(path: str, source: str, model_id: str, revision: str | None = None) -> str | None:
    """The identity of the weights a Hugging Face model resolves to.

    Args:
        path: a local directory, or the repo id (``source`` ``"hf-cache"`` / ``"hub"``).
        source: the resolution's source (:meth:`HubForecaster.availability`).
        model_id: the Hugging Face repo id.
        revision: the pinned hub revision, if any.

    Returns:
        ``"sha256:<hex>"`` for a local directory (sha256 over the sorted relative paths and sha256
        digests of every file in it; remembered per process while no file's size or mtime changes),
        ``"hf:<repo id>@<commit>"`` for the Hugging Face cache (the snapshot's commit), or ``None``
        when the weights are not on this machine yet (``"hub"``).
    """
    if source in ("hf-cache", "hub"):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model_id, "config.json", revision=revision)
        if not isinstance(cached, str):
            return None
        return f"hf:{model_id}@{Path(cached).parent.name}"
    root = Path(path)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    stamp = (str(root.resolve()), tuple((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if stamp not in _DIGESTS:
        h = hashlib.sha256()
        for p in files:
            d = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    d.update(block)
            h.update(f"{p.relative_to(root).as_posix()}\0{d.hexdigest()}\n".encode())
        _DIGESTS[stamp] = "sha256:" + h.hexdigest()
    return _DIGESTS[stamp]


class HubForecaster(QuantileForecaster):
    """Common weight resolution and lazy loading of a Hugging Face model.

    Args:
        local_dir: directory with the model files (``config.json`` + weights); overrides the env var.
        revision: hub revision (branch, tag or commit) to pin.
        device: torch device string, default ``FWGYM_DEVICE`` or ``"cpu"``.
        torch_threads: if given, ``torch.set_num_threads`` before inference.
        model_id: Hugging Face repo id (default: the model's official id).
    """

    model_id: str = ""
    packages: tuple[str, ...] = ()
    fingerprint_packages = ("torch", "transformers")
    #: where the weights lie and the thread count do not change a forecast (the weights' digest stands for them)
    fingerprint_exclude = ("local_dir", "torch_threads")
    #: contexts per backend call of :meth:`predict_quantiles_batch`
    max_batch: int = 256

    def __init__(self, local_dir: str | os.PathLike | None = None, revision: str | None = None,
                 device: str | None = None, torch_threads: int | None = None, model_id: str | None = None):
        self.local_dir = Path(local_dir) if local_dir else (Path(os.environ[_env_key(self.name, "PATH")])
                                                            if os.environ.get(_env_key(self.name, "PATH")) else None)
        self.revision = revision or os.environ.get(_env_key(self.name, "REVISION")) or None
        self.model_id = model_id or self.model_id
        self.device = device or os.environ.get("FWGYM_DEVICE", "cpu")
        self.torch_threads = torch_threads
        self._model = None
        self._load_error: str | None = None
        self._availability: Availability | None = None
        self._lock = threading.Lock()

    # -- resolution ----------------------------------------------------------------------------

    def _how_to(self) -> str:
        return (f"put the weights of {self.model_id} in a directory and set {_env_key(self.name, 'PATH')}=DIR, "
                f"or download them into the Hugging Face cache (hf download {self.model_id})")

    def _source(self) -> tuple[str | None, str, str]:
        """``(path_or_id, source, reason)``; path_or_id None when nothing is found."""
        missing = [p for p in self.packages if importlib.util.find_spec(p) is None]
        if missing:
            return None, "", f"{self.name}: Python package(s) {missing} not installed; {INSTALL_HINT}"
        if self.local_dir is not None:
            if (self.local_dir / "config.json").is_file():
                return str(self.local_dir), str(self.local_dir), ""
            return None, "", f"{self.name}: local directory {self.local_dir} has no config.json; {self._how_to()}"
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(self.model_id, "config.json", revision=self.revision)
        if isinstance(cached, str):
            return self.model_id, "hf-cache", ""
        if _offline():
            return None, "", (f"{self.name}: weights of {self.model_id} are not in the Hugging Face cache and "
                              f"HF_HUB_OFFLINE=1 forbids downloading; {self._how_to()}")
        unreachable = hub_unreachable()
        if unreachable:
            return None, "", (f"{self.name}: weights of {self.model_id} are not in the Hugging Face cache and the hub "
                              f"{unreachable}; {self._how_to()}")
        return self.model_id, "hub", ""

    def availability(self) -> Availability:
        """Whether weights can be found (checked once per instance; loading errors are remembered)."""
        if self._load_error:
            return Availability(False, self._load_error)
        if self._model is not None:
            return Availability(True, source="loaded")
        if self._availability is None:
            path, source, reason = self._source()
            self._availability = Availability(path is not None, reason, source)
        return self._availability

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            if self._load_error:
                raise ModelUnavailable(self._load_error)
            path, source, reason = self._source()
            if path is None:
                raise ModelUnavailable(reason)
            try:
                import torch

                if self.torch_threads:
                    torch.set_num_threads(int(self.torch_threads))
                self._model = self._load(path, source)
            except ModelUnavailable:
                raise
            except Exception as exc:
                self._load_error = (f"{self.name}: could not load weights from {path} ({source}): "
                                    f"{type(exc).__name__}: {str(exc)[:300]}; {self._how_to()}")
                raise ModelUnavailable(self._load_error) from exc

    def __getstate__(self) -> dict:
        """Pickled without the loaded model and the lock (a worker process loads the weights again)."""
        state = dict(self.__dict__)
        state.update(_model=None, _lock=None, _availability=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def fingerprint(self) -> dict:
        """:meth:`QuantileForecaster.fingerprint` plus ``"weights"``: the identity of the weights
        this instance resolves to (:func:`weights_identity`), ``None`` when none are found yet."""
        out = super().fingerprint()
        path, source, _reason = self._source()
        out["weights"] = None if path is None else weights_identity(path, source, self.model_id, self.revision)
        return out

    def predict_quantiles_batch(self, contexts, horizon: int) -> list[np.ndarray]:
        """:meth:`~fwgym.forecasters.base.QuantileForecaster.predict_quantiles` of several contexts
        through the model's batched inference: contexts of equal length go through the pipeline
        together (at most :attr:`max_batch` per call; contexts of different lengths in separate calls,
        so no context is padded).

        The checks, gap filling and level sort are the single-series path's. The network sees the
        same values in float32; batched matrix kernels may round differently from the one-series
        call (float32 rounding, relative differences of the order of 1e-7 per operation), which the
        forecast store (:func:`fwgym.forecasters.store.build_store`) checks before it stores
        batched results (measured on CPU with the tiny test models: bit-identical).

        Returns:
            one float64 array (horizon, 9) per context, in order.

        Raises:
            as ``predict_quantiles`` (the whole batch fails together).
        """
        ctxs = [self._checked_context(c) for c in contexts]
        horizon = self._checked_horizon(horizon)
        out: list[np.ndarray | None] = [None] * len(ctxs)
        groups: dict[int, list[int]] = {}
        for i, c in enumerate(ctxs):
            groups.setdefault(len(c), []).append(i)
        for rows in groups.values():
            for k in range(0, len(rows), self.max_batch):
                part = rows[k : k + self.max_batch]
                try:
                    self.load()
                    import torch

                    with torch.inference_mode():
                        got = self._infer_batch([ctxs[i] for i in part], horizon)
                except (ModelUnavailable, ValueError, ForecastBackendError):
                    raise
                except Exception as exc:
                    raise ForecastBackendError(f"{self.name}: batched forecast failed: {type(exc).__name__}: {exc}") from exc
                if len(got) != len(part):
                    raise ForecastBackendError(f"{self.name}: the batch of {len(part)} gave {len(got)} forecasts")
                for i, q in zip(part, got):
                    out[i] = self._checked_quantiles(np.asarray(q, dtype=np.float64), horizon)
        return out

    def _hub_kwargs(self, source: str) -> dict:
        kw = {}
        if source in ("hf-cache", "hub"):
            if self.revision:
                kw["revision"] = self.revision
            if source == "hf-cache" or _offline():
                kw["local_files_only"] = True
        return kw

    def _load(self, path: str, source: str):  # pragma: no cover - abstract
        raise NotImplementedError

    def _predict(self, context: np.ndarray, horizon: int) -> np.ndarray:
        self.load()
        import torch

        with torch.inference_mode():
            return self._infer(context, horizon)

    def _infer(self, context: np.ndarray, horizon: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _infer_batch(self, contexts: list[np.ndarray], horizon: int) -> list[np.ndarray]:  # pragma: no cover - abstract
        """Quantiles (horizon, 9) of each context (all of one length) in one backend call."""
        raise NotImplementedError


class ChronosForecaster(HubForecaster):
    """Chronos-Bolt / Chronos-2 through ``chronos.BaseChronosPipeline`` (the pipeline class is read
    from the model config)."""

    packages = ("torch", "chronos")
    fingerprint_packages = ("torch", "transformers", "chronos-forecasting")

    def _load(self, path: str, source: str):
        import torch
        from chronos import BaseChronosPipeline

        return BaseChronosPipeline.from_pretrained(path, device_map=self.device, dtype=torch.float32,
                                                   **self._hub_kwargs(source))

    def _infer(self, context: np.ndarray, horizon: int) -> np.ndarray:
        import torch

        x = torch.tensor(context, dtype=torch.float32)
        q, _mean = self._model.predict_quantiles([x], prediction_length=horizon,
                                                 quantile_levels=list(QUANTILE_LEVELS))
        q = q[0] if isinstance(q, (list, tuple)) else q
        q = q.detach().cpu().numpy() if hasattr(q, "detach") else np.asarray(q)
        return q.reshape(-1, horizon, len(QUANTILE_LEVELS))[0]

    def _infer_batch(self, contexts: list[np.ndarray], horizon: int) -> list[np.ndarray]:
        import torch

        xs = [torch.tensor(c, dtype=torch.float32) for c in contexts]
        kwargs = {"batch_size": len(xs)} if self._takes_batch_size() else {}  # Chronos-2: one forward pass per call
        q, _mean = self._model.predict_quantiles(xs, prediction_length=horizon, quantile_levels=list(QUANTILE_LEVELS),
                                                 **kwargs)
        rows = list(q) if isinstance(q, (list, tuple)) else [q[i] for i in range(len(xs))]
        out = []
        for r in rows:
            r = r.detach().cpu().numpy() if hasattr(r, "detach") else np.asarray(r)
            out.append(r.reshape(-1, horizon, len(QUANTILE_LEVELS))[0])
        return out

    def _takes_batch_size(self) -> bool:
        import inspect

        return "batch_size" in inspect.signature(self._model.predict).parameters


class ChronosBoltTiny(ChronosForecaster):
    name = "chronos_bolt_tiny"
    model_id = "amazon/chronos-bolt-tiny"


class Chronos2(ChronosForecaster):
    name = "chronos2"
    model_id = "amazon/chronos-2"


class TimesFM25(HubForecaster):
    """TimesFM 2.5 (200M, PyTorch) through the ``timesfm`` package.

    Args:
        model_class: the ``timesfm`` model class to load (default ``timesfm.TimesFM_2p5_200M_torch``;
            tests pass a subclass with a tiny architecture).
        max_context, max_horizon: ``ForecastConfig`` limits (rounded up by timesfm to multiples of 32/128).
    """

    name = "timesfm25"
    model_id = "google/timesfm-2.5-200m-pytorch"
    packages = ("torch", "timesfm")
    fingerprint_packages = ("torch", "timesfm")

    def __init__(self, *args, model_class=None, max_context: int = 512, max_horizon: int = 384, **kwargs):
        super().__init__(*args, **kwargs)
        self.model_class = model_class
        self.max_context, self.max_horizon = max_context, max_horizon

    def _load(self, path: str, source: str):
        import timesfm

        cls = self.model_class or timesfm.TimesFM_2p5_200M_torch
        model = cls.from_pretrained(path, torch_compile=False, **self._hub_kwargs(source))
        model.compile(timesfm.ForecastConfig(
            max_context=self.max_context, max_horizon=self.max_horizon, normalize_inputs=True,
            use_continuous_quantile_head=True, force_flip_invariance=True, infer_is_positive=True,
            fix_quantile_crossing=True))
        return model

    def _infer(self, context: np.ndarray, horizon: int) -> np.ndarray:
        if horizon > self.max_horizon:
            raise ValueError(f"timesfm25: horizon {horizon} exceeds max_horizon {self.max_horizon}")
        _point, quant = self._model.forecast(horizon=horizon, inputs=[context.astype(np.float32)])
        quant = np.asarray(quant)
        return quant[0, :horizon, 1:10]  # channel 0 is the mean, 1..9 the deciles 0.1..0.9

    def _infer_batch(self, contexts: list[np.ndarray], horizon: int) -> list[np.ndarray]:
        if horizon > self.max_horizon:
            raise ValueError(f"timesfm25: horizon {horizon} exceeds max_horizon {self.max_horizon}")
        # timesfm decodes ``global_batch_size`` series per call (padding the last call with dummy series);
        # a shallow copy decodes the whole batch at once without changing the shared model's setting
        model = copy.copy(self._model)
        model.global_batch_size = len(contexts)
        _point, quant = model.forecast(horizon=horizon, inputs=[c.astype(np.float32) for c in contexts])
        quant = np.asarray(quant)
        return [quant[i, :horizon, 1:10] for i in range(len(contexts))]
