"""A policy behind an OpenAI-compatible endpoint (guirl.rollout.served) and the repository's own
minimal server of a model folder (guirl.rollout.openai_server), on CPU:

* the tiny Qwen2.5-VL served on localhost answers exactly as the same model loaded here, and a
  served Co-EPG grounder gives the points and eq. 6 log-probabilities of the local one;
* timeouts, retries (refused connections, 503), no retry of a bad request (400), a clear error when
  no server answers, and requests sent concurrently with the results in input order: against a
  scripted stand-in server.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from guirl.rollout.served import ServedError, ServedPolicy, ServerUnavailable, to_openai_messages

MIN_PX, MAX_PX = 3136, 141120  # the tiny profile's pixel budget
W, H = 112, 224  # multiples of 28 inside the budget: no resize on either side


def _prompt(text: str, color=(200, 60, 60)):
    im = Image.new("RGB", (W, H), color)
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    return msgs, [im]


# ----------------------------------------------------------------------------- a scripted stand-in server
class _Script:
    """What the stand-in server does: ``replies`` (per request, in order: an HTTP code, or
    ``"sleep"``), ``seen`` (request bodies), the most requests in flight at once."""

    def __init__(self, replies=(), delay=0.0):
        self.replies, self.delay = list(replies), delay
        self.seen: list[dict] = []
        self.inflight = self.peak = 0
        self.lock = threading.Lock()


@pytest.fixture
def stand_in():
    servers = []

    def start(script: _Script) -> str:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                return None

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._send(200, {"data": [{"id": "m"}]})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with script.lock:
                    script.seen.append(body)
                    reply = script.replies.pop(0) if script.replies else 200
                    script.inflight += 1
                    script.peak = max(script.peak, script.inflight)
                try:
                    if reply == "sleep":
                        time.sleep(1.0)
                        reply = 200
                    time.sleep(script.delay)
                    if reply != 200:
                        self._send(reply, {"error": {"message": f"scripted {reply}"}})
                        return
                    text = body["messages"][0]["content"][-1]["text"]
                    self._send(200, {"choices": [{"index": 0, "message": {"content": f"echo {text}"}}]})
                finally:
                    with script.lock:
                        script.inflight -= 1

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_requests_go_out_concurrently_and_come_back_in_order(stand_in):
    script = _Script(delay=0.2)
    client = ServedPolicy(stand_in(script), max_concurrency=4, max_new_tokens=8)
    prompts = [_prompt(f"p{i}") for i in range(8)]
    t0 = time.perf_counter()
    out = client.complete(prompts)
    elapsed = time.perf_counter() - t0
    assert [c[0].text for c in out] == [f"echo p{i}" for i in range(8)]
    assert script.peak == 4 and elapsed < 8 * 0.2  # batched: 4 in flight at once, faster than one by one
    body = script.seen[0]
    assert body["model"] == "m" and body["max_tokens"] == 8 and body["temperature"] == 0.0  # greedy
    assert body["messages"][0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")


def test_transient_failures_are_retried_and_a_bad_request_is_not(stand_in):
    script = _Script(replies=[503, 429, 200])
    client = ServedPolicy(stand_in(script), model="m", backoff_s=0.01)
    assert client.complete([_prompt("x")])[0][0].text == "echo x" and len(script.seen) == 3
    script = _Script(replies=[400])
    client = ServedPolicy(stand_in(script), model="m", backoff_s=0.01)
    with pytest.raises(ServedError, match="HTTP 400: .*scripted 400"):
        client.complete([_prompt("x")])
    assert len(script.seen) == 1  # not retried


def test_a_slow_server_times_out_and_the_error_says_what_to_do(stand_in):
    script = _Script(replies=["sleep", "sleep"])
    url = stand_in(script)
    client = ServedPolicy(url, model="m", timeout_s=0.2, max_retries=1, backoff_s=0.0)
    with pytest.raises(ServerUnavailable, match=r"no answer after 2 attempts, 0.2 s each .*vllm serve"):
        client.complete([_prompt("x")])
    assert len(script.seen) == 2


def test_no_server_is_a_clear_error():
    import socket

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ServedPolicy(f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_s=0.0, timeout_s=1.0)
    with pytest.raises(ServerUnavailable, match=rf"127.0.0.1:{port}/v1/models: no answer after 2 attempts.*vllm serve"):
        client.complete([_prompt("x")])
    with pytest.raises(ValueError, match="http"):
        ServedPolicy("gpu-node:8000/v1")


def test_prompts_become_openai_messages_at_the_models_size():
    import base64
    import io

    msgs, ims = _prompt("hi")
    big = Image.new("RGB", (1080, 2400))
    out = to_openai_messages((msgs, [big]), min_pixels=MIN_PX, max_pixels=MAX_PX)
    url = out[0]["content"][0]["image_url"]["url"]
    sent = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert sent.size == (252, 560)  # smart_resize of 1080 x 2400 under the tiny budget
    assert out[0]["content"][1] == {"type": "text", "text": "hi"}
    with pytest.raises(ValueError, match="1 image placeholders but 2 images"):
        to_openai_messages((msgs, ims * 2))


# ----------------------------------------------------------------------------- the tiny model served
@pytest.fixture(scope="module")
def served_tiny():
    from guirl.models import build_tiny_model
    from guirl.rollout.openai_server import ChatServer

    folder = build_tiny_model()
    with ChatServer(folder, name="tiny", min_pixels=MIN_PX, max_pixels=MAX_PX) as srv:
        yield folder, srv


@pytest.mark.slow
def test_the_served_tiny_model_answers_as_the_local_one(served_tiny):
    from guirl.models import load_policy
    from guirl.rollout import HFPolicy

    folder, srv = served_tiny
    client = ServedPolicy(srv.url, max_new_tokens=12)
    assert client.model == "tiny"
    prompts = [_prompt("Tap the Send button"), _prompt("Open the menu", (20, 200, 20))]
    local = HFPolicy(*load_policy(folder, min_pixels=MIN_PX, max_pixels=MAX_PX), max_new_tokens=12, batch_size=1)
    want = [c[0].text for c in local.complete(prompts)]
    assert [c[0].text for c in client.complete(prompts)] == want
    # the log-probabilities of the answer's tokens: those of one forward pass of the local model
    import torch

    from guirl.rl.logprobs import completion_logprobs, encode_samples

    ids = local.complete(prompts[:1])[0][0].token_ids
    with torch.no_grad():
        lp, _ = completion_logprobs(local.model, encode_samples(local.processor, prompts[:1], [ids]))
    res = client.chat(prompts[:1], logprobs=True)[0][0]
    assert len(res.tokens) == len(ids) == len(res.logprobs) > 0
    assert list(res.logprobs) == pytest.approx(lp[0, : len(ids)].tolist(), abs=1e-4)
    sampled = client.chat(prompts[:1], n=3, do_sample=True, temperature=1.0, seed=3)[0]
    assert len(sampled) == 3
    with pytest.raises(ServedError, match="not served here"):
        ServedPolicy(srv.url, model="other").complete(prompts[:1])


@pytest.mark.slow
def test_a_served_grounder_grounds_as_the_local_grounder(served_tiny, tmp_path):
    # Co-EPG's C-DREM grounders served: the same points, and eq. 6's coordinate-token log-probs
    from guirl.methods.coepg.grounding import (
        ENDPOINT_FILE,
        Grounder,
        ServedGrounder,
        grounder_source,
        load_grounder,
    )
    from guirl.methods.coepg.prompts import PlannerPromptSettings
    from guirl.models import load_policy

    folder, srv = served_tiny
    settings = PlannerPromptSettings(system_prompt="coepg_short", user_template=None, n_history=3)
    queries = [(_prompt("")[1][0], (W, H), "the Send button"), (_prompt("")[1][0], (W, H), "the menu icon")]
    model, proc = load_policy(folder, min_pixels=MIN_PX, max_pixels=MAX_PX)
    local = Grounder(model, proc, settings, min_pixels=MIN_PX, max_pixels=MAX_PX, max_new_tokens=16, batch_size=2)
    ep = grounder_source(srv.url + "#tiny", tmp_path / "grounder0")
    assert json.loads((ep / ENDPOINT_FILE).read_text())["model"] == "tiny"
    assert grounder_source("checkpoints/x", tmp_path / "g1").name == "x"  # a folder stays a folder
    served = load_grounder(ep, settings, min_pixels=MIN_PX, max_pixels=MAX_PX, max_new_tokens=16, batch_size=2)
    assert isinstance(served, ServedGrounder)
    want, got = local.ground(queries), served.ground(queries)
    for w, g in zip(want, got, strict=True):
        assert g.point == w.point
        assert g.token_logprobs == pytest.approx(w.token_logprobs, abs=1e-4)
    # eq. 6's tokens: the ones that hold a digit (the random tiny model writes none, so by hand here)
    from guirl.methods.coepg.grounding import digit_logprobs

    assert digit_logprobs(["(", "1", "4", ",", " 2", ")"], [-1.0, -0.1, -0.2, -1.0, -0.3, -1.0]) == (-0.1, -0.2, -0.3)
