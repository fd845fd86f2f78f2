#!/usr/bin/env python3
"""Write a tiny random-weight llama GGUF for fast serving tests.

Usage: make_tiny_gguf.py OUT.gguf --vocab-from SOURCE.gguf [--seed N] [--embd 64] ...
       make_tiny_gguf.py OUT.gguf --vocab-from SOURCE.gguf --vocab-only

`--vocab-only` writes the tokenizer alone (no architecture, no tensors): a small file that
serves as `--vocab-from` elsewhere (scripts/device-check carries one to a machine that cannot
download a model).

The tokenizer (tokens, types, merges, special ids, chat template) is copied from SOURCE so
that generated text decodes to valid UTF-8; the weights are seeded Gaussian noise, so the
same arguments always produce byte-identical files. Only dependency: the PyPI `gguf` package.
"""
import argparse

import gguf
import numpy as np

TOKENIZER_KEYS = {
    "model": "tokenizer.ggml.model",
    "pre": "tokenizer.ggml.pre",
    "tokens": "tokenizer.ggml.tokens",
    "types": "tokenizer.ggml.token_type",
    "scores": "tokenizer.ggml.scores",
    "merges": "tokenizer.ggml.merges",
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
    "add_bos": "tokenizer.ggml.add_bos_token",
    "template": "tokenizer.chat_template",
}


def read_tokenizer(path):
    fields = gguf.GGUFReader(path).fields
    out = {}
    for name, key in TOKENIZER_KEYS.items():
        out[name] = fields[key].contents() if key in fields else None
    if not out["tokens"]:
        raise SystemExit(f"{path} has no tokenizer.ggml.tokens")
    return out


def add_tokenizer(w, tok):
    w.add_tokenizer_model(tok["model"])
    if tok["pre"]:
        w.add_tokenizer_pre(tok["pre"])
    w.add_token_list(tok["tokens"])
    w.add_token_types([int(t) for t in tok["types"]])
    if tok["scores"] is not None:
        w.add_token_scores([float(s) for s in tok["scores"]])
    if tok["merges"]:
        w.add_token_merges(tok["merges"])
    for name, adder in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id),
                        ("unk", w.add_unk_token_id), ("pad", w.add_pad_token_id)):
        if tok[name] is not None:
            adder(int(tok[name]))
    w.add_add_bos_token(bool(tok["add_bos"]))
    if tok["template"]:
        w.add_chat_template(tok["template"])


def write_vocab_only(args):
    tok = read_tokenizer(args.vocab_from)
    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name("kiln-qual-vocab-only")
    add_tokenizer(w, tok)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write(args):
    if args.vocab_only:
        return write_vocab_only(args)
    tok = read_tokenizer(args.vocab_from)
    n_vocab = len(tok["tokens"])
    head_dim = args.embd // args.heads
    kv_dim = head_dim * args.kv_heads
    rng = np.random.default_rng(args.seed)

    def matrix(rows, cols):
        # numpy shape is (out, in); ggml stores the transpose order.
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)

    def ones(n):
        return np.ones((n,), dtype=np.float32)

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name("kiln-qual-tiny-random-llama")
    w.add_context_length(args.ctx)
    w.add_embedding_length(args.embd)
    w.add_block_count(args.layers)
    w.add_feed_forward_length(args.ff)
    w.add_head_count(args.heads)
    w.add_head_count_kv(args.kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    add_tokenizer(w, tok)

    w.add_tensor("token_embd.weight", matrix(n_vocab, args.embd))
    for layer in range(args.layers):
        p = f"blk.{layer}."
        w.add_tensor(p + "attn_norm.weight", ones(args.embd))
        w.add_tensor(p + "attn_q.weight", matrix(args.embd, args.embd))
        w.add_tensor(p + "attn_k.weight", matrix(kv_dim, args.embd))
        w.add_tensor(p + "attn_v.weight", matrix(kv_dim, args.embd))
        w.add_tensor(p + "attn_output.weight", matrix(args.embd, args.embd))
        w.add_tensor(p + "ffn_norm.weight", ones(args.embd))
        w.add_tensor(p + "ffn_gate.weight", matrix(args.ff, args.embd))
        w.add_tensor(p + "ffn_up.weight", matrix(args.ff, args.embd))
        w.add_tensor(p + "ffn_down.weight", matrix(args.embd, args.ff))
    w.add_tensor("output_norm.weight", ones(args.embd))
    w.add_tensor("output.weight", matrix(n_vocab, args.embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--vocab-from", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--vocab-only", action="store_true")
    write(ap.parse_args())


if __name__ == "__main__":
    main()
