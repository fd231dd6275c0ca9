"""A minimal OpenAI-compatible chat-completions server of a local vision-language model folder.

On GPU nodes the served models run under ``vllm serve`` (``docs/cluster.md``, "Served models");
this server speaks the same subset of the API for machines without vLLM and for the tests, which
start it on localhost with the tiny Qwen2.5-VL and drive :class:`~guirl.rollout.served.ServedPolicy`
against it. Standard library only (``http.server``); one request generates at a time (a lock), so
it serves correctness, not throughput.

Endpoints:

* ``GET /v1/models``: ``{"object": "list", "data": [{"id": <name>, "object": "model"}]}``;
* ``GET /health``: ``{"status": "ok"}``;
* ``POST /v1/chat/completions``: ``model`` (must be the served name), ``messages`` (string contents,
  or ``text`` and ``image_url`` parts whose URLs are ``data:image/...;base64,...`` or local file
  paths), ``max_tokens``, ``temperature`` (0: greedy), ``top_p``, ``n``, ``seed``, ``logprobs``.
  The reply holds ``choices[i].message.content`` and, with ``logprobs``,
  ``choices[i].logprobs.content``: one ``{"token", "logprob"}`` per generated token, the natural
  log-probability of the token under the model at temperature 1 (one forward pass over prompt and
  answer, as vLLM reports the model's own distribution).

Run it: ``python -m guirl.rollout.openai_server --model <folder> [--name NAME] [--port 8000]
[--min-pixels N --max-pixels N] [--device cuda]`` (``--port 0`` picks a free port; the URL is
printed).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["ChatServer", "from_openai_messages", "main"]


def _image(url: str) -> Any:
    from PIL import Image

    if url.startswith("data:"):
        head, _, data = url.partition(",")
        if ";base64" not in head:
            raise ValueError("an image data URL must be base64-encoded")
        return Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
    path = url[len("file://") :] if url.startswith("file://") else url
    if not Path(path).is_file():
        raise ValueError(f"image {url[:80]!r}: not a data URL and no such file")
    with Image.open(path) as im:
        return im.convert("RGB")


def from_openai_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """OpenAI chat messages -> a prompt ``(messages, images)`` (the inverse of
    :func:`guirl.rollout.served.to_openai_messages`); a malformed message is a ``ValueError``."""
    out, images = [], []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError(f"a message needs a role and a content, got {str(m)[:80]}")
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m["role"], "content": [{"type": "text", "text": content}]})
            continue
        parts = []
        for c in content or ():
            if c.get("type") == "text":
                parts.append({"type": "text", "text": c.get("text", "")})
            elif c.get("type") == "image_url":
                images.append(_image((c.get("image_url") or {}).get("url", "")))
                parts.append({"type": "image"})
            else:
                raise ValueError(f"unsupported content part {c.get('type')!r}")
        out.append({"role": m["role"], "content": parts})
    return out, images


class ChatServer:
    """A model folder served on ``host:port`` (module doc); ``port=0`` takes a free port.
    :meth:`start` serves from a background thread, :meth:`stop` shuts it down; :attr:`url` is
    the API root (``http://host:port/v1``)."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        name: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        min_pixels: int,
        max_pixels: int,
        dtype: str = "float32",
        device: str = "cpu",
        max_tokens_cap: int = 4096,
    ) -> None:
        from guirl.models import load_policy
        from guirl.rollout.policy import HFPolicy

        self.model_dir = Path(model_dir)
        self.name = name or self.model_dir.name
        self.model, self.processor = load_policy(
            self.model_dir, min_pixels=min_pixels, max_pixels=max_pixels, dtype=dtype, device=device
        )
        self.max_tokens_cap = int(max_tokens_cap)
        self._policy = HFPolicy(self.model, self.processor, max_new_tokens=1, batch_size=1, image_cache_bytes=0)
        self._lock = threading.Lock()
        self.requests = 0  # chat completions answered (tests count them)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet: the tests start servers
                return None

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model"}]})
                elif self.path.rstrip("/") == "/health":
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                    reply = server.answer(body)
                except ValueError as e:
                    self._send(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
                    return
                except Exception as e:  # noqa: BLE001 - a model failure is the server's error, reported
                    self._send(500, {"error": {"message": f"{type(e).__name__}: {e}"}})
                    return
                self._send(200, reply)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ChatServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ generation
    def _logprobs(self, prompt: tuple[list[dict[str, Any]], list[Any]], ids: tuple[int, ...]) -> list[float]:
        """Log-probabilities (temperature 1) of the generated ``ids`` after ``prompt``: one forward
        pass over prompt + answer, the multimodal token types extended over the answer (Qwen2.5-VL's
        3-D positions need them)."""
        import torch

        if not ids:
            return []
        enc = self._policy.encode([prompt])
        answer = torch.tensor([list(ids)], dtype=enc["input_ids"].dtype, device=enc["input_ids"].device)
        inputs = {k: enc[k] for k in ("pixel_values", "image_grid_thw") if k in enc}
        inputs["input_ids"] = torch.cat([enc["input_ids"], answer], dim=1)
        inputs["attention_mask"] = torch.cat([enc["attention_mask"], torch.ones_like(answer)], dim=1)
        if "mm_token_type_ids" in enc:
            mm = enc["mm_token_type_ids"]
            inputs["mm_token_type_ids"] = torch.cat([mm, torch.zeros_like(answer, dtype=mm.dtype)], dim=1)
        with torch.no_grad():
            logits = self.model(**inputs, use_cache=False).logits[0, -len(ids) - 1 : -1].float()
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(1, answer[0].unsqueeze(1)).squeeze(1).tolist()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply to one chat-completions request (module doc); a bad request is a ``ValueError``."""
        if body.get("model") not in (None, self.name):
            raise ValueError(f"model {body.get('model')!r} is not served here; this server serves {self.name!r}")
        prompt = from_openai_messages(body.get("messages") or [])
        max_tokens = int(body.get("max_tokens") or 256)
        if not 1 <= max_tokens <= self.max_tokens_cap:
            raise ValueError(f"max_tokens must be in 1..{self.max_tokens_cap}, got {max_tokens}")
        n = int(body.get("n") or 1)
        temperature = float(body.get("temperature", 1.0))
        top_p = float(body.get("top_p", 1.0))
        seed = body.get("seed")
        with self._lock:
            self._policy.max_new_tokens = max_tokens
            comps = self._policy.complete(
                [prompt],
                n=n,
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else 1.0,
                top_p=top_p,
                seed=None if seed is None else int(seed),
            )[0]
            choices = []
            for i, c in enumerate(comps):
                choice: dict[str, Any] = {
                    "index": i,
                    "message": {"role": "assistant", "content": c.text},
                    "finish_reason": "length" if len(c.token_ids) >= max_tokens else "stop",
                }
                if body.get("logprobs"):
                    tok = self.processor.tokenizer
                    lps = self._logprobs(prompt, c.token_ids)
                    choice["logprobs"] = {
                        "content": [{"token": tok.decode([t]), "logprob": lp} for t, lp in zip(c.token_ids, lps)]
                    }
                choices.append(choice)
            self.requests += 1
        return {"object": "chat.completion", "model": self.name, "choices": choices}


def main(argv: list[str] | None = None) -> None:
    """``python -m guirl.rollout.openai_server --model DIR ...`` (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model folder (a full checkpoint)")
    ap.add_argument("--name", default=None, help="the served model name (default: the folder name)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--min-pixels", type=int, required=True)
    ap.add_argument("--max-pixels", type=int, required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    srv = ChatServer(
        a.model,
        name=a.name,
        host=a.host,
        port=a.port,
        min_pixels=a.min_pixels,
        max_pixels=a.max_pixels,
        dtype=a.dtype,
        device=a.device,
    )
    print(f"serving {srv.name} at {srv.url}", flush=True)
    try:
        srv._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv._httpd.server_close()


if __name__ == "__main__":
    main()
