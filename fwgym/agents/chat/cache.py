"""An on-disk cache of model replies keyed by the full request, so that a rerun with the same settings
costs no tokens (``fwgym evaluate --agent openai --reply-cache DIR``).

The key is the SHA-256 of the canonical JSON (sorted keys, no spaces) of everything that determines
a reply: the endpoint (``base_url``), the model, the messages, the tools and ``tool_choice``, the
sampling settings (temperature, top_p, seed, max_tokens) and any extra body fields, plus
:data:`CACHE_VERSION`. Credentials are never part of a key or an entry. A hit returns the stored
reply body, so an episode replayed from the cache is the episode of the first run: with sampling
(temperature > 0) the cache makes reruns deterministic rather than fresh draws.

Layout: ``DIR/<first 2 hex digits>/<key>.json``, one file per reply, ``{"version", "request":
{"model", "base_url"}, "created", "response": <the chat.completion body>}``. Writes go to a unique
temporary file in the same directory, are fsync'd and renamed over the target (``os.replace``), so
threads and processes may share a cache: a reader sees a whole entry or none, and two writers of
the same key write the same reply. An unreadable entry counts as a miss (and is rewritten).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Mapping

#: bump when the key or entry format changes (old entries are then misses)
CACHE_VERSION = 1


def canonical_json(value: Any) -> str:
    """Canonical JSON of ``value``: sorted keys, no spaces, ASCII, NaN refused."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


class ReplyCache:
    """A directory of cached replies (see the module docstring). Thread- and process-safe.

    Args:
        directory: the cache folder (created if missing).

    Attributes:
        hits, misses, writes: counters of this instance (thread-safe).

    Raises:
        OSError: the folder cannot be created.
    """

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.hits = self.misses = self.writes = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(request: Mapping) -> str:
        """The cache key (64 hex digits) of a request description (JSON data; never include credentials)."""
        return hashlib.sha256(canonical_json({"fwgym_reply_cache": CACHE_VERSION, **request}).encode()).hexdigest()

    def path(self, key: str) -> Path:
        """The entry file of ``key``."""
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored response body of ``key``, or ``None`` (a miss: absent or unreadable)."""
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
            response = entry["response"] if entry.get("version") == CACHE_VERSION else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            response = None
        with self._lock:
            if isinstance(response, dict):
                self.hits += 1
                return response
            self.misses += 1
        return None

    def put(self, key: str, response: Mapping, request: Mapping | None = None) -> None:
        """Store ``response`` (a JSON object) under ``key`` atomically (see the module docstring).

        Args:
            request: a short description stored beside it (model, base_url), for humans.
        """
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        entry = {"version": CACHE_VERSION, "request": dict(request or {}), "created": time.time(),
                 "response": dict(response)}
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{key[:8]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(canonical_json(entry))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        with self._lock:
            self.writes += 1

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("??/*.json"))


__all__ = ["ReplyCache", "CACHE_VERSION", "canonical_json"]
