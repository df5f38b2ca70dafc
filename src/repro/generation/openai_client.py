"""A client for OpenAI-compatible HTTP servers (a remote teacher such as DeepSeek-R1, or `vllm serve`).

Chat prompts go to `{base_url}/chat/completions`, plain strings to `{base_url}/completions`, one request
per prompt carrying all `n` samples, a few requests in flight at once. 429, 5xx, timeouts and dropped
connections are retried with exponential backoff (or the server's Retry-After, capped at `max_retry_after`);
anything else fails at once with the status and the response body. A `generate` call gives up once its
`deadline` has passed (D106).

Nothing finished is lost when a call fails: every completed request is kept (keyed by the sha256 of its URL
and body) until a `generate` call returns it, so calling `generate` again with the same prompts sends only
the requests that did not finish. With `cache_path` the kept completions are also appended (fsynced) to a
jsonl file, which a new client (a rerun of the stage) reads back. Standard library only.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import math
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from tqdm.auto import tqdm

from repro.generation.base import GenerationParams, Generator, Prompt, cut_at_stop
from repro.io import detach, read_jsonl

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


class HTTPGenerationError(RuntimeError):
    """A request the server refused, or that kept failing after every retry or past the deadline."""


class _Abandoned(HTTPGenerationError):
    """A request given up because another request of the same call failed."""


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


class OpenAIClientGenerator(Generator):
    """`base_url` includes the API version, as in the OpenAI SDK (e.g. `http://127.0.0.1:8000/v1`). The API
    key is `api_key`, else the environment variable `api_key_env`; with neither, no Authorization header
    is sent (local servers). `timeout` is per attempt, `max_retry_after` caps a server's Retry-After and
    `deadline` bounds a whole `generate` call (None: no bound), all in seconds. `cache_path`: a jsonl file
    that keeps completed requests across processes (see the module docstring)."""

    def __init__(self, model: str, *, base_url: str, api_key: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", max_workers: int = 4, timeout: float = 120.0,
                 max_retries: int = 4, backoff: float = 1.0, max_retry_after: float = 60.0,
                 deadline: float | None = 7200.0, cache_path: str | None = None, progress: bool = True):
        if max_workers < 1 or max_retries < 0 or timeout <= 0 or backoff < 0 or max_retry_after < 0:
            raise ValueError("need max_workers >= 1, max_retries >= 0, timeout > 0, backoff >= 0 and "
                             "max_retry_after >= 0")
        if deadline is not None and not deadline > 0:
            raise ValueError(f"deadline must be positive seconds or None, got {deadline}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or os.environ.get(api_key_env)
        self.max_workers, self.timeout = max_workers, timeout
        self.max_retries, self.backoff, self.max_retry_after = max_retries, backoff, max_retry_after
        self.deadline, self.progress = deadline, progress
        self.cache_path = Path(cache_path) if cache_path else None
        self._lock = threading.Lock()
        self._completed: dict[str, list[str]] = {}  # request key -> texts, until a generate call returns them
        if self.cache_path is not None and self.cache_path.exists():
            self._completed = read_cache(self.cache_path)

    def _generate(self, prompts: list[Prompt], params: GenerationParams) -> list[str]:
        if params.include_stop and params.stop:
            raise ValueError("include_stop is not supported over HTTP: the OpenAI API strips the stop string "
                             "and does not say which one matched")
        stop_at = math.inf if self.deadline is None else time.monotonic() + self.deadline
        requests = [(self._url(prompt), self._request_body(prompt, params)) for prompt in prompts]
        keys = [request_key(url, body) for url, body in requests]
        todo = {key: request for key, request in zip(keys, requests) if key not in self._completed}
        failed = threading.Event()  # stops the other workers from starting a new attempt
        bar = tqdm(total=len(prompts), initial=len(prompts) - len(todo), desc="requests", disable=not self.progress)
        with ThreadPoolExecutor(self.max_workers) as pool:
            futures = [pool.submit(self._complete, key, url, body, params, stop_at, failed)
                       for key, (url, body) in todo.items()]
            for future in futures:
                future.add_done_callback(lambda f: f.cancelled() or f.exception() or bar.update())
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            errors = sorted((f.exception() for f in done if f.exception() is not None),
                            key=lambda err: isinstance(err, _Abandoned))  # the cause first
            for future in pending if errors else ():
                future.cancel()
        bar.close()
        if errors:
            kept = sum(key in self._completed for key in set(keys))
            raise HTTPGenerationError(f"{errors[0]} ({kept} of {len(set(keys))} requests of this call finished "
                                      "and are kept: calling generate again sends only the others)") from errors[0]
        texts = [text for key in keys for text in self._completed[key]]
        for key in set(keys):
            del self._completed[key]
        return texts

    def _url(self, prompt: Prompt) -> str:
        return f"{self.base_url}/{'completions' if isinstance(prompt, str) else 'chat/completions'}"

    def _request_body(self, prompt: Prompt, params: GenerationParams) -> dict:
        body = {"model": self.model, "max_tokens": params.max_new_tokens, "n": params.n, "seed": params.seed,
                "temperature": params.temperature if params.do_sample else 0.0,
                "top_p": params.top_p if params.do_sample else 1.0}
        if params.stop:
            body["stop"] = list(params.stop)
        if isinstance(prompt, str):
            body["prompt"] = prompt
        else:
            body["messages"] = [{"role": m["role"], "content": m["content"]} for m in prompt]
        return body

    def _complete(self, key: str, url: str, body: dict, params: GenerationParams, stop_at: float,
                  failed: threading.Event) -> None:
        try:
            self._keep(key, self._texts(url, body, params, self._post(url, body, stop_at, failed)))
        except Exception:
            failed.set()  # at once, before this worker takes its next request
            raise

    @staticmethod
    def _texts(url: str, body: dict, params: GenerationParams, response: dict) -> list[str]:
        chat = "messages" in body
        try:
            choices = sorted(response["choices"], key=lambda c: c["index"])
            texts = [c["message"]["content"] if chat else c["text"] for c in choices]
        except (KeyError, TypeError) as err:
            raise HTTPGenerationError(f"malformed response from {url} ({err!r}): {response}") from None
        if len(texts) != params.n or not all(isinstance(t, str) for t in texts):
            raise HTTPGenerationError(f"expected {params.n} text choices from {url}, got {choices}")
        # Servers apply `stop` themselves; cutting again keeps the contract for servers that ignore it.
        return [cut_at_stop(text, params.stop) for text in texts]

    def _keep(self, key: str, texts: list[str]) -> None:
        with self._lock:
            self._completed[key] = texts
            if self.cache_path is not None:
                self.cache_path.parent.mkdir(parents=True, exist_ok=True)
                detach(self.cache_path)
                with open(self.cache_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"key": key, "texts": texts}, ensure_ascii=False) + "\n")
                    f.flush()
                    os.fsync(f.fileno())

    def _post(self, url: str, body: dict, stop_at: float, failed: threading.Event) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode()
        failure = "no attempt"
        for attempt in range(self.max_retries + 1):
            remaining = stop_at - time.monotonic()
            if remaining <= 0 or failed.is_set():
                break
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=min(self.timeout, remaining)) as response:
                    payload = response.read()
            except urllib.error.HTTPError as err:
                failure = f"HTTP {err.code}: {err.read().decode(errors='replace')[:2000]}"
                if err.code not in RETRYABLE_STATUSES:
                    raise HTTPGenerationError(f"POST {url} failed with {failure}") from None
                retry_after = retry_after_seconds(err.headers.get("Retry-After"))
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
                failure, retry_after = f"{type(err).__name__}: {getattr(err, 'reason', err)}", None
            else:
                try:
                    return json.loads(payload)
                except json.JSONDecodeError:
                    raise HTTPGenerationError(f"POST {url} returned non-JSON: {payload[:2000]!r}") from None
            if attempt == self.max_retries:
                raise HTTPGenerationError(f"POST {url} failed after {attempt + 1} attempts; last: {failure}")
            pause = self.backoff * 2**attempt if retry_after is None else min(retry_after, self.max_retry_after)
            if time.monotonic() + pause >= stop_at:
                break
            failed.wait(pause)
        if failed.is_set():
            raise _Abandoned(f"POST {url} abandoned after another request of the call failed")
        raise HTTPGenerationError(f"POST {url} stopped: the deadline of {self.deadline} s passed; last: {failure}")


def request_key(url: str, body: dict) -> str:
    """The identity of a request: sha256 of its URL and canonical JSON body (model, prompt, parameters)."""
    return hashlib.sha256(json.dumps([url, body], sort_keys=True).encode()).hexdigest()


def read_cache(path: Path) -> dict[str, list[str]]:
    """The completions kept in a cache file; a last line without its newline (a write cut by a kill) is dropped."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        detach(path)
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
    return {row["key"]: row["texts"] for row in read_jsonl(path)}
