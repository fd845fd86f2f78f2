#!/usr/bin/env python3
"""Hugging Face reference worker for kiln-qual's numerical oracle.

Loads a causal language model with `transformers` under deterministic settings (fixed seed,
deterministic algorithms, one thread, float32, eager attention, no KV cache) on the CPU or, with
`--device cuda`, on the first CUDA device (TF32 off for matrix products and cuDNN, float32
matmul precision "highest", cuBLAS's deterministic workspace `CUBLAS_WORKSPACE_CONFIG=:4096:8`
set by the caller), and writes the next-token logits for given input token ids to a
safetensors file:

  input_ids  I64 [1, n]
  logits     F32 [positions, vocab]   rows from --from-position (default: the last position)

The model is either a directory (config + safetensors weights) or a GGUF file, which
transformers dequantizes, so the reference reads the *same* weights as a GGUF engine. A GGUF
file is loaded from a private directory holding only a link to it (a tokenizer.json beside the
GGUF breaks transformers' GGUF tokenizer path).

It is run by `kiln-qual oracle reference` (qual-oracle's `worker` module) as a contained
process: own session and namespaces, no network, a closed environment with hub access off
(HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1), a start gate and a deadline. It prints exactly one
line `KILN_QUAL_HF_LOGITS_PASS {json}` (compact, sorted keys) on success; on failure
`HF reference worker failed: <reason>` and exit status 1. It never replaces an existing file.
"""

import argparse
import hashlib
import json
import os
import resource
import sys
import tempfile
import time

SEED = 20260715
MARKER = "KILN_QUAL_HF_LOGITS_PASS "
SCHEMA = "kiln-qual.hf-logits.v1"


def fail(msg):
    print(f"HF reference worker failed: {msg}", flush=True)
    sys.exit(1)


def canonical(x):
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def sha256_prefixed(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def wait_gate(path):
    if not os.path.isabs(path):
        fail("the start gate must be an absolute path")
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        try:
            st = os.lstat(path)
            if os.path.islink(path) or not os.path.isfile(path):
                fail("the start gate is not a regular file")
            with open(path, "rb") as f:
                if f.read(8) == b"go\n" and st.st_size == 3:
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    fail("the start gate was not released within 60 s")


def imported_packages():
    """name==version of every installed distribution whose top-level module was imported."""
    import importlib.metadata as md

    loaded = {m.split(".")[0] for m in sys.modules}
    out = set()
    for dist in md.distributions():
        try:
            top = (dist.read_text("top_level.txt") or "").split()
        except Exception:
            top = []
        name = dist.metadata["Name"] or ""
        top = top or [name.replace("-", "_").lower()]
        if any(t in loaded for t in top):
            out.add(f"{name.lower()}=={dist.version}")
    return sorted(out)


def prepare_device(kind):
    """Selects and describes the device; refuses CUDA that torch cannot use, by name."""
    import torch

    if kind == "cpu":
        return torch.device("cpu"), {"kind": "cpu"}
    if not torch.cuda.is_available():
        fail(f"--device cuda: torch {torch.__version__} (built for CUDA {torch.version.cuda}) sees no CUDA device")
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") != ":4096:8":
        fail("--device cuda needs CUBLAS_WORKSPACE_CONFIG=:4096:8 (deterministic cuBLAS)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda", 0)
    major, minor = torch.cuda.get_device_capability(dev)
    return dev, {
        "kind": "cuda",
        "name": torch.cuda.get_device_name(dev),
        "compute_capability": f"{major}.{minor}",
        "cuda_runtime": torch.version.cuda,
        "allow_tf32": False,
    }


def load_model(path, work, device):
    import torch
    from transformers import AutoModelForCausalLM

    kw = dict(dtype=torch.float32, attn_implementation="eager")
    if path.endswith(".gguf"):
        if not os.path.isfile(path):
            fail(f"model {json.dumps(path)} is not a file")
        d = os.path.join(work, "gguf")
        os.mkdir(d)
        name = os.path.basename(path)
        os.symlink(os.path.abspath(path), os.path.join(d, name))
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, **kw)
    else:
        if not os.path.isdir(path):
            fail(f"model {json.dumps(path)} is not a directory")
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **kw)
    model.to(device)
    model.eval()
    return model


def run_one(model, device, vocab, ids, start, output, save_file):
    """One forward pass; writes rows start.. of the logits; returns the output's evidence."""
    import torch
    import transformers

    if max(ids) >= vocab:
        fail(f"token id {max(ids)} is outside the vocabulary of {vocab}")
    with torch.no_grad():
        out = model(torch.tensor([ids], dtype=torch.long, device=device), use_cache=False)
    logits = out.logits[0, start:, :].to(device="cpu", dtype=torch.float32).contiguous()
    if not bool(torch.isfinite(logits).all()):
        fail("the logits contain a non-finite value")
    rows, width = logits.shape
    meta = {
        "schema": SCHEMA,
        "attention_implementation": "eager",
        "dtype": "float32",
        "from_position": str(start),
        "input_token_ids": canonical(ids),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }
    out_dir = os.path.dirname(os.path.abspath(output))
    tmp = os.path.join(out_dir, f".{os.path.basename(output)}.{os.getpid()}.partial")
    save_file({"input_ids": torch.tensor([ids], dtype=torch.int64), "logits": logits}, tmp, metadata=meta)
    os.chmod(tmp, 0o600)
    try:
        os.link(tmp, output)  # fails if the output appeared meanwhile: never replaced
    finally:
        os.unlink(tmp)
    with open(output, "rb") as f:
        data = f.read()
    return {
        "file": output,
        "from_position": start,
        "input_token_count": len(ids),
        "input_token_ids_sha256": sha256_prefixed(canonical(ids).encode()),
        "logits_sha256": sha256_prefixed(logits.numpy().astype("<f4").tobytes()),
        "output_bytes": len(data),
        "output_sha256": sha256_prefixed(data),
        "positions": rows,
        "vocab": width,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--token-ids", help="JSON array of token ids (one sequence)")
    ap.add_argument("--output", help="output safetensors file (one sequence)")
    ap.add_argument("--from-position", type=int, default=None)
    ap.add_argument("--requests", help='JSON {"sequences": [{"token_ids": [...], "from_position": k, "output": "abs path"}]}')
    ap.add_argument("--start-gate", default=None)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = ap.parse_args()
    if a.start_gate:
        wait_gate(a.start_gate)
    t0 = time.monotonic()
    if a.requests:
        if a.token_ids or a.output or a.from_position is not None:
            fail("--requests excludes --token-ids, --output and --from-position")
        with open(a.requests, "rb") as f:
            req = json.loads(f.read())
        if not (isinstance(req, dict) and set(req) == {"sequences"} and isinstance(req["sequences"], list) and req["sequences"]):
            fail('requests must be {"sequences": [...]} with at least one sequence')
        seqs = []
        for s in req["sequences"]:
            if not (isinstance(s, dict) and set(s) == {"token_ids", "from_position", "output"}):
                fail("each sequence has exactly token_ids, from_position and output")
            seqs.append((s["token_ids"], s["from_position"], s["output"]))
    else:
        if not (a.token_ids and a.output):
            fail("give --token-ids and --output, or --requests")
        with open(a.token_ids, "rb") as f:
            ids = json.loads(f.read())
        seqs = [(ids, a.from_position, a.output)]
    checked = []
    for ids, start, output in seqs:
        if not (isinstance(ids, list) and ids and all(type(i) is int and i >= 0 for i in ids)):
            fail("token ids must be a non-empty JSON array of non-negative integers")
        n = len(ids)
        start = n - 1 if start is None else start
        if type(start) is not int or not 0 <= start < n:
            fail(f"from_position {start} is outside 0..{n - 1}")
        if not (isinstance(output, str) and os.path.isabs(output)) and a.requests:
            fail("each output must be an absolute path")
        if os.path.lexists(output):
            fail(f"the output file {json.dumps(output)} already exists")
        checked.append((ids, start, output))

    import torch
    import transformers
    import safetensors
    from safetensors.torch import save_file as safetensors_save

    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    device, device_evidence = prepare_device(a.device)
    with tempfile.TemporaryDirectory() as work:
        model = load_model(a.model, work, device)
        vocab = model.config.vocab_size
        outputs = [run_one(model, device, vocab, ids, start, output, safetensors_save)
                   for ids, start, output in checked]
    try:
        import gguf

        gguf_version = getattr(gguf, "__version__", None)
    except ImportError:
        gguf_version = None
    if gguf_version is None:
        import importlib.metadata as md

        try:
            gguf_version = md.version("gguf")
        except md.PackageNotFoundError:
            gguf_version = "absent"
    packages = imported_packages()
    evidence = {
        "schema": SCHEMA,
        "attention_implementation": "eager",
        "deterministic_algorithms": True,
        "device": device_evidence,
        "dtype": "float32",
        "duration_seconds": time.monotonic() - t0,
        "gguf_version": gguf_version,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "outputs": outputs,
        "packages": packages,
        "packages_sha256": sha256_prefixed(canonical(packages).encode()),
        "python_version": sys.version.split()[0],
        "safetensors_version": safetensors.__version__,
        "seed": SEED,
        "threads": 1,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "vocab": vocab,
    }
    print(MARKER + canonical(evidence), flush=True)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as e:  # one closed failure line, never a traceback on stdout
        fail(f"{type(e).__name__}: {e}")
