#!/usr/bin/python3
"""Writes the PyTorch reference data that examples/peak-demo checks itself against.

Run with Debian's interpreter, the one that can import python3-torch:

    /usr/bin/python3 scripts/make-demo-ref.py            # rewrite tests/data/demo-*
    /usr/bin/python3 scripts/make-demo-ref.py --check    # are the committed files current?

Nothing random is stored: every weight, embedding and token id comes from a
counter-based hash of (tensor id, element index) that peak-demo evaluates in
C to the same bits (examples/demo-gen.c), so only PyTorch's outputs are
written.  The model is the usual PyTorch sinusoidal PositionalEncoding
module (d_model 512, max_len 5000) on a batch of 2 sequences of 50 tokens,
followed here by one post-norm nn.TransformerEncoderLayer and one
nn.TransformerDecoderLayer (8 heads, d_ff 2048, ReLU, dropout 0, batch_first).

Output is byte-for-byte reproducible on one machine: one intra-op thread (a
BLAS splits its sums differently per thread count) and no clock or path in the
files.  Another CPU or torch build may change the last bits of the layer
outputs, far below peak-demo's tolerances.
"""

import argparse
import math
import os
import sys
import tempfile

import numpy as np
import torch
from torch import nn

# ---- the model -------------------------------------------------------------

D_MODEL = 512
HEADS = 8
D_FF = 2048
MAX_LEN = 5000
BATCH = 2
SRC_LEN = 50
TGT_LEN = 30
SRC_LENGTHS = (50, 42)  # the second source sentence is padded after 42 tokens
VOCAB = 1000
PAD_ID = 0
LAYERNORM_EPS = 1e-5
PE_BASE = 10000.0

# PE rows compared (the full 5000 x 512 table would be 10 MB): the first rows,
# the ends of the 50- and 30-token windows, and far positions where float32
# angle rounding shows.
PE_POSITIONS = (0, 1, 2, 3, 7, 8, 29, 30, 41, 42, 49, 50, 63, 64, 100, 127,
                128, 255, 256, 511, 512, 1000, 1023, 1024, 2047, 2048, 2500,
                3333, 4095, 4096, 4998, 4999)

# ---- the shared formula ----------------------------------------------------

MASK64 = (1 << 64) - 1
SEED = 0x7065616B2D64656D  # "peak-dem"
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB


def hash_py(tensor_id, index):
    """Element `index` of the splitmix64 stream seeded by SEED ^ (tensor_id << 40).

    The reference definition, in Python ints masked to 64 bits; hash_np is the
    same function on numpy arrays and is checked against this one."""
    z = ((SEED ^ (tensor_id << 40)) + (index + 1) * GOLDEN) & MASK64
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return z ^ (z >> 31)


def hash_np(tensor_id, count):
    with np.errstate(over="ignore"):
        i = np.arange(1, count + 1, dtype=np.uint64)
        z = np.uint64(SEED ^ (tensor_id << 40)) + i * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
        return z ^ (z >> np.uint64(31))


def uniform(tensor_id, count, amp):
    """Floats in [-amp, amp): the top 24 hash bits as a signed integer k
    (exact in float32), times amp * 2^-23 (exact: a power-of-two scaling),
    one float32 rounding in all."""
    k = (hash_np(tensor_id, count) >> np.uint64(40)).astype(np.int64) - (1 << 23)
    unit = np.float32(amp) * np.float32(2.0 ** -23)
    return k.astype(np.float32) * unit


def token_ids(tensor_id, lengths, seq_len):
    """Real tokens in [1, VOCAB), PAD_ID after each sequence's length."""
    h = hash_np(tensor_id, len(lengths) * seq_len)
    ids = (np.uint64(1) + h % np.uint64(VOCAB - 1)).astype(np.int64)
    ids = ids.reshape(len(lengths), seq_len)
    for b, n in enumerate(lengths):
        ids[b, n:] = PAD_ID
    return ids


def self_check_hash():
    for t in (0, 1, 37):
        ref = [hash_py(t, i) for i in range(1000)]
        if ref != [int(v) for v in hash_np(t, 1000)]:
            sys.exit("make-demo-ref: numpy hash disagrees with the Python-int definition")


# Every generated tensor: name (as in the PyTorch state_dict), tensor id,
# shape, kind.  peak-demo has the same table and compares it with the
# manifest's copy, so the two sides cannot drift apart silently.
#   w: weight [out, in], amplitude 1/sqrt(in) (PyTorch's default bound)
#   b: bias, amplitude 1/sqrt(fan_in of its layer)
#   g: LayerNorm gamma, 1 + uniform(0.25)   (non-trivial, so a swap shows)
#   n: LayerNorm beta, uniform(0.25)
#   e: token embedding, amplitude 1/sqrt(d_model): after the sqrt(d_model)
#      scale (paper 3.4) the entries are in [-1, 1), the range of the PE
def _mha(prefix, first_id):
    d = D_MODEL
    return [(prefix + ".in_proj_weight", first_id, (3 * d, d), "w"),
            (prefix + ".in_proj_bias", first_id + 1, (3 * d,), "b", d),
            (prefix + ".out_proj.weight", first_id + 2, (d, d), "w"),
            (prefix + ".out_proj.bias", first_id + 3, (d,), "b", d)]


def _ffn(prefix, first_id):
    return [(prefix + "linear1.weight", first_id, (D_FF, D_MODEL), "w"),
            (prefix + "linear1.bias", first_id + 1, (D_FF,), "b", D_MODEL),
            (prefix + "linear2.weight", first_id + 2, (D_MODEL, D_FF), "w"),
            (prefix + "linear2.bias", first_id + 3, (D_MODEL,), "b", D_FF)]


def _norm(prefix, first_id):
    return [(prefix + ".weight", first_id, (D_MODEL,), "g"),
            (prefix + ".bias", first_id + 1, (D_MODEL,), "n")]


TOKENS_SRC_ID = 1
TOKENS_TGT_ID = 2
PARAMS = ([("embed.weight", 3, (VOCAB, D_MODEL), "e")]
          + _mha("enc.self_attn", 10) + _ffn("enc.", 14)
          + _norm("enc.norm1", 18) + _norm("enc.norm2", 20)
          + _mha("dec.self_attn", 30) + _mha("dec.multihead_attn", 34)
          + _ffn("dec.", 38) + _norm("dec.norm1", 42) + _norm("dec.norm2", 44)
          + _norm("dec.norm3", 46))


def amplitude(p):
    kind = p[3]
    if kind == "w":
        return 1.0 / math.sqrt(p[2][1])
    if kind == "b":
        return 1.0 / math.sqrt(p[4])
    if kind == "e":
        return 1.0 / math.sqrt(D_MODEL)
    return 0.25


def make_param(p):
    count = int(np.prod(p[2]))
    v = uniform(p[1], count, amplitude(p))
    if p[3] == "g":
        v = np.float32(1.0) + v
    return torch.from_numpy(v.reshape(p[2]))


# ---- the PyTorch PositionalEncoding module, in our words --------------------

class PositionalEncoding(nn.Module):
    """x + PE[:seq_len] for x of shape [batch, seq_len, d_model].

    exact=False evaluates the module's formula in float32 as the module does
    (frequencies from exp of a float32 ramp, float32 angles), exact=True in
    float64, rounded once to float32: the value peak's default mode promises."""

    def __init__(self, d_model, max_len=MAX_LEN, exact=True):
        super().__init__()
        dtype = torch.float64 if exact else torch.float32
        pos = torch.arange(max_len, dtype=dtype).unsqueeze(1)
        freq = torch.exp(torch.arange(0, d_model, 2, dtype=dtype)
                         * (-math.log(PE_BASE) / d_model))
        table = torch.zeros(max_len, d_model, dtype=dtype)
        table[:, 0::2] = torch.sin(pos * freq)
        table[:, 1::2] = torch.cos(pos * freq)
        self.register_buffer("pe", table.to(torch.float32).unsqueeze(0))

    def forward(self, x):
        return x + self.pe[:, :x.size(1), :]


# ---- the run ----------------------------------------------------------------

def build_layers(params):
    enc = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, activation="relu",
                                     layer_norm_eps=LAYERNORM_EPS, batch_first=True,
                                     norm_first=False)
    dec = nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, activation="relu",
                                     layer_norm_eps=LAYERNORM_EPS, batch_first=True,
                                     norm_first=False)
    with torch.no_grad():
        for layer, prefix in ((enc, "enc."), (dec, "dec.")):
            state = {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}
            missing, unexpected = layer.load_state_dict(state, strict=True)
            assert not missing and not unexpected
    return enc.eval(), dec.eval()


def capture(module, store, name):
    module.register_forward_hook(lambda m, i, out: store.__setitem__(name, out.detach().clone()))


def run():
    torch.manual_seed(0)  # nothing should draw from it; pins it if something does
    params = {p[0]: make_param(p) for p in PARAMS}
    src_ids = torch.from_numpy(token_ids(TOKENS_SRC_ID, SRC_LENGTHS, SRC_LEN))
    tgt_ids = torch.from_numpy(token_ids(TOKENS_TGT_ID, (TGT_LEN,) * BATCH, TGT_LEN))

    embed = nn.Embedding(VOCAB, D_MODEL)
    with torch.no_grad():
        embed.weight.copy_(params["embed.weight"])
    scale = torch.tensor(np.float32(math.sqrt(D_MODEL)))
    pos_exact = PositionalEncoding(D_MODEL, exact=True)
    pos_f32 = PositionalEncoding(D_MODEL, exact=False)
    enc, dec = build_layers(params)

    out = {}
    capture(enc.norm1, out, "enc_norm1")
    capture(dec.norm1, out, "dec_norm1")
    capture(dec.norm2, out, "dec_norm2")

    # True = "ignore this key", PyTorch's convention for both masks.
    src_pad = torch.arange(SRC_LEN).unsqueeze(0) >= torch.tensor(SRC_LENGTHS).unsqueeze(1)
    causal = torch.triu(torch.ones(TGT_LEN, TGT_LEN, dtype=torch.bool), diagonal=1)

    # Autograd stays on and the parameters require grad: that keeps torch
    # 1.13's encoder off its inference fast path
    # (torch._transformer_encoder_layer_fwd), so the reference is the plain
    # composition of nn.MultiheadAttention, Linear and LayerNorm.  The fast
    # path is run below only to report how far it is.
    assert torch.is_grad_enabled() and enc.self_attn.in_proj_weight.requires_grad
    src = pos_exact(embed(src_ids) * scale)
    tgt = pos_exact(embed(tgt_ids) * scale)
    memory = enc(src, src_key_padding_mask=src_pad)
    result = dec(tgt, memory, tgt_mask=causal, memory_key_padding_mask=src_pad)
    with torch.no_grad():
        fast = enc(src, src_key_padding_mask=src_pad)
    fast_diff = (fast - memory).abs().max().item()

    pos = torch.tensor(PE_POSITIONS)
    out.update(pe_exact=pos_exact.pe[0, pos], pe_seed_f32=pos_f32.pe[0, pos],
               src_embedding_pe=src, tgt_embedding_pe=tgt, enc_out=memory, dec_out=result)
    return {k: v.detach().contiguous() for k, v in out.items()}, fast_diff


# name, file, what it is (for the manifest reader)
TENSORS = (("pe_exact", "demo-pe-exact.f32", "PE rows, exact (float64 rounded once)"),
           ("pe_seed_f32", "demo-pe-seed-f32.f32", "PE rows, PositionalEncoding's float32 formula"),
           ("src_embedding_pe", "demo-src-embedding-pe.f32", "embed(src) * sqrt(d_model) + PE"),
           ("tgt_embedding_pe", "demo-tgt-embedding-pe.f32", "embed(tgt) * sqrt(d_model) + PE"),
           ("enc_norm1", "demo-enc-norm1.f32", "encoder: norm1(x + self_attn(x))"),
           ("enc_out", "demo-enc-out.f32", "encoder layer output (memory)"),
           ("dec_norm1", "demo-dec-norm1.f32", "decoder: norm1(y + causal self_attn(y))"),
           ("dec_norm2", "demo-dec-norm2.f32", "decoder: norm2(y + multihead_attn(y, memory))"),
           ("dec_out", "demo-dec-out.f32", "decoder layer output"))


def torch_capability():
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def manifest(outputs, fast_diff):
    lines = ["# peak-demo reference data; written by scripts/make-demo-ref.py, do not edit.",
             "# param: name tensor-id element-count amplitude(float32 bits) kind",
             "# tensor: name file dims...   (little-endian float32, row-major)",
             "format 1",
             f"torch {torch.__version__} {torch_capability()}",
             f"encoder_fast_path_max_diff {fast_diff:.3e}",
             f"seed 0x{SEED:016x}",
             f"d_model {D_MODEL}", f"heads {HEADS}", f"d_ff {D_FF}", f"max_len {MAX_LEN}",
             f"batch {BATCH}", f"src_len {SRC_LEN}", f"tgt_len {TGT_LEN}",
             "src_lengths " + " ".join(str(n) for n in SRC_LENGTHS),
             f"vocab {VOCAB}", f"pad_id {PAD_ID}",
             f"tokens_src_id {TOKENS_SRC_ID}", f"tokens_tgt_id {TOKENS_TGT_ID}",
             "pe_positions " + " ".join(str(p) for p in PE_POSITIONS)]
    for p in PARAMS:
        bits = np.float32(amplitude(p)).view(np.uint32)
        lines.append(f"param {p[0]} {p[1]} {int(np.prod(p[2]))} 0x{int(bits):08x} {p[3]}")
    for name, fname, _ in TENSORS:
        dims = " ".join(str(d) for d in outputs[name].shape)
        lines.append(f"tensor {name} {fname} {dims}")
    return "\n".join(lines) + "\n"


def files_to_write(outputs, fast_diff):
    files = {"demo-manifest.txt": manifest(outputs, fast_diff).encode()}
    for name, fname, _ in TENSORS:
        files[fname] = outputs[name].numpy().astype("<f4").tobytes()
    return files


def main():
    default_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=default_dir, help="output directory (default: tests/data)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if the files in --out differ from a fresh run")
    args = ap.parse_args()

    torch.set_num_threads(1)
    self_check_hash()
    outputs, fast_diff = run()
    files = files_to_write(outputs, fast_diff)

    if args.check:
        stale = [f for f, data in files.items()
                 if not os.path.exists(os.path.join(args.out, f))
                 or open(os.path.join(args.out, f), "rb").read() != data]
        for f in stale:
            print(f"make-demo-ref: {f} is missing or stale", file=sys.stderr)
        sys.exit(1 if stale else 0)

    os.makedirs(args.out, exist_ok=True)
    for fname, data in files.items():
        # Write then rename, so an interrupted run leaves no half-written file.
        fd, tmp = tempfile.mkstemp(dir=args.out, prefix=".demo-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(args.out, fname))
    total = sum(len(d) for d in files.values())
    print(f"make-demo-ref: wrote {len(files)} files, {total / 1024:.0f} KiB, to {args.out}")
    print(f"  torch {torch.__version__}; encoder fast path differs from the reference "
          f"by {fast_diff:.3e} (not stored)")


if __name__ == "__main__":
    main()
