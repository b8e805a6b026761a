"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (standard library only).

It serves ``POST /v1/chat/completions`` from a script, one item per request, and records every
request, so LLM agents and harness faults can be tested without a model::

    server = ScriptedChatServer([completion("hello"), Step(status=500), Step(completion("ok"), sleep=0.2)])
    agent = OpenAIChatAgent("test-model", base_url=server.url)
    ...
    server.close()

Each script item is a :class:`Step` (a body, an HTTP status, a delay and/or a slow drip of the body),
a completion dict (see :func:`completion`), or a callable ``request_json -> either``. Once the script
is used up, ``respond`` (a callable ``request_json -> either``) answers every request, so a server can
play a deterministic model for any number of concurrent episodes (:func:`plan_then_answer`);
``delay`` adds a fixed wait before every reply (a model's generation time, for benchmarks).
:func:`unused_url` is an endpoint where nothing listens (a server that is down).
"""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["completion", "Step", "ScriptedChatServer", "plan_then_answer", "unused_url"]


def completion(content=None, tool_calls=None, finish="stop"):
    """A ``chat.completion`` body with one choice: text ``content`` and/or ``tool_calls`` ``[(name, args)]``."""
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                              "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                             for i, (name, args) in enumerate(tool_calls)]
        finish = "tool_calls"
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": "test-model",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}


class Step:
    """One scripted response: a completion body, an HTTP error, and/or a delay.

    Args:
        body: the JSON body (a completion for status 200; default error body otherwise).
        status: HTTP status.
        sleep: seconds to wait before answering.
        drip: send the body one byte every ``drip`` seconds (a server that trickles its reply, so only
            a real deadline, not a per-read timeout, ends the request).
        raw: send these bytes as the body instead of JSON (e.g. ``b"<html>"`` for a 200 that is not JSON).
    """

    def __init__(self, body=None, status=200, sleep=0.0, drip=None, raw=None):
        self.body, self.status, self.sleep, self.drip, self.raw = body, status, sleep, drip, raw


def plan_then_answer(method: str = "weekday_empirical"):
    """A deterministic model for :class:`ScriptedChatServer` (``respond=``): without a tool result in the
    conversation it calls ``classical_plan`` with ``method`` (a native tool call); then it answers in text
    with the plan of the newest tool result. Its replies depend on the request only, so concurrent
    episodes get the same replies as sequential ones."""

    def respond(body):
        for m in reversed(body.get("messages", [])):
            c = m.get("content") or ""
            if m.get("role") in ("tool", "user") and '"plan"' in c:
                data = json.loads(c[c.index("{"): c.rindex("}") + 1])
                decisions = data["result"]["plan"]["decisions"]
                return completion("Final answer:\n```json\n" + json.dumps({"decisions": decisions}) + "\n```")
        return completion(tool_calls=[("classical_plan", {"method": method})])

    return respond


def unused_url() -> str:
    """A ``/v1`` URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class ScriptedChatServer:
    """Serves POST /v1/chat/completions from a script; each item is a Step, a completion dict, or a
    callable(request_json) -> either; then ``respond(request_json)`` (default: a "script exhausted"
    completion). ``delay`` seconds are waited before every reply; ``port`` 0 picks a free port (e.g.
    the port of an earlier :func:`unused_url`: a server that comes back). Records every request
    (path, headers, body); serves requests concurrently (one thread each)."""

    def __init__(self, script=(), *, respond=None, delay: float = 0.0, port: int = 0):
        self.script = list(script)
        self.requests = []
        self.respond, self.delay = respond, float(delay)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                with server._lock:
                    server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                            "body": body})
                    item = server.script.pop(0) if server.script else None
                if item is None:
                    item = server.respond if server.respond is not None else Step(completion("script exhausted"))
                if callable(item):
                    item = item(body)
                if not isinstance(item, Step):
                    item = Step(item)
                if server.delay:
                    time.sleep(server.delay)
                if item.sleep:
                    time.sleep(item.sleep)
                if item.raw is not None:
                    data = bytes(item.raw)
                else:
                    payload = item.body if item.status == 200 else (item.body or {"error": {"message": "boom", "type": "server_error"}})
                    data = json.dumps(payload).encode()
                try:
                    self.send_response(item.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if item.drip:
                        for i in range(len(data)):
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                            time.sleep(item.drip)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # many concurrent clients: no connection waits in a full backlog

        self.httpd = Server(("127.0.0.1", int(port)), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
