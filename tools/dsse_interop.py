#!/usr/bin/env python3
"""Independent DSSE / in-toto implementation for kiln-qual's interoperability test.

Uses securesystemslib (DSSE envelope, Ed25519 signer/verifier) and cryptography (OpenSSH key
parsing); nothing here shares code with kiln-qual.

  dsse_interop.py verify ENVELOPE PUBKEY.pub KEYID RECEIPT
      verifies kiln-qual's envelope: the signature, the statement type, the subject digest.
  dsse_interop.py sign RECEIPT PRIVATE_KEY KEYID OUT
      writes an envelope about RECEIPT, with the predicate computed here from the receipt.
  dsse_interop.py verify-campaign ENVELOPE PUBKEY.pub KEYID SUMMARY
      verifies a campaign attestation: the signature, the statement and predicate types, the
      subjects (the summary, then every receipt it lists, digests computed here) and the
      predicate computed here from the summary.
  dsse_interop.py sign-campaign SUMMARY PRIVATE_KEY KEYID OUT
      writes a campaign attestation computed here.
"""
import base64
import hashlib
import json
import sys

from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey

STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE = "https://kiln-qual.dev/receipt-identity/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
CAMPAIGN_PREDICATE = "https://kiln-qual.dev/serving-campaign/v1"


def sslib_key(public_key, keyid):
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return SSlibKey(keyid, "ed25519", "ed25519", {"public": raw.hex()})


def predicate(r):
    w = r.get("workload")
    return {
        "receipt_id": r["receipt_id"],
        "kind": r["qualification"]["kind"],
        "verdict": r["qualification"]["verdict"],
        "backend": r["qualification"]["backend"],
        "host_id": r["environment"]["host_id"],
        "device": r["environment"]["device"],
        "source": {k: r["source"][k] for k in ("git_commit", "tree_hash", "tree_hash_format")},
        "workload": None
        if w is None
        else {"id": w["id"], "sha256": w["sha256"], "variant_id": w["parameters"]["variant_id"]},
    }


def verify(envelope_path, pub_path, keyid, receipt_path):
    with open(pub_path, "rb") as f:
        public = serialization.load_ssh_public_key(f.read())
    with open(envelope_path) as f:
        lines = [l for l in f.read().splitlines() if l.strip()]
    assert len(lines) == 1, "one envelope per file"
    env = Envelope.from_dict(json.loads(lines[0]))
    assert env.payload_type == PAYLOAD_TYPE, env.payload_type
    env.verify([sslib_key(public, keyid)], 1)
    st = json.loads(env.payload)
    assert st["_type"] == STATEMENT and st["predicateType"] == PREDICATE, st
    with open(receipt_path, "rb") as f:
        data = f.read()
    (subject,) = st["subject"]
    assert subject["digest"]["sha256"] == hashlib.sha256(data).hexdigest(), "subject digest"
    assert st["predicate"] == predicate(json.loads(data)), "predicate"
    print("verified", keyid)


def sign(receipt_path, key_path, keyid, out_path):
    with open(key_path, "rb") as f:
        private = serialization.load_ssh_private_key(f.read(), password=None)
    with open(receipt_path, "rb") as f:
        data = f.read()
    statement = {
        "_type": STATEMENT,
        "subject": [
            {"name": receipt_path.rsplit("/", 1)[-1], "digest": {"sha256": hashlib.sha256(data).hexdigest()}}
        ],
        "predicateType": PREDICATE,
        "predicate": predicate(json.loads(data)),
    }
    env = Envelope(json.dumps(statement).encode(), PAYLOAD_TYPE, {})
    env.sign(CryptoSigner(private, sslib_key(private.public_key(), keyid)))
    with open(out_path, "x") as f:
        f.write(json.dumps(env.to_dict()) + "\n")
    print("signed", keyid)


def campaign_statement(summary_path):
    import os

    directory = os.path.dirname(summary_path)
    with open(summary_path, "rb") as f:
        data = f.read()
    s = json.loads(data)
    subjects = [{"name": os.path.basename(summary_path), "digest": {"sha256": hashlib.sha256(data).hexdigest()}}]
    for line in s["profiles"]:
        if line["status"] == "completed":
            with open(os.path.join(directory, line["receipt"]), "rb") as f:
                subjects.append({"name": line["receipt"], "digest": {"sha256": hashlib.sha256(f.read()).hexdigest()}})
    predicate = {
        "campaign_id": s["campaign_id"],
        "engine": s["engine"],
        "prompt_set_id": s["prompt_set_id"],
        "reference_dir": s["reference_dir"],
        "verdict": s["verdict"],
        "profiles": [
            {k: line[k] for k in ("profile", "status", "receipt", "verdict")} for line in s["profiles"]
        ],
    }
    return {"_type": STATEMENT, "subject": subjects, "predicateType": CAMPAIGN_PREDICATE, "predicate": predicate}


def verify_campaign(envelope_path, pub_path, keyid, summary_path):
    with open(pub_path, "rb") as f:
        public = serialization.load_ssh_public_key(f.read())
    with open(envelope_path) as f:
        lines = [l for l in f.read().splitlines() if l.strip()]
    assert len(lines) == 1, "one envelope per file"
    env = Envelope.from_dict(json.loads(lines[0]))
    assert env.payload_type == PAYLOAD_TYPE, env.payload_type
    env.verify([sslib_key(public, keyid)], 1)
    st = json.loads(env.payload)
    assert st == campaign_statement(summary_path), "statement"
    print("verified", keyid, len(st["subject"]), "subjects")


def sign_campaign(summary_path, key_path, keyid, out_path):
    with open(key_path, "rb") as f:
        private = serialization.load_ssh_private_key(f.read(), password=None)
    env = Envelope(json.dumps(campaign_statement(summary_path)).encode(), PAYLOAD_TYPE, {})
    env.sign(CryptoSigner(private, sslib_key(private.public_key(), keyid)))
    with open(out_path, "x") as f:
        f.write(json.dumps(env.to_dict()) + "\n")
    print("signed", keyid)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {
        "verify": verify,
        "sign": sign,
        "verify-campaign": verify_campaign,
        "sign-campaign": sign_campaign,
    }[cmd](*args)
