#!/usr/bin/env python3
"""Write config.json and tokenizer.json beside a GGUF file, extracted from its metadata.

Usage: gguf_sidecars.py MODEL.gguf

A GGUF file carries its architecture and tokenizer inside. kiln-qual's model fingerprint (like
Kiln's) binds `config.json` and `tokenizer.json` as separate identities, so this writes them as
deterministic JSON views of the GGUF's own metadata: `config.json` holds every scalar key that
is not `tokenizer.*`, `tokenizer.json` every `tokenizer.*` key (token list, types, scores,
merges, special ids). The chat template, when present, goes to `chat_template.jinja`. Output is
byte-identical for the same GGUF. Only dependency: the PyPI `gguf` package.
"""
import json
import os
import sys

import gguf


def plain(value):
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, float) and value != value:
        raise SystemExit("NaN in GGUF metadata")
    return value


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    path = sys.argv[1]
    out_dir = os.path.dirname(os.path.abspath(path))
    fields = gguf.GGUFReader(path).fields
    config, tokenizer, template = {}, {}, None
    for key, field in fields.items():
        if key.startswith("GGUF."):
            continue
        value = plain(field.contents())
        if key == "tokenizer.chat_template":
            template = value
        elif key.startswith("tokenizer."):
            tokenizer[key] = value
        elif not isinstance(value, list):
            config[key] = value
    for name, doc in (("config.json", config), ("tokenizer.json", tokenizer)):
        tmp = os.path.join(out_dir, name + ".partial")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
            f.write("\n")
        os.replace(tmp, os.path.join(out_dir, name))
    if template is not None:
        with open(os.path.join(out_dir, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(template)


if __name__ == "__main__":
    main()
