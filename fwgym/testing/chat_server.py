"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (standard library only).

It serves ``POST /v1/chat/completions`` from a script, one item per request, and records every
request, so LLM agents and harness faults can be tested without a model::

    server = ScriptedChatServer([completion("hello"), Step(status=500), Step(completion("ok"), sleep=0.2)])
    agent = OpenAIChatAgent("test-model", base_url=server.url)
    ...
    server.close()

Each script item is a :class:`Step` (a body, an HTTP status and/or a delay), a completion dict
(see :func:`completion`), or a callable ``request_json -> either``.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["completion", "Step", "ScriptedChatServer"]


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
    """One scripted response: a completion body, an HTTP error, and/or a delay."""

    def __init__(self, body=None, status=200, sleep=0.0):
        self.body, self.status, self.sleep = body, status, sleep


class ScriptedChatServer:
    """Serves POST /v1/chat/completions from a script; each item is a Step, a completion dict, or a
    callable(request_json) -> either. Records every request (path, headers, body)."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                item = server.script.pop(0) if server.script else Step(completion("script exhausted"))
                if callable(item):
                    item = item(body)
                if not isinstance(item, Step):
                    item = Step(item)
                if item.sleep:
                    time.sleep(item.sleep)
                payload = item.body if item.status == 200 else (item.body or {"error": {"message": "boom", "type": "server_error"}})
                data = json.dumps(payload).encode()
                try:
                    self.send_response(item.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
