"""The Search-R1-compatible retrieval server and its client, against a real instance on 127.0.0.1 (ephemeral
port) serving BM25 over a small corpus written for the module."""

import http.client
import json
import threading
from urllib.parse import urlsplit

import pytest

from repro.agentic.search import LocalSearch, RetrievalClient, RetrievalError
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
    ({"queries": []}, "1 to 4"),
    ({"queries": ["q"] * 5}, "1 to 4"),
    ({"queries": ["ok", "  "]}, "query 1 is blank"),
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
