"""A local HTTP double of Kimina Lean Server's `POST /api/check`, on 127.0.0.1.

Like the real server it splits each snippet into a header (the leading `import` and blank
lines) and a body, elaborates the body, and reports positions relative to the whole snippet
(the server's `_apply_header_offset`). The body is answered by the REPL double's rules, so the
server decides nothing about mathematics either. `fail_first` makes the first N requests
answer HTTP 500, to exercise the client's retries.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prover_assets_tests.doubles.lean_repl import Double

__all__ = ["KiminaDouble"]


def _split(code: str) -> tuple[str, str, int]:
    lines = code.split("\n")
    index = 0
    while index < len(lines) and (
        not lines[index].strip() or lines[index].strip().startswith("import ")
    ):
        index += 1
    return "\n".join(lines[:index]), "\n".join(lines[index:]), index


def _offset(item: dict[str, Any], lines: int) -> dict[str, Any]:
    shifted = dict(item)
    for name in ("pos", "endPos"):
        if isinstance(item.get(name), dict):
            shifted[name] = {**item[name], "line": item[name]["line"] + lines}
    return shifted


class KiminaDouble:
    def __init__(self, rules: list[dict[str, Any]] | None = None, *, fail_first: int = 0) -> None:
        self._double = Double(rules=rules or [])
        self._lock = threading.Lock()
        self.fail_first = fail_first
        self.requests: list[dict[str, Any]] = []
        self.connections: set[tuple[str, int]] = set()  # client (host, port) pairs seen
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _answer_snippet(self, snippet: dict[str, Any], timeout: float) -> dict[str, Any]:
        header, body, header_lines = _split(snippet["code"])
        if "hang" in body:
            return {
                "id": snippet["id"],
                "time": timeout,
                "error": f"Lean REPL command timed out in {timeout} seconds",
            }
        proof, _, tail = body.partition("\n\n#print axioms ")
        name, _, check = tail.partition("\n\n")
        with self._lock:
            self._double.envs.clear()
            self._double.answer({"cmd": header})
            answer = dict(self._double.answer({"cmd": proof, "env": 0}))
            messages = list(answer.get("messages", []))
            if name:
                printed = self._double.answer(
                    {"cmd": f"#print axioms {name.strip()}", "env": answer["env"]}
                )
                messages += [_offset(m, proof.count("\n") + 2) for m in printed["messages"]]
            if check:
                checked = self._double.answer({"cmd": check, "env": answer["env"]})
                check_line = body[: len(body) - len(check)].count("\n")
                messages += [_offset(m, check_line) for m in checked.get("messages", [])]
        answer["messages"] = [_offset(m, header_lines) for m in messages]
        answer["sorries"] = [_offset(s, header_lines) for s in answer.get("sorries", [])]
        return {"id": snippet["id"], "time": 0.01, "error": None, "response": answer}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the real server (uvicorn) speaks

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                double.requests.append(body)
                double.connections.add(self.client_address)
                if self.path != "/api/check":
                    self.send_error(404)
                    return
                if double.fail_first > 0:
                    double.fail_first -= 1
                    self.send_error(500, "scripted failure")
                    return
                results = [
                    double._answer_snippet(s, body.get("timeout", 30)) for s in body["snippets"]
                ]
                data = json.dumps({"results": results}, ensure_ascii=False).encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def __enter__(self) -> KiminaDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
