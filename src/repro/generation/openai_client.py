"""A client for OpenAI-compatible HTTP servers (a remote teacher such as DeepSeek-R1, or `vllm serve`).

Chat prompts go to `{base_url}/chat/completions`, plain strings to `{base_url}/completions`, one request
per prompt carrying all `n` samples, a few requests in flight at once. 429, 5xx, timeouts and dropped
connections are retried with exponential backoff (or the server's Retry-After); anything else fails at
once with the status and the response body. Standard library only.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from tqdm.auto import tqdm

from repro.generation.base import GenerationParams, Generator, Prompt, cut_at_stop

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


class HTTPGenerationError(RuntimeError):
    """A request the server refused, or that kept failing after every retry."""


class OpenAIClientGenerator(Generator):
    """`base_url` includes the API version, as in the OpenAI SDK (e.g. `http://127.0.0.1:8000/v1`). The API
    key is `api_key`, else the environment variable `api_key_env`; with neither, no Authorization header
    is sent (local servers). `timeout` is per attempt, in seconds."""

    def __init__(self, model: str, *, base_url: str, api_key: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", max_workers: int = 4, timeout: float = 120.0,
                 max_retries: int = 4, backoff: float = 1.0, progress: bool = True):
        if max_workers < 1 or max_retries < 0 or timeout <= 0 or backoff < 0:
            raise ValueError("need max_workers >= 1, max_retries >= 0, timeout > 0 and backoff >= 0")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or os.environ.get(api_key_env)
        self.max_workers, self.timeout = max_workers, timeout
        self.max_retries, self.backoff = max_retries, backoff
        self.progress = progress

    def _generate(self, prompts: list[Prompt], params: GenerationParams) -> list[str]:
        if params.include_stop and params.stop:
            raise ValueError("include_stop is not supported over HTTP: the OpenAI API strips the stop string "
                             "and does not say which one matched")
        pool = ThreadPoolExecutor(self.max_workers)
        try:
            results = pool.map(lambda prompt: self._complete(prompt, params), prompts)
            grouped = list(tqdm(results, total=len(prompts), desc="requests", disable=not self.progress))
        finally:
            pool.shutdown(cancel_futures=True)
        return [text for group in grouped for text in group]

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

    def _complete(self, prompt: Prompt, params: GenerationParams) -> list[str]:
        endpoint = "completions" if isinstance(prompt, str) else "chat/completions"
        response = self._post(f"{self.base_url}/{endpoint}", self._request_body(prompt, params))
        try:
            choices = sorted(response["choices"], key=lambda c: c["index"])
            texts = [c["text"] if isinstance(prompt, str) else c["message"]["content"] for c in choices]
        except (KeyError, TypeError) as err:
            raise HTTPGenerationError(f"malformed response from {endpoint} ({err!r}): {response}") from None
        if len(texts) != params.n or not all(isinstance(t, str) for t in texts):
            raise HTTPGenerationError(f"expected {params.n} text choices from {endpoint}, got {choices}")
        # Servers apply `stop` themselves; cutting again keeps the contract for servers that ignore it.
        return [cut_at_stop(text, params.stop) for text in texts]

    def _post(self, url: str, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode()
        for attempt in range(self.max_retries + 1):
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    payload = response.read()
            except urllib.error.HTTPError as err:
                failure = f"HTTP {err.code}: {err.read().decode(errors='replace')[:2000]}"
                if err.code not in RETRYABLE_STATUSES:
                    raise HTTPGenerationError(f"POST {url} failed with {failure}") from None
                retry_after = err.headers.get("Retry-After")
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as err:
                failure, retry_after = f"{type(err).__name__}: {getattr(err, 'reason', err)}", None
            else:
                try:
                    return json.loads(payload)
                except json.JSONDecodeError:
                    raise HTTPGenerationError(f"POST {url} returned non-JSON: {payload[:2000]!r}") from None
            if attempt < self.max_retries:
                time.sleep(float(retry_after) if retry_after and retry_after.isdigit() else self.backoff * 2**attempt)
        raise HTTPGenerationError(f"POST {url} failed after {self.max_retries + 1} attempts; last: {failure}")
