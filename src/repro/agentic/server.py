"""A Search-R1-compatible retrieval server over any `Search` (stdlib HTTP, bound to 127.0.0.1).

    POST /retrieve  {"queries": [str, ...], "topk": int (optional), "return_scores": bool (optional)}
      → 200 {"result": [[{"document": {"id", "contents"}, "score": float}, ...], ...]}   (return_scores)
      → 200 {"result": [[{"id", "contents"}, ...], ...]}                                  (otherwise)
      → 400 / 404 / 405 / 408 / 411 / 413 {"error": "..."} for a malformed, slow or oversized request
      → 500 {"error": "..."} when the search itself fails; 503 when every worker thread is busy

As in Search-R1's `retrieval_server.py`, `topk` defaults to the server's and `return_scores` to false, an empty
query list gets `{"result": []}` (Search-R1's agent posts one on a step where no rollout searches), a blank query
(`<search> </search>`) is searched as any other (a dense retriever returns its top-k, BM25 nothing, as Lucene),
and a `topk` beyond a small corpus returns what there is. Requests are validated (JSON object, known fields,
types, 1 ≤ topk ≤ max_topk, #queries ≤ max_queries, body size) and searched one at a time (retrievers are not
thread-safe). Every failure is answered with a status, never a dropped connection: a socket that stalls for
`read_timeout` seconds gets 408, at most `max_threads` connections are served at once and the others are answered
503 (D105, D194).

    with RetrievalServer(LocalSearch(retriever, store)) as server:    # ephemeral port
        client = RetrievalClient(server.url)

    python -m repro.agentic.server --profile tiny --port 8000          # the profile's agentic retriever
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from repro.agentic.search import Search

HOST = "127.0.0.1"
PATH = "/retrieve"
FIELDS = ("queries", "topk", "return_scores")
MAX_QUERIES = 4096  # per request: a Search-R1 training step posts up to batch 512 x n_agent 5 = 2,560 queries
MAX_THREADS = 16  # connections served at once (D105)


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
    if len(queries) > max_queries:
        raise RequestError(f"'queries' holds {len(queries)} queries, more than the server's --max-queries "
                           f"{max_queries}")
    if invalid := [i for i, q in enumerate(queries) if not q.isascii() and _has_surrogate(q)]:
        raise RequestError(f"query {invalid[0]} is not valid Unicode (it holds a lone surrogate)")
    topk = body.get("topk", default_topk)
    topk = default_topk if topk is None else topk
    if not isinstance(topk, int) or isinstance(topk, bool) or not 1 <= topk <= max_topk:
        raise RequestError(f"'topk' must be an integer in [1, {max_topk}], got {topk!r}")
    return_scores = body.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise RequestError(f"'return_scores' must be a boolean, got {return_scores!r}")
    return queries, topk, return_scores


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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

    default_request_version = "HTTP/1.1"  # so that even the answer to a garbled request line has a status line

    def setup(self):
        self.timeout = self.server.app.read_timeout  # applied to the socket by StreamRequestHandler.setup
        super().setup()
        self.request_version = self.default_request_version

    def parse_request(self) -> bool:
        if super().parse_request():
            if self.request_version != "HTTP/0.9":
                return True
            self.request_version = self.default_request_version
            self._reply(505, {"error": "HTTP/1.0 or HTTP/1.1 is required"})
        elif not self.requestline.strip():  # the stdlib closes on a blank request line without an answer
            self._reply(400, {"error": "the request line is empty"})
        return False

    def log_error(self, format, *args):
        if format.startswith("Request timed out"):  # the stdlib's only notice of a stalled request line or header
            self._reply(408, {"error": f"the request did not arrive within {self.server.app.read_timeout} s"})

    def finish(self):
        super().finish()
        if self.close_connection:  # lingering close: closing on unread input would reset the answer in transit
            try:
                self.connection.shutdown(socket.SHUT_WR)
                self.connection.settimeout(min(self.server.app.read_timeout, 1.0))
                for _ in range(64):  # up to 4 MiB of what the client still sends, then close regardless
                    if not self.connection.recv(65536):
                        break
            except OSError:
                pass

    def _reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()  # ASCII escapes: any text (lone surrogates too) can be sent
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status >= 400:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client has gone; nobody is left to answer
            self.close_connection = True

    def do_GET(self):
        self._reply(405 if self.path == PATH else 404, {"error": f"use POST {PATH}"})

    def do_POST(self):
        try:
            self._reply(200, self.server.app.handle(self.path, self._body()))
        except RequestError as err:
            self._reply(err.status, {"error": str(err)})
        except Exception as err:  # a failure of the search itself: answered, and reported on stderr
            message = f"the search failed: {type(err).__name__}: {err}"
            print(f"retrieval server: {message}", file=sys.stderr, flush=True)
            self._reply(500, {"error": message})

    def _body(self) -> object:
        length = self.headers.get("Content-Length")
        if length is None:
            raise RequestError("a Content-Length header is required", 411)
        if not re.fullmatch(r"[0-9]{1,20}", length.strip()):
            raise RequestError(f"Content-Length must be a non-negative decimal integer, got {length[:40]!r}")
        size = int(length)
        if size > self.server.app.max_body_bytes:
            raise RequestError(f"the body exceeds {self.server.app.max_body_bytes} bytes", 413)
        try:
            data = self.rfile.read(size)
        except TimeoutError:
            raise RequestError(f"the body did not arrive within {self.server.app.read_timeout} s", 408) from None
        if len(data) < size:
            raise RequestError(f"the body has {len(data)} bytes, fewer than its Content-Length {size}")
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as err:  # bad JSON or UTF-8, nesting too deep, an overlong integer
            raise RequestError(f"the body is not valid JSON ({type(err).__name__}: {str(err)[:200]})") from None


BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 41\r\n"
        b"Retry-After: 1\r\nConnection: close\r\n\r\n" b'{"error": "every worker thread is busy"}\n')


class _HTTPServer(ThreadingHTTPServer):
    """One thread per connection, at most `max_threads` at once; a connection beyond them gets 503 at once."""

    daemon_threads = True
    app: RetrievalServer

    request_queue_size = 128  # the listen backlog: connections beyond it would wait for a SYN retry, unanswered

    def __init__(self, address, handler, max_threads: int):
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_threads)

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):  # answered on the accepting thread, briefly
            try:
                request.settimeout(0.2)
                request.sendall(BUSY)
                request.shutdown(socket.SHUT_WR)
                request.recv(65536)  # what the client sent, so that closing does not reset the answer
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class RetrievalServer:
    """Serves `search` on http://127.0.0.1:<port>/retrieve (port 0 = an ephemeral port) from a background
    thread; `close()` (or leaving the `with` block) stops it and frees the port. `read_timeout` (seconds) bounds
    every read of a request; `max_threads` bounds the connections served at once."""

    def __init__(self, search: Search, port: int = 0, default_topk: int = 3, max_topk: int = 100,
                 max_queries: int = MAX_QUERIES, max_body_bytes: int = 16 << 20, read_timeout: float = 30.0,
                 max_threads: int = MAX_THREADS):
        if not 1 <= default_topk <= max_topk or max_queries < 1 or max_body_bytes < 1:
            raise ValueError("need 1 <= default_topk <= max_topk, max_queries >= 1 and max_body_bytes >= 1")
        if not read_timeout > 0 or max_threads < 1:
            raise ValueError("need read_timeout > 0 and max_threads >= 1")
        self.search, self.default_topk, self.max_topk = search, default_topk, max_topk
        self.max_queries, self.max_body_bytes = max_queries, max_body_bytes
        self.read_timeout = read_timeout
        self._lock = threading.Lock()
        self._httpd = _HTTPServer((HOST, port), _Handler, max_threads)
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
        if not queries:
            return {"result": []}
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
    from repro.agentic.search import open_local_search
    from repro.config import load_profile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="profile of params.yaml (default: its `profile` key)")
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--max-queries", type=int, default=MAX_QUERIES,
                        help="queries per request (Search-R1 posts a training step's searches at once: batch size "
                             "x n_agent)")
    parser.add_argument("--max-threads", type=int, default=MAX_THREADS, help="connections served at once; others get 503")
    args = parser.parse_args(argv)
    cfg = load_profile(args.profile)
    search, store = open_local_search(cfg)
    server = RetrievalServer(search, port=args.port, default_topk=cfg.agentic.topk, max_queries=args.max_queries,
                             max_threads=args.max_threads)
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
