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
the same key write the same reply. An entry that is absent or torn (a file cut short) counts as a miss (and is
rewritten); an entry that reads but is not a chat completion of this format (an edited or foreign file) is an
infrastructure failure, never a reply: :class:`ReplyCacheError` (a :class:`~fwgym.errors.HarnessError`: the
episode ends unscored), and ``fwgym evaluate`` checks the whole folder before any episode
(:meth:`ReplyCache.check`), so neither a malformed entry nor a ``--reply-cache`` that names a file is ever
scored as the agent's failure.
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

from fwgym.errors import HarnessError
from fwgym.jsonl import loads

#: bump when the key or entry format changes (old entries are then misses)
CACHE_VERSION = 1


class ReplyCacheError(HarnessError):
    """The reply cache cannot be used: its folder is a file or cannot be made, or an entry is malformed (the
    message names the file). Kind ``"reply_cache"``; :meth:`ReplyCache.check` says the same as a ValueError."""

    def __init__(self, message: str):
        super().__init__(message, kind="reply_cache")


def entry_problem(entry: Any, response_problem=None) -> str | None:
    """What is wrong with a cache entry's JSON value (``None``: a usable entry of :data:`CACHE_VERSION`);
    ``response_problem(body) -> str | None`` checks the response further (the backend's own check, e.g.
    :func:`fwgym.agents.openai.completion_problem`)."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    if entry.get("version") != CACHE_VERSION:
        return f"version {entry.get('version')!r}, not {CACHE_VERSION}"
    response = entry.get("response")
    if not isinstance(response, dict):
        return "its 'response' is not a JSON object"
    choices = response.get("choices")
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
            and isinstance(choices[0].get("message"), dict)):
        return "its response is not a chat completion (no choices[0].message object)"
    msg = choices[0]["message"]
    if msg.get("content") is not None and not isinstance(msg["content"], str):
        return "its response is not a chat completion (message.content is neither a string nor null)"
    if msg.get("tool_calls") is not None and not isinstance(msg["tool_calls"], list):
        return "its response is not a chat completion (message.tool_calls is not a list)"
    problem = response_problem(response) if response_problem is not None else None
    return f"its response is not a chat completion ({problem})" if problem else None


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
        if self.directory.exists() and not self.directory.is_dir():
            raise ReplyCacheError(f"reply cache {self.directory} is a file, not a folder (--reply-cache DIR)")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReplyCacheError(f"reply cache {self.directory} cannot be made ({type(exc).__name__}: {exc})") from None
        self.hits = self.misses = self.writes = 0
        self._lock = threading.Lock()

    @staticmethod
    def check(directory: str | os.PathLike, response_problem=None) -> None:
        """Check a cache folder before a run: it is a folder (or does not exist yet) and every entry is usable
        (:func:`entry_problem` with ``response_problem``).

        Raises:
            ValueError: one line naming the folder, or the first malformed entry's file (and why).
        """
        d = Path(directory)
        if d.exists() and not d.is_dir():
            raise ValueError(f"--reply-cache {d} is a file, not a folder")
        if not d.is_dir():
            return
        for path in sorted(d.glob("??/*.json")):
            try:
                entry = loads(path.read_text(encoding="utf-8"), str(path), multiline=True)
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"--reply-cache: {path} cannot be read ({type(exc).__name__}: {exc})") from None
            except ValueError as exc:
                raise ValueError(f"--reply-cache: {exc}; remove the entry (its request is then sent again)") from None
            if isinstance(entry, dict) and entry.get("version") != CACHE_VERSION:
                continue  # another format's entry: a miss, rewritten
            problem = entry_problem(entry, response_problem)
            if problem:
                raise ValueError(f"--reply-cache: {path}: malformed entry: {problem}; remove it (its request is then "
                                 + "sent again)")

    @staticmethod
    def key(request: Mapping) -> str:
        """The cache key (64 hex digits) of a request description (JSON data; never include credentials)."""
        return hashlib.sha256(canonical_json({"fwgym_reply_cache": CACHE_VERSION, **request}).encode()).hexdigest()

    def path(self, key: str) -> Path:
        """The entry file of ``key``."""
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored response body of ``key``, or ``None`` (a miss: absent or unreadable)."""
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None
        response = None
        if text is not None:
            try:
                entry = loads(text, str(path), multiline=True)
            except ValueError as exc:
                if "nested deeper" in str(exc):
                    raise ReplyCacheError(f"reply cache entry {exc}") from None
                entry = None  # torn (cut short): a miss, rewritten
            if entry is not None:
                problem = entry_problem(entry)
                if problem and not (isinstance(entry, dict) and entry.get("version") != CACHE_VERSION):
                    raise ReplyCacheError(f"reply cache entry {path} is malformed: {problem}; remove it")
                response = entry["response"] if not problem else None
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


__all__ = ["ReplyCache", "ReplyCacheError", "CACHE_VERSION", "canonical_json", "entry_problem"]
