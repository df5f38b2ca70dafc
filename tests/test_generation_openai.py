"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 (ephemeral port, stopped after the
module), which validates every request and answers with the real tiny Llama through the transformers
backend. Faults (error statuses, a slow answer) are queued per test to exercise retries and errors."""

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from repro.generation import GenerationParams, make_generator
from repro.generation.openai_client import HTTPGenerationError, retry_after_seconds
from repro.generation.transformers_backend import TransformersGenerator

MODEL = "teacher"
API_KEY = "test-key"
COMMON_FIELDS = {"model": str, "max_tokens": int, "n": int, "seed": int, "temperature": (int, float),
                 "top_p": (int, float)}
ENDPOINT_FIELDS = {"/v1/chat/completions": "messages", "/v1/completions": "prompt"}


def validation_error(path: str, body) -> str | None:
    """What is wrong with a request body, or None."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    prompt_field = ENDPOINT_FIELDS[path]
    unknown = set(body) - set(COMMON_FIELDS) - {"stop", prompt_field}
    if unknown:
        return f"unknown fields {sorted(unknown)}"
    for field, kind in COMMON_FIELDS.items():
        if not isinstance(body.get(field), kind) or isinstance(body.get(field), bool):
            return f"{field} is missing or not {kind}"
    if body["max_tokens"] < 1 or body["n"] < 1 or body["temperature"] < 0 or not 0 < body["top_p"] <= 1:
        return "max_tokens, n, temperature or top_p out of range"
    if "stop" in body and not (isinstance(body["stop"], list) and 0 < len(body["stop"]) <= 4
                               and all(isinstance(s, str) and s for s in body["stop"])):
        return "stop must be a list of 1-4 non-empty strings"
    if prompt_field == "prompt":
        return None if isinstance(body["prompt"], str) else "prompt must be a string"
    messages = body.get("messages")
    if not (isinstance(messages, list) and messages and all(
            isinstance(m, dict) and set(m) == {"role", "content"} and m["role"] in ("system", "user", "assistant")
            and isinstance(m["content"], str) for m in messages)):
        return "messages must be a non-empty list of {role, content}"
    return None


class Handler(BaseHTTPRequestHandler):
    server: "OpenAIServer"

    def log_message(self, *args):  # keep pytest output clean
        pass

    def reply(self, status: int, payload: dict, headers: dict | None = None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:  # the client gave up waiting (timeout test)
            pass

    def error(self, status: int, message: str, headers: dict | None = None):
        self.reply(status, {"error": {"message": message, "code": status}}, headers)

    def do_POST(self):
        server = self.server
        server.attempts.append(self.path)
        fault = server.faults.pop(0) if server.faults else None
        if fault is not None and fault[0] == "delay":
            time.sleep(fault[1])
        elif fault is not None:
            status, headers = fault
            return self.error(status, f"injected {status}", headers)
        if self.path not in ENDPOINT_FIELDS:
            return self.error(404, f"no route {self.path}")
        if self.headers.get("Authorization") != f"Bearer {API_KEY}":
            return self.error(401, "invalid API key")
        try:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        except (ValueError, TypeError):
            return self.error(400, "body is not JSON")
        problem = validation_error(self.path, body)
        if problem:
            return self.error(400, problem)
        if body["model"] != MODEL:
            return self.error(404, f"model {body['model']!r} not found")
        server.bodies.append(body)
        prompt = body.get("messages", body.get("prompt"))
        params = GenerationParams(max_new_tokens=body["max_tokens"], stop=body.get("stop", ()), n=body["n"],
                                  seed=body["seed"], do_sample=body["temperature"] > 0,
                                  temperature=body["temperature"] or 1.0, top_p=body["top_p"])
        with server.lock:
            texts = server.generator.generate([prompt], params)
        key = "text" if self.path == "/v1/completions" else "message"
        choices = [{"index": i, key: text if key == "text" else {"role": "assistant", "content": text},
                    "finish_reason": "stop"} for i, text in enumerate(texts)]
        self.reply(200, {"object": "chat.completion" if key == "message" else "text_completion",
                         "model": MODEL, "choices": list(reversed(choices))})


class OpenAIServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, generator):
        super().__init__(("127.0.0.1", 0), Handler)
        self.generator, self.lock = generator, threading.Lock()
        self.faults: list = []  # consumed one per request: ("delay", seconds) or (status, headers)
        self.attempts: list[str] = []
        self.bodies: list[dict] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@pytest.fixture(scope="module")
def local_generator(tiny_llama_dir):
    return TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False)


@pytest.fixture
def server(local_generator):
    httpd = OpenAIServer(local_generator)
    thread = threading.Thread(target=httpd.serve_forever, kwargs=dict(poll_interval=0.05), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def client(server, **kwargs):
    options = dict(base_url=server.base_url, api_key=API_KEY, max_workers=2, backoff=0.01, progress=False)
    return make_generator("openai", MODEL, **{**options, **kwargs})


PROMPTS = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who built the tower?"}],
           "Question: When was it completed?\nAnswer:",
           [{"role": "user", "content": "Name a colour."}]]


def test_greedy_requests_match_local_generation(server, local_generator):
    params = GenerationParams(max_new_tokens=10, stop=["</extract>", "\n\n"])
    completions = client(server).generate(PROMPTS, params)
    assert completions == [local_generator.generate([p], params)[0] for p in PROMPTS]
    assert sorted(server.attempts) == sorted(["/v1/chat/completions", "/v1/completions", "/v1/chat/completions"])
    chat_body = next(b for b in server.bodies if b.get("messages") == PROMPTS[0])
    assert chat_body == {"model": MODEL, "messages": PROMPTS[0], "max_tokens": 10, "n": 1, "seed": 0,
                         "temperature": 0.0, "top_p": 1.0, "stop": ["</extract>", "\n\n"]}


def test_sampled_choices_come_back_in_index_order(server, local_generator):
    params = GenerationParams(max_new_tokens=8, do_sample=True, temperature=0.8, top_p=0.9, n=2, seed=3)
    completions = client(server).generate(PROMPTS[:2], params)
    expected = [text for p in PROMPTS[:2] for text in local_generator.generate([p], params)]
    assert completions == expected and completions[0] != completions[1]


def test_retryable_statuses_and_timeouts_are_retried(server, local_generator):
    server.faults = [(503, {}), (429, {"Retry-After": "0"}), ("delay", 1.0)]
    params = GenerationParams(max_new_tokens=6)
    completions = client(server, max_workers=1, timeout=0.3).generate([PROMPTS[1]], params)
    assert completions == local_generator.generate([PROMPTS[1]], params)
    assert len(server.attempts) == 4  # 503, 429, timed out, answered


def test_persistent_errors_name_the_status_and_body(server):
    server.faults = [(502, {})] * 3
    with pytest.raises(HTTPGenerationError, match=r"failed after 3 attempts; last: HTTP 502: .*injected 502"):
        client(server, max_retries=2).generate(["hi"], GenerationParams(max_new_tokens=4))


def test_client_errors_are_not_retried(server):
    with pytest.raises(HTTPGenerationError, match=r"failed with HTTP 404: .*model 'gpt-x' not found"):
        make_generator("openai", "gpt-x", base_url=server.base_url, api_key=API_KEY, progress=False).generate(
            ["hi"], GenerationParams(max_new_tokens=4))
    assert len(server.attempts) == 1


def test_api_key_from_the_named_environment_variable(server, monkeypatch):
    monkeypatch.setenv("TEACHER_API_KEY", API_KEY)
    assert len(client(server, api_key=None, api_key_env="TEACHER_API_KEY").generate(
        ["hi"], GenerationParams(max_new_tokens=4))) == 1
    monkeypatch.delenv("TEACHER_API_KEY")
    with pytest.raises(HTTPGenerationError, match="HTTP 401: .*invalid API key"):
        client(server, api_key=None, api_key_env="TEACHER_API_KEY").generate(["hi"])


def test_the_server_rejects_invalid_requests(server):
    body = {"model": MODEL, "messages": [{"role": "user"}], "max_tokens": 4, "n": 1, "seed": 0,
            "temperature": 0.0, "top_p": 1.0}
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {API_KEY}"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as failure:
        urllib.request.urlopen(request, timeout=5)
    assert failure.value.code == 400 and b"messages must be" in failure.value.read()


def test_included_stop_strings_are_refused(server):
    with pytest.raises(ValueError, match="include_stop is not supported over HTTP"):
        client(server).generate(["hi"], GenerationParams(stop="</extract>", include_stop=True))
    assert server.attempts == []


def test_retry_after_is_capped(server, local_generator):
    server.faults = [(503, {"Retry-After": "3600"}), (429, {"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"})]
    params = GenerationParams(max_new_tokens=4)
    started = time.monotonic()
    completions = client(server, max_retry_after=0.05).generate(["hi"], params)
    assert time.monotonic() - started < 5 and len(server.attempts) == 3
    assert completions == local_generator.generate(["hi"], params)


def test_retry_after_header_values():
    assert retry_after_seconds("7") == 7.0 and retry_after_seconds("1.5") == 1.5
    assert retry_after_seconds("-3") == 0.0 and retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert retry_after_seconds(None) is retry_after_seconds("soon") is retry_after_seconds("nan") is None


def test_a_call_stops_at_its_overall_deadline(server):
    server.faults = [(503, {"Retry-After": "1"})] * 20
    started = time.monotonic()
    with pytest.raises(HTTPGenerationError, match=r"deadline of 0.5 s passed; last: HTTP 503"):
        client(server, max_retries=20, deadline=0.5).generate(["hi"], GenerationParams(max_new_tokens=4))
    assert time.monotonic() - started < 2 and len(server.attempts) == 1  # a wait past the deadline is not begun
    server.faults = [("delay", 1.0)]
    started = time.monotonic()
    with pytest.raises(HTTPGenerationError, match="deadline"):  # the attempt's timeout shrinks to what is left
        client(server, timeout=30, deadline=0.3).generate(["hi"], GenerationParams(max_new_tokens=4))
    assert time.monotonic() - started < 1


def test_finished_requests_of_a_failed_call_are_kept_and_not_sent_again(server, local_generator, tmp_path):
    params = GenerationParams(max_new_tokens=6)
    expected = [local_generator.generate([p], params)[0] for p in PROMPTS]
    server.faults = [("delay", 0), ("delay", 0), (400, {})]  # one worker: the third request is refused
    cache = tmp_path / "requests.jsonl"
    with pytest.raises(HTTPGenerationError, match=r"HTTP 400.*\(2 of 3 requests of this call finished and are kept"):
        client(server, max_workers=1, cache_path=str(cache)).generate(PROMPTS, params)
    assert len(server.attempts) == 3 and len(cache.read_text().splitlines()) == 2
    with open(cache, "a") as f:
        f.write('{"key": "torn by a ki')  # a write cut by a kill is dropped on reading
    rerun = client(server, max_workers=1, cache_path=str(cache))  # a new process: the kept two come from the file
    assert rerun.generate(PROMPTS, params) == expected
    assert len(server.attempts) == 4  # only the refused request was sent again


def test_finished_requests_are_kept_in_memory_without_a_cache_file(server, local_generator):
    params = GenerationParams(max_new_tokens=6)
    generator = client(server, max_workers=1)
    server.faults = [("delay", 0), (404, {})]
    with pytest.raises(HTTPGenerationError, match=r"1 of 3 requests"):
        generator.generate(PROMPTS, params)
    assert generator.generate(PROMPTS, params) == [local_generator.generate([p], params)[0] for p in PROMPTS]
    assert len(server.attempts) == 2 + 2  # the failed call sent two (the third was never started), the rerun two
