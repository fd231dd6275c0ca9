"""A policy behind an OpenAI-compatible chat-completions endpoint (``vllm serve`` on a GPU node,
or :mod:`guirl.rollout.openai_server` on any machine).

A model too large to load on every training rank (Co-EPG's Qwen2.5-VL-72B / -32B reward
grounders, Co-EPG App. B) runs once behind such an endpoint and every rank sends it requests.
:class:`ServedPolicy` implements :class:`~guirl.rollout.Policy` (``complete``) and
:meth:`ServedPolicy.chat`, which also returns the generated tokens' log-probabilities.

* **Prompts.** A prompt ``(messages, images)`` becomes one request: its ``{"type": "image"}``
  placeholders become ``image_url`` parts holding the images as base64 PNG data URLs, each resized
  first to the size the model sees under the client's pixel budget (``min_pixels`` /
  ``max_pixels``: :func:`guirl.imaging.smart_resize`), so that the server's own resize is the
  identity and the answer's pixel coordinates are in the space ``guirl.prompts.format_context``
  reads (start the server with a ``max_pixels`` at least the client's).
* **Batching.** The prompts of one call go out as concurrent requests, at most
  ``max_concurrency`` at a time (the server batches them); results come back in input order.
* **Timeouts and retries.** Each request waits ``timeout_s`` seconds; a refused connection, a
  timeout, HTTP 429 or 5xx is retried ``max_retries`` times with exponential back-off
  (``backoff_s``, doubled each time). Then :class:`ServerUnavailable` names the URL, the last
  error and how to start a server. Another HTTP error (400, 404: a bad request or an unknown
  model) is :class:`ServedError` at once, with the server's message.
* **Model.** ``model=None`` asks ``GET /v1/models`` once and takes the only model served (more
  than one is an error naming them).

Units: ``timeout_s`` and ``backoff_s`` in seconds; log-probabilities natural logs of the server's
sampling distribution (vLLM: the model's, before temperature).
"""

from __future__ import annotations

import base64
import io
import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from guirl.rollout.policy import Completion, Prompt, open_image

__all__ = ["ServedError", "ServerUnavailable", "ChatResult", "ServedPolicy", "to_openai_messages"]

#: What the error of an unreachable server tells the user to do.
START_HINT = (
    "start one with `vllm serve <model folder> --port <port>` on a GPU node (docs/cluster.md, "
    "'Served models') or `python -m guirl.rollout.openai_server --model <folder> --port <port>`, "
    "and check the URL"
)


class ServedError(ValueError):
    """The server answered a request with an error it will not recover from (a bad request, an
    unknown model); the message holds its reply."""


class ServerUnavailable(ConnectionError):
    """No answer from the server after every retry; the message names the URL and the fix."""


@dataclass(frozen=True)
class ChatResult:
    """One generated answer: ``text``, and, when requested, its ``tokens`` (the server's token
    strings) with their natural-log ``logprobs`` (one per token)."""

    text: str
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = ()


def _png_data_url(image: Any, min_pixels: int | None, max_pixels: int | None) -> str:
    from PIL import Image

    from guirl.imaging import smart_resize

    im = open_image(image).convert("RGB")
    if min_pixels is not None and max_pixels is not None:
        h, w = smart_resize(im.height, im.width, min_pixels=min_pixels, max_pixels=max_pixels)
        if (w, h) != im.size:
            im = im.resize((w, h), Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def to_openai_messages(
    prompt: Prompt, *, min_pixels: int | None = None, max_pixels: int | None = None
) -> list[dict[str, Any]]:
    """A prompt ``(messages, images)`` as OpenAI chat messages: each ``{"type": "image"}``
    placeholder becomes an ``image_url`` part (a PNG data URL, resized to the model's view when
    the budget is given), text parts stay, string contents stay strings. A placeholder count that
    differs from the number of images is a ``ValueError``."""
    messages, images = prompt
    out, k = [], 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m["role"], "content": content})
            continue
        parts = []
        for c in content or ():
            if c.get("type") == "image":
                if k >= len(images):
                    raise ValueError(f"the prompt has more image placeholders than its {len(images)} images")
                parts.append(
                    {"type": "image_url", "image_url": {"url": _png_data_url(images[k], min_pixels, max_pixels)}}
                )
                k += 1
            elif c.get("type") == "text":
                parts.append({"type": "text", "text": c.get("text", "")})
            else:
                raise ValueError(f"unsupported content part {c.get('type')!r} (text and image only)")
        out.append({"role": m["role"], "content": parts})
    if k != len(images):
        raise ValueError(f"the prompt has {k} image placeholders but {len(images)} images")
    return out


class ServedPolicy:
    """A :class:`~guirl.rollout.Policy` served over HTTP (module doc).

    Args:
        base_url: the API root, e.g. ``http://gpu-node-3:8000/v1``.
        model: the served model's name (``None``: the only one the server lists).
        max_new_tokens: generation budget per completion (``max_tokens``).
        min_pixels, max_pixels: the model's pixel budget (images are sent at that size; ``None``:
            as they are).
        timeout_s: seconds a request may take.
        max_retries: retries of a request that failed for a transient reason.
        backoff_s: the first retry's wait, doubled each time.
        max_concurrency: requests in flight at once.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        max_new_tokens: int = 256,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_concurrency: int = 8,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL such as http://host:8000/v1, got {base_url!r}")
        if max_new_tokens < 1 or max_concurrency < 1 or max_retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise ValueError(
                "max_new_tokens >= 1, max_concurrency >= 1, max_retries >= 0, timeout_s > 0 and backoff_s >= 0"
            )
        self.base_url = base_url.rstrip("/")
        self._model = model
        self.max_new_tokens = int(max_new_tokens)
        self.min_pixels, self.max_pixels = min_pixels, max_pixels
        self.timeout_s, self.max_retries, self.backoff_s = float(timeout_s), int(max_retries), float(backoff_s)
        self.max_concurrency = int(max_concurrency)

    def __repr__(self) -> str:
        return f"ServedPolicy({self.base_url!r}, model={self._model!r})"

    # ------------------------------------------------------------------ HTTP
    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = f"{self.base_url}{path}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return json.loads(resp.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", errors="replace")[:500]
                if e.code == 429 or e.code >= 500:
                    last = f"HTTP {e.code}: {detail}"
                    continue
                raise ServedError(f"{method} {url}: HTTP {e.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
                last = f"{type(e).__name__}: {getattr(e, 'reason', e)}"
        raise ServerUnavailable(
            f"{url}: no answer after {self.max_retries + 1} attempts, {self.timeout_s:g} s each ({last}); {START_HINT}"
        )

    @property
    def model(self) -> str:
        """The served model's name (asked once when not given)."""
        if self._model is None:
            listed = [m["id"] for m in self._request("GET", "/models").get("data", [])]
            if len(listed) != 1:
                raise ServedError(f"{self.base_url} serves {listed}; name one (model=...)")
            self._model = listed[0]
        return self._model

    def _one(
        self,
        prompt: Prompt,
        n: int,
        do_sample: bool,
        temperature: float,
        top_p: float,
        seed: int | None,
        logprobs: bool,
    ) -> list[ChatResult]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(prompt, min_pixels=self.min_pixels, max_pixels=self.max_pixels),
            "max_tokens": self.max_new_tokens,
            "n": n if do_sample else 1,
            "temperature": temperature if do_sample else 0.0,
            "top_p": top_p if do_sample else 1.0,
            "logprobs": bool(logprobs),
        }
        if seed is not None:
            body["seed"] = int(seed)
        reply = self._request("POST", "/chat/completions", body)
        out = []
        for ch in sorted(reply.get("choices", []), key=lambda c: c.get("index", 0)):
            text = (ch.get("message") or {}).get("content") or ""
            content = ((ch.get("logprobs") or {}).get("content")) or []
            out.append(
                ChatResult(
                    text,
                    tuple(str(t.get("token", "")) for t in content),
                    tuple(float(t.get("logprob", 0.0)) for t in content),
                )
            )
        if not out:
            raise ServedError(f"{self.base_url}/chat/completions answered without choices: {str(reply)[:300]}")
        return out if do_sample else out[:1] * n

    # ------------------------------------------------------------------ the interface
    def chat(
        self,
        prompts: Sequence[Prompt],
        *,
        n: int = 1,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        logprobs: bool = False,
    ) -> list[list[ChatResult]]:
        """``n`` answers per prompt, in input order, the requests ``max_concurrency`` at a time;
        ``logprobs``: with each token's log-probability. Greedy (``do_sample=False``) asks for one
        answer at temperature 0 and repeats it ``n`` times."""
        if not prompts:
            return []
        _ = self.model  # ask for it once, before the requests (an unreachable server fails here)
        args = (n, do_sample, temperature, top_p, seed, logprobs)
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(prompts))) as pool:
            return list(pool.map(lambda p: self._one(p, *args), prompts))

    def complete(
        self,
        prompts: Sequence[Prompt],
        *,
        n: int = 1,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        """The :class:`~guirl.rollout.Policy` interface: texts only (``token_ids`` empty: the API
        does not return ids)."""
        res = self.chat(prompts, n=n, do_sample=do_sample, temperature=temperature, top_p=top_p, seed=seed)
        return [[Completion(r.text) for r in row] for row in res]
