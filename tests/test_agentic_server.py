"""The Search-R1-compatible retrieval server and its client, against a real instance on 127.0.0.1 (ephemeral
port) serving BM25 over a small corpus written for the module."""

import contextlib
import email.utils
import http.client
import json
import re
import socket
import string
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repro.agentic.search import LocalSearch, RetrievalClient, RetrievalError, retry_after_seconds
from repro.agentic.server import RetrievalServer
from repro.data.corpus import PassageStore, make_contents
from repro.io import write_jsonl
from repro.retrieval.bm25 import BM25Retriever

PAGES = {
    "Teide National Park": "Teide National Park is a national park located in Tenerife in the Canary Islands.",
    "Garajonay National Park": "Garajonay National Park is located on the island of La Gomera, Canary Islands.",
    "Britney Spears": "Britney Spears was born in McComb, Mississippi, and launched a perfume brand.",
    "Curious (fragrance)": "Curious is a women's fragrance by Britney Spears for Elizabeth Arden.",
    "Mount Teide": "Mount Teide is a volcano on Tenerife and the highest mountain of Spain.",
    "Mona Lisa": "The Mona Lisa is a portrait painting by Leonardo da Vinci kept in the Louvre.",
}


@pytest.fixture(scope="module")
def local_search(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "passages.jsonl"
    write_jsonl(path, [{"id": str(i), "contents": make_contents(t, x)} for i, (t, x) in enumerate(PAGES.items())])
    store = PassageStore(path)
    yield LocalSearch(BM25Retriever.build(store, progress=False), store)
    store.close()


@pytest.fixture(scope="module")
def server(local_search):
    with RetrievalServer(local_search, default_topk=2, max_topk=5, max_queries=4, max_body_bytes=2048) as server:
        yield server


def post(server, body: bytes, path: str = "/retrieve", headers: dict | None = None) -> tuple[int, dict]:
    url = urlsplit(server.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    status, payload = response.status, json.loads(response.read())
    connection.close()
    return status, payload


def test_binds_to_loopback_on_an_ephemeral_port(server):
    url = urlsplit(server.url)
    assert url.hostname == "127.0.0.1" and url.port > 0 and url.path == "/retrieve"


def test_client_gets_what_the_retriever_returns(server, local_search):
    queries = ["where is Teide national park", "who made the fragrance Curious"]
    served = RetrievalClient(server.url).search(queries, topk=3)
    assert served == local_search.search(queries, 3)
    assert [len(hits) for hits in served] == [3, 3]
    assert served[0][0]["contents"].startswith('"Teide National Park"')
    assert served[1][0]["contents"].startswith('"Curious (fragrance)"')


def test_response_format_matches_search_r1(server):
    status, payload = post(server, json.dumps({"queries": ["Mona Lisa painter"], "topk": 1,
                                               "return_scores": True}).encode())
    assert status == 200
    (hit,), = payload["result"]
    assert set(hit) == {"document", "score"} and set(hit["document"]) == {"id", "contents"}
    assert isinstance(hit["score"], float) and hit["document"]["id"] == "5"

    status, payload = post(server, json.dumps({"queries": ["Mona Lisa painter"]}).encode())
    assert status == 200  # topk defaults to the server's, return_scores to false: bare documents
    assert len(payload["result"][0]) == 2 and set(payload["result"][0][0]) == {"id", "contents"}


@pytest.mark.parametrize("body, fragment", [
    ([], "JSON object"),
    ({"queries": "one query"}, "list of strings"),
    ({"queries": ["ok", 3]}, "list of strings"),
    ({"queries": ["q"] * 5}, "more than the server's --max-queries 4"),
    ({"queries": ["q"], "topk": 0}, "'topk'"),
    ({"queries": ["q"], "topk": 6}, "'topk'"),
    ({"queries": ["q"], "topk": "3"}, "'topk'"),
    ({"queries": ["q"], "topk": True}, "'topk'"),
    ({"queries": ["q"], "return_scores": "yes"}, "'return_scores'"),
    ({"queries": ["q"], "k": 3}, "unknown field"),
])
def test_invalid_requests_are_rejected_with_400(server, body, fragment):
    status, payload = post(server, json.dumps(body).encode())
    assert status == 400 and fragment in payload["error"]


def test_malformed_body_path_method_and_size(server):
    assert post(server, b"{not json")[0] == 400
    assert post(server, json.dumps({"queries": ["q"]}).encode(), path="/search")[0] == 404
    assert post(server, json.dumps({"queries": ["x" * 3000]}).encode())[0] == 413
    url = urlsplit(server.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    connection.request("GET", "/retrieve")
    assert connection.getresponse().status == 405
    connection.close()


def test_client_raises_on_errors(server):
    with pytest.raises(RetrievalError, match="HTTP 400"):
        RetrievalClient(server.url).search(["q"], topk=99)
    with pytest.raises(ValueError, match="http"):
        RetrievalClient("127.0.0.1:8000/retrieve")


def test_concurrent_requests_are_answered_correctly(server, local_search):
    queries = ["Teide volcano", "Britney Spears birthplace", "Mona Lisa", "La Gomera park"]
    expected = {q: local_search.search([q], 2) for q in queries}
    results, errors = {}, []

    def ask(query):
        try:
            results[query] = RetrievalClient(server.url).search([query], 2)
        except Exception as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=ask, args=(q,)) for q in queries * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == expected


def test_close_frees_the_port(local_search):
    server = RetrievalServer(local_search).start()
    url = server.url
    assert RetrievalClient(url).search(["Teide"], 1)
    server.close()
    with pytest.raises(RetrievalError):
        RetrievalClient(url, timeout=2).search(["Teide"], 1)


# Search-R1's agent loop as its client speaks it (D194) -----------------------------------------------------------


def search_r1_step(url: str, responses: list[str], topk: int) -> list[str]:
    """One step of Search-R1's agent loop (`LLMGenerationManager.execute_predictions` with `do_search`), client side,
    as Search-R1 writes it: the first `<search>`/`<answer>` pair of each response is its action, with its content
    stripped; every search of the step goes out in one request, even when there is none; the answer is read with
    `["result"]` (a KeyError on any other body); each hit list becomes `Doc i(Title: t) text` lines, popped in order."""
    actions = [re.search(r"<(search|answer)>(.*?)</\1>", r, re.DOTALL) for r in responses]
    queries = [a.group(2).strip() for a in actions if a and a.group(1) == "search"]
    results = requests.post(url, json={"queries": queries, "topk": topk, "return_scores": True}).json()["result"]
    assert len(results) == len(queries)
    information = []
    for ranked in results:
        lines = ""
        for i, hit in enumerate(ranked):
            title, *text = hit["document"]["contents"].split("\n")
            lines += f"Doc {i + 1}(Title: {title}) {chr(10).join(text)}\n"
        information.append(lines)
    observations = []
    for action in actions:
        if action and action.group(1) == "search":
            observations.append(f"\n\n<information>{information.pop(0).strip()}</information>\n\n")
        else:
            observations.append("" if action else "invalid")
    return observations


def test_search_r1s_agent_loop_gets_an_answer_to_every_step(server):
    nobody_searches = search_r1_step(server.url, ["<answer> Tenerife </answer>", "no action"], topk=2)
    assert nobody_searches == ["", "invalid"]  # an empty query list is answered {"result": []}
    observations = search_r1_step(server.url, ["<search> </search>", "<think>hm</think><search>Mona Lisa</search>",
                                               "<answer>x</answer>"], topk=2)
    assert observations[0] == "\n\n<information></information>\n\n"  # blank: no term, no hit, as Lucene
    assert observations[1].startswith('\n\n<information>Doc 1(Title: "Mona Lisa") The Mona Lisa is a portrait')
    assert observations[2] == ""


def test_topk_beyond_the_corpus_returns_every_passage(local_search):
    with RetrievalServer(local_search, max_topk=100) as server:
        status, payload = post(server, json.dumps({"queries": ["Teide", "the of"], "topk": 50}).encode())
    assert status == 200 and [len(hits) for hits in payload["result"]] == [len(PAGES), 0]


def test_a_search_r1_training_step_fits_the_default_query_limit(local_search):
    with RetrievalServer(local_search) as server:  # batch 512 x n_agent 5, Search-R1's defaults
        status, payload = post(server, json.dumps({"queries": ["Mount Teide volcano"] * 2560, "topk": 3}).encode())
    assert status == 200 and len(payload["result"]) == 2560


class SlowSearch:
    """Takes `seconds` per request, as a large index would, so that requests overlap."""

    def __init__(self, search, seconds: float):
        self.inner, self.seconds = search, seconds

    def search(self, queries, topk):
        time.sleep(self.seconds)
        return self.inner.search(queries, topk)


def test_under_load_every_request_is_answered_with_a_status(local_search):
    clients, threads = 64, 4
    with RetrievalServer(SlowSearch(local_search, 0.02), max_threads=threads) as server:
        def ask(i: int) -> int:
            body = json.dumps({"queries": [f"Teide {i}"], "topk": 1}).encode()
            status, _, payload = exchange(server, request_bytes(body, [("Content-Length", str(len(body)))]),
                                          half_close=False)
            assert status == 503 or "Teide" in json.loads(payload)["result"][0][0]["contents"]
            return status

        start = threading.Barrier(clients)
        statuses, errors = [], []

        def client(i: int) -> None:
            start.wait()
            try:
                statuses.append(ask(i))
            except Exception as err:  # a dropped connection or a wrong answer, surfaced below
                errors.append(err)

        pool = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=60)
    assert not errors and len(statuses) == clients and set(statuses) <= {200, 503} and 200 in statuses


# Hostile input (D105): every request gets a well-formed HTTP answer with a status ------------------------------


class FailingSearch:
    """Fails on the query "boom", as a retriever out of memory would; delegates everything else."""

    def __init__(self, search):
        self.inner = search

    def search(self, queries, topk):
        if "boom" in queries:
            raise MemoryError("index shard unavailable")
        return self.inner.search(queries, topk)


@pytest.fixture(scope="module")
def hostile_server(local_search):
    with RetrievalServer(FailingSearch(local_search), default_topk=2, max_topk=5, max_queries=4,
                         max_body_bytes=100_000, read_timeout=0.5) as server:
        yield server


def exchange(server, data: bytes, method: str = "POST", half_close: bool = True) -> tuple[int, dict, bytes]:
    """Send raw bytes, read one answer with http.client's parser (which rejects a malformed one)."""
    url = urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(data)
        if half_close:
            with contextlib.suppress(OSError):  # the server may have answered and closed already
                sock.shutdown(socket.SHUT_WR)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        body = response.read()
        return response.status, dict(response.getheaders()), body


def request_bytes(body: bytes, headers: list[tuple[str, str]], method: str = "POST", path: str = "/retrieve") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
    head += b"".join(f"{name}: {value}\r\n".encode() for name, value in headers)
    return head + b"\r\n" + body


def assert_answered_with_json_error(status, headers, body, expected):
    assert status == expected, body
    assert expected < 400 or "error" in json.loads(body)


@pytest.mark.parametrize("length", ["²", "١٢", "-1", "1e3", "12x", "0x10", "99999999999999999999999", ""])
def test_a_non_ascii_or_invalid_content_length_is_answered_400(hostile_server, length):
    status, headers, body = exchange(hostile_server, request_bytes(b'{"queries": ["q"]}', [("Content-Length", length)]))
    assert_answered_with_json_error(status, headers, body, 400)


@pytest.mark.parametrize("body", [b"[" * 50_000 + b"]" * 50_000, b'{"a":' * 15_000 + b"1" + b"}" * 15_000,
                                  b'{"queries": ["q"], "topk": ' + b"9" * 5000 + b"}", b'"\xff\xfe"',
                                  b'{"queries": ["\\ud800"]}'])
def test_deep_nesting_huge_numbers_and_bad_encodings_are_answered_400(hostile_server, body):
    status, headers, payload = exchange(hostile_server, request_bytes(body, [("Content-Length", str(len(body)))]))
    assert_answered_with_json_error(status, headers, payload, 400)


def test_an_exception_inside_the_search_is_answered_500_with_its_message(hostile_server, capsys):
    body = json.dumps({"queries": ["boom"]}).encode()
    status, headers, payload = exchange(hostile_server, request_bytes(body, [("Content-Length", str(len(body)))]))
    assert status == 500 and json.loads(payload)["error"] == "the search failed: MemoryError: index shard unavailable"
    assert "index shard unavailable" in capsys.readouterr().err
    assert RetrievalClient(hostile_server.url).search(["Teide"], 1)  # and the server keeps serving


def test_a_stalled_request_is_answered_408_after_the_read_timeout(hostile_server):
    started = time.monotonic()
    partial_body = request_bytes(b'{"quer', [("Content-Length", "18")])
    assert exchange(hostile_server, partial_body, half_close=False)[0] == 408
    partial_headers = b"POST /retrieve HTTP/1.1\r\nContent-Le"
    assert exchange(hostile_server, partial_headers, half_close=False)[0] == 408
    assert time.monotonic() - started < 5


def test_a_body_shorter_than_its_content_length_and_odd_request_lines_are_answered(hostile_server):
    assert exchange(hostile_server, request_bytes(b'{"q', [("Content-Length", "18")]))[0] == 400
    assert exchange(hostile_server, b"\r\n\r\n")[0] == 400
    assert exchange(hostile_server, b"POST /retrieve HTTP/0.9\r\n\r\n")[0] == 505
    assert exchange(hostile_server, b"BREW /retrieve HTTP/1.1\r\n\r\n")[0] == 501


def test_connections_beyond_the_thread_bound_are_answered_503(local_search):
    with RetrievalServer(local_search, read_timeout=2.0, max_threads=1) as server:
        url = urlsplit(server.url)
        with socket.create_connection((url.hostname, url.port), timeout=10) as holder:
            holder.sendall(b"POST /retrieve HTTP/1.1\r\n")  # holds the only worker until its read times out
            time.sleep(0.2)
            status, headers, body = exchange(server, request_bytes(b"{}", [("Content-Length", "2")]))
            assert status == 503 and headers["Retry-After"] == "1" and "busy" in json.loads(body)["error"]
        body = json.dumps({"queries": ["Teide"]}).encode()
        for _ in range(50):  # the holder has gone: its worker is free again once it has finished
            if exchange(server, request_bytes(body, [("Content-Length", str(len(body)))]))[0] == 200:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the worker slot was never released")


@contextlib.contextmanager
def at_its_thread_limit(server):
    """The server's only worker held by a connection that sends half a request line (until its read times out)."""
    url = urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as holder:
        holder.sendall(b"POST /retrieve HTTP/1.1\r\n")
        time.sleep(0.2)
        yield


def test_the_client_waits_as_a_busy_server_asks_and_then_gets_its_answer(local_search):
    with RetrievalServer(local_search, read_timeout=0.5, max_threads=1) as server, at_its_thread_limit(server):
        started = time.monotonic()
        (hits,) = RetrievalClient(server.url).search(["Teide volcano"], topk=1)  # 503, Retry-After: 1, then 200
        assert "Teide" in hits[0]["contents"] and time.monotonic() - started >= 0.9


def test_the_client_gives_up_after_its_retries_naming_the_server(local_search):
    with RetrievalServer(local_search, read_timeout=20.0, max_threads=1) as server, at_its_thread_limit(server):
        started = time.monotonic()
        client = RetrievalClient(server.url, retries=3, max_retry_after=0.1)  # the server's 1 s cut to 0.1 s
        with pytest.raises(RetrievalError, match=rf"^{re.escape(server.url)}: still busy after 3 retries over 0\.3 s"
                                                 r".*HTTP 503: .*busy"):
            client.search(["Teide"], topk=1)
        assert 0.3 <= time.monotonic() - started < 5
    with pytest.raises(ValueError, match="retries >= 0"):
        RetrievalClient(server.url, retries=-1)


def test_retry_after_is_read_as_seconds_or_a_date_and_capped():
    assert [retry_after_seconds(v) for v in ("1", " 7 ", "120", None, "soon", "-3")] == [1, 7, 30, 1, 1, 1]
    assert retry_after_seconds("120", cap=5) == 5
    in_ten_seconds = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8 <= retry_after_seconds(in_ten_seconds) <= 10
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0  # a date already past: at once


def test_the_server_binds_only_to_loopback(local_search):
    with RetrievalServer(local_search) as server:
        assert server._httpd.server_address[0] == "127.0.0.1"
        assert urlsplit(server.url).hostname == "127.0.0.1"


HEADER_NAME = st.text(alphabet=string.ascii_letters + string.digits + "-", min_size=1, max_size=20)
HEADER_VALUE = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=40)
JSON_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=12)
REQUEST_LIKE = st.fixed_dictionaries({}, optional={"queries": st.lists(st.text(max_size=30), max_size=5) | JSON_VALUE,
                                                   "topk": st.integers(-2, 8) | JSON_VALUE,
                                                   "return_scores": st.booleans() | JSON_VALUE,
                                                   "other": JSON_VALUE})
BODY = st.one_of(st.binary(max_size=300), JSON_VALUE.map(lambda v: json.dumps(v).encode()),
                 REQUEST_LIKE.map(lambda v: json.dumps(v).encode()),
                 st.integers(0, 3000).map(lambda n: b"[" * n + b"]" * n))
LENGTH = st.one_of(st.just("exact"), st.none(), HEADER_VALUE, st.integers(0, 400).map(str))
HEADERS = st.lists(st.tuples(st.sampled_from(["Content-Type", "Content-Length", "Expect", "Connection",
                                              "Transfer-Encoding", "Accept"]) | HEADER_NAME, HEADER_VALUE), max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(method=st.sampled_from(["POST", "POST", "GET", "PUT", "DELETE", "OPTIONS"]),
       path=st.sampled_from(["/retrieve", "/retrieve", "/", "/retrieve?topk=2", "/%ff"]),
       body=BODY, length=LENGTH, headers=HEADERS)
def test_arbitrary_requests_always_get_a_well_formed_answer_with_a_status(hostile_server, method, path, body, length,
                                                                          headers):
    length_header = [] if length is None else [("Content-Length", str(len(body)) if length == "exact" else length)]
    status, response_headers, payload = exchange(hostile_server, request_bytes(body, length_header + headers,
                                                                               method, path), method)
    assert status in {200, 400, 404, 405, 408, 411, 413, 417, 501}
    if response_headers.get("Content-Type") == "application/json":
        answer = json.loads(payload)
        assert ("result" in answer) if status == 200 else isinstance(answer["error"], str)
