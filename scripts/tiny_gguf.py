#!/usr/bin/env python3
"""Writes a tiny random-weight Llama as GGUF, for the tests that serve it with llama-server.

4 layers, 256 wide, 4 heads; a byte-level BPE vocabulary (the 256 GPT-2 byte symbols, a few
merges, since llama.cpp's loader refuses a BPE vocabulary without any, and an end-of-text
token). The weights are seeded, so the file is the same on every machine. Its output is
noise; what the tests need is a real engine doing real work per token.

Usage: tiny_gguf.py OUT.gguf
"""

import sys

import numpy as np
import gguf

N_EMBD = 256
N_LAYER = 4
N_HEAD = 4
N_FF = 512
N_CTX = 4096


def byte_symbols():
    """GPT-2's byte-to-unicode table: printable bytes stand for themselves, the rest shift."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_gguf.py OUT.gguf")
    out = sys.argv[1]
    symbols = byte_symbols()
    space = symbols[ord(" ")]
    merges = [(space, "t"), ("h", "e"), (space + "t", "he"), (space, "a"), ("i", "n"), ("e", "r")]
    tokens = list(symbols)
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    eos = len(tokens)
    tokens.append("<|endoftext|>")
    types = [gguf.TokenType.NORMAL] * eos + [gguf.TokenType.CONTROL]
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(out, "llama")
    w.add_name("inferscale-tiny")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(eos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)

    rng = np.random.default_rng(20261206)

    def tensor(name, *shape, scale=0.02):
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def ones(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    tensor("token_embd.weight", n_vocab, N_EMBD)
    for i in range(N_LAYER):
        ones(f"blk.{i}.attn_norm.weight", N_EMBD)
        tensor(f"blk.{i}.attn_q.weight", N_EMBD, N_EMBD)
        tensor(f"blk.{i}.attn_k.weight", N_EMBD, N_EMBD)
        tensor(f"blk.{i}.attn_v.weight", N_EMBD, N_EMBD)
        tensor(f"blk.{i}.attn_output.weight", N_EMBD, N_EMBD)
        ones(f"blk.{i}.ffn_norm.weight", N_EMBD)
        tensor(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
    ones("output_norm.weight", N_EMBD)
    tensor("output.weight", n_vocab, N_EMBD)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
