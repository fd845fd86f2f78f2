#!/usr/bin/env python3
"""The steps of scripts/device-check (issue 28): prepare the carry here, run on a lent NVIDIA
machine, import the bundle back. Python standard library only (the device's python3 is the
one that holds PyTorch; nothing can be downloaded there).

Every external command is logged with its exit status and duration to the log (on stderr and
in $OUT/device-check.log); a step that fails is recorded and the independent steps after it
still run, so one failure does not lose the rest of the evidence; the exit status is 1 when a
required step failed, 3 when the run was refused before anything ran.
"""

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NVIDIA_SMI_QUERY = "index,name,uuid,pci.bus_id,compute_cap,memory.total,memory.free,driver_version"
SEED = 20261203
ORACLE_TOKENS = 24
ORACLE_FROM = 16
FIXED_DATE = "2026-12-03T00:00:00Z"


class Log:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8") if path else None

    def __call__(self, msg):
        line = "device-check: %s" % msg
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return "sha256:" + h.hexdigest()


class Runner:
    """Runs commands, logs them, and keeps each step's outcome for the summary."""

    def __init__(self, log, env, deadline=None):
        self.log = log
        self.env = env
        self.steps = []
        # Monotonic time by which every command must have ended, leaving time to bundle.
        self.deadline = deadline

    def cmd(self, step, argv, cwd=ROOT, stdout=None, required=True, ok_codes=(0,), env=None):
        t0 = time.monotonic()
        self.log("%s: $ %s" % (step, " ".join(argv)))
        limit = 900 if self.deadline is None else max(5.0, self.deadline - t0)
        try:
            with open(stdout, "wb") if stdout else open(os.devnull, "wb") as out:
                p = subprocess.run(argv, cwd=cwd, env=env or self.env,
                                   stdout=out if stdout else subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=limit)
            code, err = p.returncode, p.stderr.decode("utf-8", "replace")
            text = "" if stdout else p.stdout.decode("utf-8", "replace")
        except (OSError, subprocess.TimeoutExpired) as e:
            code, err, text = None, str(e), ""
        dt = time.monotonic() - t0
        ok = code in ok_codes
        for line in (text + err).strip().splitlines()[-40:]:
            self.log("%s:   %s" % (step, line))
        ended = "did not run" if code is None else "exit %d" % code
        self.log("%s: %s in %.1f s%s" % (step, ended, dt, "" if ok else " (FAILED)"))
        self.steps.append({"step": step, "argv": argv, "exit": code, "seconds": round(dt, 3),
                           "required": required, "ok": ok})
        return ok, text

    def failed_required(self):
        return [s["step"] for s in self.steps if s["required"] and not s["ok"]]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---------------------------------------------------------------------------------------------
# prepare (here)


def glibc_needs(binary):
    """The highest GLIBC_x.y symbol version the binary asks for (objdump -T), or None."""
    try:
        out = subprocess.run(["objdump", "-T", binary], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    best = None
    for tok in out.decode("utf-8", "replace").split():
        tok = tok.strip("()")
        if tok.startswith("GLIBC_") and tok[6:].replace(".", "").isdigit():
            v = tuple(int(x) for x in tok[6:].split("."))
            best = max(best or v, v)
    return ".".join(map(str, best)) if best else None


def prepare(a):
    carry = os.path.join(ROOT, a.carry)
    if os.path.lexists(carry):
        sys.exit("device-check: prepare: %s exists; remove it first (nothing is replaced)" % a.carry)
    os.makedirs(os.path.join(carry, "wheels"))
    shutil.copy2(a.kiln_qual, os.path.join(carry, "kiln-qual"))
    subprocess.run([sys.executable, os.path.join(ROOT, "tools/make_tiny_gguf.py"),
                    os.path.join(carry, "vocab.gguf"), "--vocab-from", a.vocab_from,
                    "--vocab-only"], check=True)
    if not a.no_downloads:
        # The PyPI wheel of the same gguf the reference environment pins, through pip.
        pin = [l.strip() for l in open(os.path.join(ROOT, "tools/reference/requirements.txt"))
               if l.startswith("gguf==")][0]
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary=:all:", "-d", os.path.join(carry, "wheels"), pin],
                       check=True)
        # Debian's git, unpacked there only when the image has none (apt's own client and
        # configuration: no mirror is named here).
        os.makedirs(os.path.join(carry, "git"))
        subprocess.run(["apt-get", "download", "git"], cwd=os.path.join(carry, "git"), check=True)
    files = {}
    for d, _, names in os.walk(carry):
        for n in names:
            p = os.path.join(d, n)
            files[os.path.relpath(p, carry)] = {"sha256": sha256_file(p), "bytes": os.path.getsize(p)}
    manifest = {"schema": "kiln-qual.device-check-carry.v1", "files": files,
                "kiln_qual_glibc_needs": glibc_needs(a.kiln_qual)}
    with open(os.path.join(carry, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    total = sum(v["bytes"] for v in files.values())
    tree = sum(os.path.getsize(os.path.join(ROOT, f)) for f in subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
        if f and os.path.isfile(os.path.join(ROOT, f)))
    # A carry without downloads is a rehearsal's (it never travels): no size limit.
    if not a.no_downloads and total + tree > 60 << 20:
        sys.exit("device-check: prepare: the carry (%.1f MB) and the working tree (%.1f MB) exceed "
                 "what travels to the device (64 MiB, with room for untracked files); build "
                 "without debug information (the release profile)" % (total / 1e6, tree / 1e6))
    print("device-check: prepared %s (%d files, %.1f MB; the binary needs glibc %s or newer)"
          % (a.carry, len(files), total / 1e6, manifest["kiln_qual_glibc_needs"] or "?"))


# ---------------------------------------------------------------------------------------------
# run (there)


def ensure_gguf(r, py, carry):
    ok, _ = r.cmd("gguf-present", [py, "-c", "import gguf"], required=False)
    if ok:
        return True
    wheels = sorted(os.path.join(carry, "wheels", w) for w in os.listdir(os.path.join(carry, "wheels"))
                    if w.endswith(".whl")) if os.path.isdir(os.path.join(carry, "wheels")) else []
    if not wheels:
        r.log("gguf is not importable and no wheel was carried")
        return False
    ok, _ = r.cmd("gguf-install", [py, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                   "--no-cache-dir"] + wheels)
    return ok


def ensure_git(r, carry):
    if shutil.which("git", path=r.env["PATH"]):
        return True
    debs = sorted(os.listdir(os.path.join(carry, "git"))) if os.path.isdir(os.path.join(carry, "git")) else []
    if not debs:
        r.log("git is not on PATH and none was carried")
        return False
    dest = "/opt/kiln-qual-git"
    for d in debs:
        r.cmd("git-unpack", ["dpkg-deb", "-x", os.path.join(carry, "git", d), dest])
    r.env["PATH"] = dest + "/usr/bin:" + r.env["PATH"]
    return bool(shutil.which("git", path=r.env["PATH"]))


def raw_probes(r, raw, rehearse):
    os.makedirs(raw)
    r.cmd("raw-uname", ["uname", "-a"], stdout=os.path.join(raw, "uname.txt"), required=False)
    r.cmd("raw-ldd", ["ldd", "--version"], stdout=os.path.join(raw, "ldd-version.txt"), required=False)
    if rehearse:
        return
    r.cmd("raw-nvidia-smi-query", ["nvidia-smi", "--query-gpu=" + NVIDIA_SMI_QUERY,
                                   "--format=csv,noheader,nounits"],
          stdout=os.path.join(raw, "nvidia-smi-query.txt"))
    r.cmd("raw-nvidia-smi-q", ["nvidia-smi", "-q"], stdout=os.path.join(raw, "nvidia-smi-q.txt"),
          required=False)
    r.cmd("raw-nvidia-smi-L", ["nvidia-smi", "-L"], stdout=os.path.join(raw, "nvidia-smi-L.txt"),
          required=False)
    r.cmd("raw-nvcc", ["nvcc", "--version"], stdout=os.path.join(raw, "nvcc-version.txt"),
          required=False)
    if os.path.exists("/proc/driver/nvidia/version"):
        shutil.copy("/proc/driver/nvidia/version", os.path.join(raw, "proc-driver-nvidia-version.txt"))


def environment_workload(r, kq, work, rehearse):
    """The cuda (or, rehearsing, cpu) environment workload in a throwaway checkout."""
    wl = "qualification/workloads/%s-environment-v1.json" % ("cpu" if rehearse else "cuda")
    co = os.path.join(work, "checkout")
    os.makedirs(os.path.join(co, os.path.dirname(wl)))
    shutil.copy(os.path.join(ROOT, wl), os.path.join(co, wl))
    with open(os.path.join(co, ".gitignore"), "w") as f:
        f.write(".qualification/\n")
    genv = dict(r.env, GIT_AUTHOR_NAME="kiln-qual device-check", GIT_AUTHOR_EMAIL="device-check@kiln-qual.invalid",
                GIT_COMMITTER_NAME="kiln-qual device-check", GIT_COMMITTER_EMAIL="device-check@kiln-qual.invalid",
                GIT_AUTHOR_DATE=FIXED_DATE, GIT_COMMITTER_DATE=FIXED_DATE)
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "commit", "-q", "-m", "device-check environment workload"]):
        r.cmd("checkout-" + argv[1], argv, cwd=co, env=genv)
    receipt = ".qualification/receipts/%s-environment.json" % ("cpu" if rehearse else "cuda")
    r.cmd("run-environment", [kq, "run", wl, "--variant", "cpu" if rehearse else "cuda",
                              "--host-id", "device-check", "--output", receipt], cwd=co)
    r.cmd("receipt-check", [kq, "receipt", "check", "--require-current-source",
                            "--require-local-artifacts", "--require-known-commit", receipt], cwd=co)
    r.cmd("receipt-verify", [kq, "receipt", "verify", receipt], cwd=co)
    r.cmd("receipt-show", [kq, "receipt", "show", receipt], cwd=co,
          stdout=os.path.join(work, "receipt-show.txt"), required=False)
    return os.path.join(co, receipt)


def make_model(r, py, work, vocab):
    d = os.path.join(work, "model")
    os.makedirs(d)
    gguf = os.path.join(d, "tiny-random.gguf")
    ok, _ = r.cmd("make-model", [py, os.path.join(ROOT, "tools/make_tiny_gguf.py"), gguf,
                                 "--vocab-from", vocab, "--seed", str(SEED)])
    # config.json and tokenizer.json beside it: the model fingerprint binds them.
    ok = ok and r.cmd("model-sidecars", [py, os.path.join(ROOT, "tools/gguf_sidecars.py"), gguf])[0]
    return d, gguf if ok else None


def launch_recipe(work, name, py, gguf, device):
    port = free_port()
    # The same environment for both devices (so one runtime manifest binds both sides): the
    # driver's libraries where the image puts them on LD_LIBRARY_PATH.
    env = {"LANG": "C.UTF-8", "HOME": "/tmp", "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    for k in ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    d = os.path.join(work, "launch")
    os.makedirs(d, exist_ok=True)
    recipe = {
        "schema": "kiln-qual.serve-launch.v1",
        "id": "device-check-" + name,
        "command": [py, "tools/reference/server.py", "--gguf", gguf, "--model-id", "tiny-random",
                    "--host", "127.0.0.1", "--port", str(port), "--threads", "1",
                    "--device", device],
        "working_directory": ROOT,
        "environment": env,
        "port": port,
        "log_directory": os.path.relpath(os.path.join(work, "serving-logs"), d),
        "readiness_poll_interval_ms": 200,
        "startup_timeout_seconds": 300,
        "shutdown_timeout_seconds": 20,
        "acceptable_exit_codes": [0],
    }
    p = os.path.join(d, name + ".json")
    with open(p, "w") as f:
        json.dump(recipe, f, indent=2)
        f.write("\n")
    return p


def gpu_memory_bytes(raw):
    try:
        first = open(os.path.join(raw, "nvidia-smi-query.txt")).read().splitlines()[0]
        return int(first.split(",")[5].strip()) * 1024 * 1024
    except (OSError, IndexError, ValueError):
        return None


def campaign(r, kq, py, work, model_dir, gguf, rehearse, raw):
    out = os.path.join(work, "campaign")
    os.makedirs(os.path.join(work, "serving-logs"))
    ref_dev, cand_dev = ("cpu", "cpu") if rehearse else ("cuda", "cpu")
    ref, cand = ("transformers-cpu-a", "transformers-cpu-b") if rehearse else ("transformers-cuda", "transformers-cpu")
    limit = 16 << 30 if rehearse else (gpu_memory_bytes(raw) or 1 << 40)
    common = ["--campaign-id", "device-check", "--prompt-set-id", "device-check-prompts",
              "--profiles", "greedy-short,api-default-sampled", "--sizes", "1,2", "--repeats", "1",
              "--max-tokens", "16", "--warmup", "1", "--slo-ttft-ms", "60000",
              "--slo-itl-ms", "10000", "--slo-e2e-ms", "120000",
              "--memory-limit-bytes", str(limit), "--memory-sample-ms", "20",
              "--metrics-path", "/metrics", "--tokenize-path", "/tokenize",
              "--context-tokens", "2048", "--output-evidence", "full",
              "--model", "tiny-random", "--model-path", model_dir, "--out-dir", out]
    # The reference names NVML; the candidate asks for `auto`, which on this machine (no DRM
    # counter, one NVML device) must pick NVML too: the pairing refuses a different source.
    ref_memory = ["--memory-source", "process-tree" if rehearse else "nvml"]
    cand_memory = ["--memory-source", "process-tree" if rehearse else "auto"]
    manifest = os.path.join(work, "runtime-manifest.json")
    for engine, device, memory, extra in (
            (ref, ref_dev, ref_memory, []),
            (cand, cand_dev, cand_memory, ["--reference-dir", out, "--reference-engine", ref,
                                           "--reference-role", "evidence"])):
        launch = launch_recipe(work, engine, py, gguf, device)
        if not os.path.exists(manifest):
            # One capture (hashing the whole interpreter's installation twice) for both sides.
            r.cmd("runtime-manifest", [kq, "runtime-manifest", "--python", py, "--launch", launch,
                                       "--out", manifest])
        r.cmd("campaign-" + engine, [kq, "campaign", "--engine", engine, "--launch", launch,
                                     "--runtime-manifest", manifest] + memory + extra + common)
    for engine in (ref, cand):
        r.cmd("campaign-verify-" + engine, [kq, "campaign", "verify", "--engine", engine, out])
    return out


def oracle(r, kq, py, work, gguf, rehearse):
    d = os.path.join(work, "oracle")
    os.makedirs(d)
    # Fixed token ids inside the vocabulary (both workers read the same model, same ids).
    ids = [1 + (i * 7919) % 40000 for i in range(ORACLE_TOKENS)]
    ids_path = os.path.join(d, "token-ids.json")
    with open(ids_path, "w") as f:
        json.dump(ids, f)
    sides = (("cpu", "cpu"), ("cpu-b", "cpu")) if rehearse else (("cpu", "cpu"), ("cuda", "cuda"))
    files = []
    for name, device in sides:
        out = os.path.join(d, name + ".safetensors")
        r.cmd("oracle-reference-" + name, [kq, "oracle", "reference", "--model", gguf,
                                           "--token-ids", ids_path, "--output", out,
                                           "--from-position", str(ORACLE_FROM), "--python", py,
                                           "--device", device, "--json"],
              stdout=os.path.join(d, name + ".evidence.json"))
        files.append(out)
    result = "%s-vs-cpu.oracle-result.json" % sides[1][0]
    tol = os.path.join(ROOT, "qualification/oracles/tolerances-cuda-vs-cpu-f32.json")
    # Relative names (run in the oracle folder): the result names its inputs as given, so it
    # re-checks wherever the bundle is unpacked. Beyond the declared tolerances is a finding
    # (exit 1), not a broken step.
    r.cmd("oracle-compare", [kq, "oracle", "compare", os.path.basename(files[0]),
                             os.path.basename(files[1]), "--token-ids", "token-ids.json",
                             "--tolerances", tol, "--output", result], cwd=d, ok_codes=(0, 1))
    r.cmd("oracle-check", [kq, "oracle", "check", "--verify-inputs", result], cwd=d)
    return os.path.join(d, result)


def oracle_figures(path):
    """The verdict and each tolerance's observed value, for the summary."""
    doc = json.load(open(path))
    case = doc["cases"][0]
    return {"verdict": doc.get("verdict"),
            "checks": {c["tolerance"]: {"observed": c["observed"], "bound": c["bound"],
                                        "outcome": c["outcome"]}
                       for c in case["outcome"]["checks"]}}


def campaign_facts(out):
    """Per receipt: verdict, memory source, pairing result; per summary: verdict."""
    facts = {}
    if not os.path.isdir(out):
        return facts
    for f in sorted(os.listdir(out)):
        if not f.endswith(".json") or f.endswith("runtime-manifest.json"):
            continue
        try:
            d = json.load(open(os.path.join(out, f)))
        except (OSError, ValueError):
            continue
        entry = {"verdict": d.get("verdict"), "memory_source": (d.get("memory_sampler") or {}).get("source")}
        if d.get("comparison"):
            entry["comparison"] = d["comparison"].get("result")
        peaks = [(r.get("memory") or {}).get("peak_bytes") for r in d.get("runs", [])]
        if any(p is not None for p in peaks):
            entry["peak_bytes"] = peaks
        facts[f] = entry
    return facts


def receipt_facts(path):
    try:
        d = json.load(open(path))
    except (OSError, ValueError):
        return None
    return {"verdict": d["qualification"]["verdict"], "device": d["environment"]["device"],
            "runtime": d["environment"].get("runtime"), "compiler": d["environment"].get("compiler")}


def run(a):
    out = os.environ["OUT"]
    carry = os.path.join(ROOT, ".device-check")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    work = a.work or os.path.join(ROOT, "target", "device-check", "run-" + stamp)
    os.makedirs(work)
    log = Log(os.path.join(out, "device-check.log"))
    env = dict(os.environ)
    if os.path.isdir("/usr/local/cuda/bin") and "/usr/local/cuda/bin" not in env.get("PATH", ""):
        env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":/usr/local/cuda/bin"
    # Every command ends 60 s before the deadline: the summary and the bundle still get written.
    r = Runner(log, env, deadline=time.monotonic() + a.deadline_seconds - 60)
    kq = a.kiln_qual or os.path.join(carry, "kiln-qual")
    kq = os.path.abspath(kq)
    vocab = a.vocab_from or os.path.join(carry, "vocab.gguf")
    log("work %s, kiln-qual %s, python %s, %s" % (work, kq, a.python,
                                                  "rehearsal on the CPU" if a.rehearse_on_cpu else "CUDA"))
    r.cmd("kiln-qual-version", [kq, "--version"])
    if r.failed_required():
        log("refused: %s does not run here (see above; prepare builds it against glibc %s)" % (
            kq, (json.load(open(os.path.join(carry, "MANIFEST.json"))).get("kiln_qual_glibc_needs")
                 if os.path.exists(os.path.join(carry, "MANIFEST.json")) else None) or "?"))
        return 3
    if not ensure_git(r, carry):
        log("refused: git is missing")
        return 3
    if not a.rehearse_on_cpu and not ensure_gguf(r, a.python, carry):
        log("refused: the gguf package is missing")
        return 3
    raw = os.path.join(work, "raw")
    raw_probes(r, raw, a.rehearse_on_cpu)
    r.cmd("torch-info", [a.python, "-c", "import json, torch; print(json.dumps({'torch': torch.__version__, "
                         "'cuda': torch.version.cuda, 'available': torch.cuda.is_available(), "
                         "'devices': [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}))"],
          stdout=os.path.join(raw, "torch.json"), required=not a.rehearse_on_cpu)
    receipt = environment_workload(r, kq, work, a.rehearse_on_cpu)
    model_dir, gguf = make_model(r, a.python, work, vocab)
    result, camp = None, None
    if gguf:
        camp = campaign(r, kq, a.python, work, model_dir, gguf, a.rehearse_on_cpu, raw)
        result = oracle(r, kq, a.python, work, gguf, a.rehearse_on_cpu)
    summary = {"schema": "kiln-qual.device-check-summary.v1", "mode": "rehearsal-cpu" if a.rehearse_on_cpu else "cuda",
               "started": stamp, "environment_receipt": os.path.relpath(receipt, work),
               "model_sha256": sha256_file(gguf) if gguf else None, "steps": r.steps,
               "failed_required_steps": r.failed_required(),
               "environment": receipt_facts(receipt),
               "campaign": campaign_facts(camp) if camp else None}
    if result and os.path.exists(result):
        summary["oracle"] = oracle_figures(result)
    with open(os.path.join(work, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    shutil.copy(os.path.join(work, "summary.json"), os.path.join(out, "summary.json"))
    # The bundle: everything but the model (its digest is in the summary; rebuilt from the
    # seed and the carried vocabulary by tools/make_tiny_gguf.py).
    bundle = os.path.join(out, "device-check.tar.gz")
    with tarfile.open(bundle, "w:gz") as t:
        t.add(work, arcname="device-check", filter=lambda ti: None if ti.name.endswith(".gguf") else ti)
    log("bundle %s (%.1f MB)" % (bundle, os.path.getsize(bundle) / 1e6))
    failed = r.failed_required()
    log("failed required steps: %s" % (", ".join(failed) if failed else "none"))
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# import (here)


def import_bundle(a):
    dest_root = os.path.join(ROOT, "target", "device-check", "import")
    os.makedirs(dest_root, exist_ok=True)
    name = os.path.basename(a.bundle).split(".tar")[0] + "-" + time.strftime("%Y%m%dT%H%M%S")
    dest = os.path.join(dest_root, name)
    os.makedirs(dest)
    with tarfile.open(a.bundle) as t:
        t.extractall(dest, filter="data")
    work = os.path.join(dest, "device-check")
    summary = json.load(open(os.path.join(work, "summary.json")))
    log = Log(None)
    r = Runner(log, dict(os.environ))
    kq = os.path.abspath(a.kiln_qual)
    co = os.path.join(work, "checkout")
    receipt = os.path.join(work, summary["environment_receipt"])
    rel = os.path.relpath(receipt, co)
    r.cmd("receipt-check", [kq, "receipt", "check", "--require-local-artifacts",
                            "--require-known-commit", rel], cwd=co)
    r.cmd("receipt-verify", [kq, "receipt", "verify", rel], cwd=co)
    camp = os.path.join(work, "campaign")
    if os.path.isdir(camp):
        for f in sorted(os.listdir(camp)):
            if f.startswith("campaign.") and f.endswith(".json"):
                r.cmd("campaign-verify-" + f[9:-5], [kq, "campaign", "verify", "--engine", f[9:-5], camp])
    orc = os.path.join(work, "oracle")
    if os.path.isdir(orc):
        for f in sorted(os.listdir(orc)):
            if f.endswith(".oracle-result.json"):
                r.cmd("oracle-check", [kq, "oracle", "check", "--verify-inputs", f], cwd=orc)
    if a.fixtures:
        write_fixtures(log, a.bundle, work, summary)
    failed = r.failed_required()
    log("imported %s into %s; %s" % (a.bundle, os.path.relpath(work, ROOT),
                                      "every check passed" if not failed else "FAILED: " + ", ".join(failed)))
    return 1 if failed else 0


def write_fixtures(log, bundle, work, summary):
    """The raw probe outputs as parser fixtures (crates/qual-probe/tests/data/cuda/<id>/)."""
    if summary["mode"] != "cuda" or not summary.get("environment"):
        log("no fixtures: the bundle is not a CUDA run with an environment receipt")
        return
    env = summary["environment"]
    dev = env["device"]
    slug = "".join(c if c.isalnum() else "-" for c in dev["name"].lower()).strip("-")
    cid = "%s-%s-driver-%s" % (summary["started"][:8], slug, env["runtime"]["cuda_driver"])
    dest = os.path.join(ROOT, "crates/qual-probe/tests/data/cuda", cid)
    os.makedirs(dest)
    raw = os.path.join(work, "raw")
    shutil.copy(os.path.join(raw, "nvidia-smi-query.txt"), dest)
    nvcc = (env.get("compiler") or {}).get("nvcc")
    if nvcc and os.path.exists(os.path.join(raw, "nvcc-version.txt")):
        shutil.copy(os.path.join(raw, "nvcc-version.txt"), dest)
    expected = {"source": "scripts/device-check run on a lent NVIDIA machine at %s; bundle %s %s"
                          % (summary["started"], os.path.basename(bundle), sha256_file(bundle)),
                "device": dev, "cuda_driver": env["runtime"]["cuda_driver"], "nvcc": nvcc}
    with open(os.path.join(dest, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
        f.write("\n")
    log("fixtures written to %s" % os.path.relpath(dest, ROOT))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--kiln-qual", required=True)
    p.add_argument("--vocab-from", required=True)
    p.add_argument("--carry", required=True)
    p.add_argument("--no-downloads", action="store_true")
    p = sub.add_parser("run")
    p.add_argument("--python", required=True)
    p.add_argument("--rehearse-on-cpu", action="store_true")
    p.add_argument("--kiln-qual")
    p.add_argument("--vocab-from")
    p.add_argument("--work")
    p.add_argument("--deadline-seconds", type=float, default=480.0,
                   help="the whole run's budget; keep it inside the device call's timeout")
    p = sub.add_parser("import")
    p.add_argument("bundle")
    p.add_argument("--kiln-qual", default=os.path.join(ROOT, "target", "release", "kiln-qual"))
    p.add_argument("--fixtures", action="store_true",
                   help="also write the raw probe outputs as parser fixtures")
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a)
        return 0
    if a.cmd == "run":
        return run(a)
    return import_bundle(a)


if __name__ == "__main__":
    sys.exit(main())
