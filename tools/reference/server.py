#!/usr/bin/env python3
"""The reference engine: a small OpenAI-compatible streaming server around Hugging Face
transformers on CPU (or, with `--device cuda`, on the first CUDA device), serving the same GGUF
weights the candidate serves (transformers dequantizes them to float32).

Owned by kiln-qual's paired serving campaigns (crates/qual-campaign). Standard library HTTP
server + torch + transformers only (the .cache/venv-reference environment); nothing is
downloaded (offline mode is forced before transformers is imported). Requests are served one
at a time (a lock around generation): the reference exists to produce the same greedy bytes
from an independent implementation, not to be fast.

Endpoints: GET /v1/models, GET /health, GET /metrics (Prometheus text), POST /tokenize
({"content": str} -> {"tokens": [int]}), POST /v1/chat/completions (streaming only: a role
chunk, one chunk per decoded text delta, a finish chunk, a usage chunk when
stream_options.include_usage, then `data: [DONE]`). Sampling: temperature 0 is greedy
(argmax); otherwise temperature + top_p with a torch.Generator seeded by the request's
`seed`. `ignore_eos` keeps generating through end-of-sequence tokens. SIGTERM/SIGINT stop the
server cleanly (exit 0).

`--device cuda` refuses to start (exit 1, one line) when torch sees no CUDA device; on CUDA,
TF32 is off for matrix products and cuDNN, float32 matmul precision is "highest" and the
sampler's generator lives on the device (the seeded draws are CUDA's, not the CPU's: sampled
outputs are compared as inputs only). `GET /health` names the device.
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

MAX_BODY = 16 * 1024 * 1024


def log(msg):
    sys.stderr.write("reference-server: %s\n" % msg)
    sys.stderr.flush()


def select_device(kind):
    if kind == "cpu":
        return torch.device("cpu"), "cpu"
    if not torch.cuda.is_available():
        log("--device cuda: torch %s (built for CUDA %s) sees no CUDA device"
            % (torch.__version__, torch.version.cuda))
        sys.exit(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda", 0)
    return dev, "cuda:0 %s" % torch.cuda.get_device_name(dev)


class Engine:
    def __init__(self, gguf, threads, device):
        torch.set_num_threads(threads)
        self.device, self.device_name = select_device(device)
        # transformers must see a directory holding only the GGUF (a tokenizer.json beside it
        # breaks AutoTokenizer): a private directory with one symlink.
        self.dir = tempfile.mkdtemp(prefix="kiln-reference-")
        name = os.path.basename(gguf)
        os.symlink(os.path.abspath(gguf), os.path.join(self.dir, name))
        t0 = time.monotonic()
        self.tok = AutoTokenizer.from_pretrained(self.dir, gguf_file=name)
        self.model = AutoModelForCausalLM.from_pretrained(
            self.dir, gguf_file=name, dtype=torch.float32
        )
        self.model.to(self.device)
        self.model.eval()
        self.load_seconds = time.monotonic() - t0
        eos = self.model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tok.eos_token_id is not None:
            self.eos.add(self.tok.eos_token_id)
        self.lock = threading.Lock()
        self.counters = {"requests_completed": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def prompt_ids(self, messages):
        text = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def generate(self, ids, max_tokens, temperature, top_p, seed, ignore_eos):
        """Yields (token_id, text_delta) pairs, then returns."""
        gen = torch.Generator(device=self.device).manual_seed(seed if seed is not None else 0)
        out = []
        emitted = ""
        past = None
        inp = torch.tensor([ids], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            for _ in range(max_tokens):
                res = self.model(input_ids=inp, cache=past, use_cache=True)
                past = res.cache
                logits = res.logits[0, -1, :].float()
                if ignore_eos:
                    # As llama.cpp does: end-of-sequence tokens cannot be chosen.
                    for e in self.eos:
                        logits[e] = float("-inf")
                if temperature == 0.0:
                    nxt = int(torch.argmax(logits))
                else:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    if top_p < 1.0:
                        sp, si = torch.sort(probs, descending=True)
                        keep = torch.cumsum(sp, dim=-1) - sp < top_p
                        sp = sp * keep
                        probs = torch.zeros_like(probs).scatter(0, si, sp)
                        probs = probs / probs.sum()
                    nxt = int(torch.multinomial(probs, 1, generator=gen))
                out.append(nxt)
                text = self.tok.decode(out, skip_special_tokens=True)
                delta = ""
                if not text.endswith("\ufffd") and text.startswith(emitted):
                    delta = text[len(emitted):]
                    emitted = text
                yield nxt, delta
                if nxt in self.eos and not ignore_eos:
                    return
                inp = torch.tensor([[nxt]], dtype=torch.long, device=self.device)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kiln-qual-reference/1"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_json(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n <= 0 or n > MAX_BODY:
            raise ValueError("missing or oversized body")
        return json.loads(self.rfile.read(n))

    def do_GET(self):
        eng = self.server.engine
        if self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": self.server.model_id, "object": "model", "created": 0,
                 "owned_by": "kiln-qual-reference"}]})
        elif self.path == "/health":
            self.send_json(200, {"status": "ok", "device": eng.device_name})
        elif self.path == "/metrics":
            c = eng.counters
            text = "".join(
                "# TYPE kiln_reference_%s_total counter\nkiln_reference_%s_total %d\n" % (k, k, v)
                for k, v in sorted(c.items()))
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self):
        try:
            req = self.read_json()
        except (ValueError, json.JSONDecodeError) as e:
            self.send_json(400, {"error": {"message": "invalid body: %s" % e}})
            return
        if self.path == "/tokenize":
            content = req.get("content")
            if not isinstance(content, str):
                self.send_json(400, {"error": {"message": "content must be a string"}})
                return
            ids = self.server.engine.tok(content, add_special_tokens=False)["input_ids"]
            self.send_json(200, {"tokens": ids})
        elif self.path == "/v1/chat/completions":
            self.chat(req)
        else:
            self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def chunk(self, obj):
        data = ("data: %s\n\n" % (obj if isinstance(obj, str) else json.dumps(obj))).encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def chat(self, req):
        eng = self.server.engine
        msgs = req.get("messages")
        max_tokens = req.get("max_tokens", 16)
        temperature = float(req.get("temperature", 1.0))
        top_p = float(req.get("top_p", 1.0))
        if (not isinstance(msgs, list) or not req.get("stream") or not isinstance(max_tokens, int)
                or max_tokens < 1 or temperature < 0 or not 0 < top_p <= 1):
            self.send_json(400, {"error": {"message": "unsupported request: streaming chat "
                                           "with messages, max_tokens >= 1, temperature >= 0, "
                                           "0 < top_p <= 1 is required"}})
            return
        ids = eng.prompt_ids(msgs)
        rid = "chatcmpl-ref-%d" % int(time.monotonic_ns())
        base = {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": self.server.model_id}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.chunk(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]))
        n = 0
        finish = "length"
        with eng.lock:
            for tid, delta in eng.generate(ids, max_tokens, temperature, top_p, req.get("seed"),
                                           bool(req.get("ignore_eos", False))):
                n += 1
                if delta:
                    self.chunk(dict(base, choices=[{"index": 0, "delta": {"content": delta},
                                                    "finish_reason": None}]))
                if tid in eng.eos and not req.get("ignore_eos", False):
                    finish = "stop"
            eng.counters["requests_completed"] += 1
            eng.counters["prompt_tokens"] += len(ids)
            eng.counters["completion_tokens"] += n
        self.chunk(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
        if (req.get("stream_options") or {}).get("include_usage"):
            self.chunk(dict(base, choices=[], usage={
                "prompt_tokens": len(ids), "completion_tokens": n,
                "total_tokens": len(ids) + n}))
        self.chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--model-id", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = ap.parse_args()
    engine = Engine(a.gguf, a.threads, a.device)
    log("loaded %s in %.1f s (torch %s, %d threads, device %s)" % (
        a.gguf, engine.load_seconds, torch.__version__, torch.get_num_threads(),
        engine.device_name))
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    srv.engine = engine
    srv.model_id = a.model_id

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log("listening on %s:%d" % (a.host, a.port))
    srv.serve_forever()
    srv.server_close()
    try:
        for f in os.listdir(engine.dir):
            os.unlink(os.path.join(engine.dir, f))
        os.rmdir(engine.dir)
    except OSError:
        pass
    log("stopped")


if __name__ == "__main__":
    main()
