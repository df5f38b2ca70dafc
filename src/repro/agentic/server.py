"""A Search-R1-compatible retrieval server over any `Search` (stdlib HTTP, bound to 127.0.0.1).

    POST /retrieve  {"queries": [str, ...], "topk": int (optional), "return_scores": bool (optional)}
      → 200 {"result": [[{"document": {"id", "contents"}, "score": float}, ...], ...]}   (return_scores)
      → 200 {"result": [[{"id", "contents"}, ...], ...]}                                  (otherwise)
      → 400 / 404 / 405 / 413 {"error": "..."} for a malformed request

As in Search-R1's `retrieval_server.py`, `topk` defaults to the server's and `return_scores` to false.
Requests are validated (JSON object, known fields, types, 1 ≤ topk ≤ max_topk, 1 ≤ #queries ≤ max_queries,
non-blank queries, body size) and searched one at a time (retrievers are not thread-safe).

    with RetrievalServer(LocalSearch(retriever, store)) as server:    # ephemeral port
        client = RetrievalClient(server.url)

    python -m repro.agentic.server --profile tiny --port 8000          # the profile's agentic retriever
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from repro.agentic.search import Search

HOST = "127.0.0.1"
PATH = "/retrieve"
FIELDS = ("queries", "topk", "return_scores")


class RequestError(ValueError):
    """A request the server rejects, with its HTTP status."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def validate_request(body: object, default_topk: int, max_topk: int, max_queries: int) -> tuple[list[str], int, bool]:
    """(queries, topk, return_scores) of a request body, or RequestError saying what is wrong."""
    if not isinstance(body, dict):
        raise RequestError(f"the body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise RequestError(f"unknown field(s) {unknown}; allowed: {list(FIELDS)}")
    queries = body.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise RequestError("'queries' must be a list of strings")
    if not 1 <= len(queries) <= max_queries:
        raise RequestError(f"'queries' must hold 1 to {max_queries} queries, got {len(queries)}")
    if blank := [i for i, q in enumerate(queries) if not q.strip()]:
        raise RequestError(f"query {blank[0]} is blank")
    topk = body.get("topk", default_topk)
    topk = default_topk if topk is None else topk
    if not isinstance(topk, int) or isinstance(topk, bool) or not 1 <= topk <= max_topk:
        raise RequestError(f"'topk' must be an integer in [1, {max_topk}], got {topk!r}")
    return_scores = body.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise RequestError(f"'return_scores' must be a boolean, got {return_scores!r}")
    return queries, topk, return_scores


def response_body(hits: list[list[dict]], return_scores: bool) -> dict:
    def document(hit: dict) -> dict:
        return {"id": hit["id"], "contents": hit["contents"]}

    if return_scores:
        return {"result": [[{"document": document(h), "score": h["score"]} for h in row] for row in hits]}
    return {"result": [[document(h) for h in row] for row in hits]}


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, *args):  # one line per request would drown the progress bars
        pass

    def _reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._reply(405 if self.path == PATH else 404, {"error": f"use POST {PATH}"})

    def do_POST(self):
        try:
            self._reply(200, self.server.app.handle(self.path, self._body()))
        except RequestError as err:
            self._reply(err.status, {"error": str(err)})

    def _body(self) -> object:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise RequestError("a Content-Length header is required", 411)
        if int(length) > self.server.app.max_body_bytes:
            raise RequestError(f"the body exceeds {self.server.app.max_body_bytes} bytes", 413)
        try:
            return json.loads(self.rfile.read(int(length)))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RequestError(f"the body is not valid JSON ({err})") from None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    app: RetrievalServer


class RetrievalServer:
    """Serves `search` on http://127.0.0.1:<port>/retrieve (port 0 = an ephemeral port) from a background
    thread; `close()` (or leaving the `with` block) stops it and frees the port."""

    def __init__(self, search: Search, port: int = 0, default_topk: int = 3, max_topk: int = 100,
                 max_queries: int = 1024, max_body_bytes: int = 4 << 20):
        if not 1 <= default_topk <= max_topk or max_queries < 1 or max_body_bytes < 1:
            raise ValueError("need 1 <= default_topk <= max_topk, max_queries >= 1 and max_body_bytes >= 1")
        self.search, self.default_topk, self.max_topk = search, default_topk, max_topk
        self.max_queries, self.max_body_bytes = max_queries, max_body_bytes
        self._lock = threading.Lock()
        self._httpd = _HTTPServer((HOST, port), _Handler)
        self._httpd.app = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{PATH}"

    def handle(self, path: str, body: object) -> dict:
        if path != PATH:
            raise RequestError(f"no such endpoint {path!r}; use POST {PATH}", 404)
        queries, topk, return_scores = validate_request(body, self.default_topk, self.max_topk, self.max_queries)
        with self._lock:
            hits = self.search.search(queries, topk)
        return response_body(hits, return_scores)

    def start(self) -> RetrievalServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, name="retrieval-server", daemon=True)
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve from the calling thread until interrupted (Ctrl-C or SIGTERM), then close."""
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> RetrievalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    from repro.agentic.study import open_local_search
    from repro.config import load_profile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="profile of params.yaml (default: its `profile` key)")
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: any free port)")
    args = parser.parse_args(argv)
    cfg = load_profile(args.profile)
    search, store = open_local_search(cfg)
    server = RetrievalServer(search, port=args.port, default_topk=cfg.agentic.topk)
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"serving retriever '{cfg.retrieval.agentic}' of profile {cfg.name} on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


if __name__ == "__main__":
    main()
