#!/usr/bin/env python3
"""Reference values of Hugging Face transformers' RoPE, for peak's C tests.

Writes two text files (the C tests parse them; they never run Python):

  tests/data/rope-hf-cache.txt   per case: the scheme's parameters, HF's
      inv_freq and attention_scaling, and the cos/sin rows that
      LlamaRotaryEmbedding.forward returns for positions 0, 1, 4095, 65535,
      131071, 1000000 and 16777215 (int64 position_ids, as HF's models pass
      them).  Schemes: none (default), partial rotary, linear, static NTK
      (alpha), dynamic NTK, YaRN (Qwen, DeepSeek, mscale, gpt-oss
      flavours), Llama 3 and LongRoPE (short and long factor sets).
  tests/data/rope-hf-apply.txt   HF's rotation of small random tensors:
      modeling_llama.apply_rotary_pos_emb (half split), modeling_gpt_neox's
      partial-rotary form, and GPT-J's interleaved (rotate_every_two) form,
      with the cos/sin each one multiplied by and the output.

Every float is its float32 bit pattern as 8 lowercase hex digits; the
format is described in each file's header.

Run it from the checkout's root (the output is committed; the tests never
run this script):

    sh scripts/peers-venv.sh && .venv-peers/bin/python scripts/rope-reference.py

It forces single-threaded CPU torch and asserts, case by case, that what it
writes is bit-identical to the output of HF's own modules
(LlamaRotaryEmbedding, PhiRotaryEmbedding, GPTNeoXRotaryEmbedding,
GPTJRotaryEmbedding) and functions, then parses both files back and checks
them against what it computed.  The values depend on torch's CPU kernels
(Sleef pow/sin/cos on the vector path, libm on the scalar path): the header
records the torch version and ATen CPU capability they were made with.

The only HF code reproduced here (rather than called) is
LlamaRotaryEmbedding.forward's four lines (to run them on an inv_freq the
module would not hold, e.g. dynamic NTK at a chosen seq_len; checked
against the module where it can be), the partial-rotary split/concat lines
of modeling_phi.PhiAttention.forward and of
modeling_gptj.GPTJAttention.forward, each cited where it is used.
"""
import logging
import math
import os
import platform
import sys

import numpy as np
import torch
import transformers
from transformers import GPTJConfig, GPTNeoXConfig, LlamaConfig, PhiConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.gptj import modeling_gptj
from transformers.models.llama import modeling_llama
from transformers.models.phi import modeling_phi

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE_PATH = os.path.join(ROOT, "tests", "data", "rope-hf-cache.txt")
APPLY_PATH = os.path.join(ROOT, "tests", "data", "rope-hf-apply.txt")

POSITIONS = [0, 1, 4095, 65535, 131071, 1000000, 16777215]
APPLY_POSITIONS = [0, 1, 7, 100, 4095]
APPLY_SEED = 20240917
CPU = torch.device("cpu")


# --------------------------------------------------------------------------
# helpers


def hexbits(t):
    """float32 values (tensor or ndarray, any shape, row-major) -> hex words."""
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert a.dtype == np.float32, a.dtype
    return [f"{int(v):08x}" for v in np.ascontiguousarray(a).view(np.uint32).ravel()]


def bits_equal(a, b):
    """Bit-identical float32 tensors (so -0.0 != 0.0 and NaNs compare)."""
    assert a.dtype == torch.float32 and b.dtype == torch.float32
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.int32),
                                              b.contiguous().view(torch.int32))


def np_bits_equal(a, b):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def ulp_distance(a, b):
    """Largest distance in float32 ulps between two float32 arrays."""
    def ordered(x):
        i = np.ascontiguousarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return int(np.max(np.abs(ordered(a) - ordered(b)))) if np.size(a) else 0


class RopeWarnings(logging.Handler):
    """Collects what transformers logs while a config is built and validated."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


_warnings = RopeWarnings()
logging.getLogger("transformers").addHandler(_warnings)


def checked_config(make, expected_warning=None):
    """Build a config, run standardize_rope_params() and validate_rope() on it,
    and fail on any warning but the one expected (e.g. LongRoPE without an
    explicit factor)."""
    _warnings.messages.clear()
    cfg = make()
    cfg.standardize_rope_params()
    cfg.validate_rope()
    for msg in _warnings.messages:
        if expected_warning is None or expected_warning not in msg:
            raise SystemExit(f"rope-reference: transformers warned: {msg}")
    _warnings.messages.clear()
    return cfg


def llama_config(head_dim, rope_parameters, max_position_embeddings=4096, expected_warning=None):
    return checked_config(lambda: LlamaConfig(
        vocab_size=32, hidden_size=2 * head_dim, intermediate_size=4 * head_dim,
        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        head_dim=head_dim, max_position_embeddings=max_position_embeddings,
        rope_parameters=dict(rope_parameters)), expected_warning)


def hf_forward(inv_freq, attention_scaling, position_ids):
    """LlamaRotaryEmbedding.forward of transformers 5.24.0
    (models/llama/modeling_llama.py), minus the dynamic/longrope update
    decorator, for an inv_freq chosen by the caller.  x is float32 here, so
    its final .to(dtype=x.dtype) is a no-op."""
    freqs = position_ids[..., None].float() * inv_freq.to(device=CPU, dtype=torch.float)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * attention_scaling
    sin = emb.sin() * attention_scaling
    return freqs, cos, sin


def pretty(v):
    return repr(float(v))


# --------------------------------------------------------------------------
# rope-hf-cache.txt

def longrope_factors():
    short = [1.0 + 0.01 * i for i in range(48)]
    long = [1.0 + 0.5 * i for i in range(48)]
    return short, long


def cache_cases():
    """(name, scaling, dict of recorded keys, builder) per case; the builder
    returns (config, inv_freq, attention_scaling, module or None,
    module_positions or None, notes)."""
    cases = []

    def default_case(name, head_dim, theta):
        def build():
            rp = {"rope_type": "default", "rope_theta": theta}
            cfg = llama_config(head_dim, rp)
            inv, att = modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
            notes = [f"LlamaConfig(head_dim={head_dim}, rope_parameters={rp}); "
                     "LlamaRotaryEmbedding.compute_default_rope_parameters"]
            return cfg, inv, att, modeling_llama.LlamaRotaryEmbedding(cfg), None, notes
        cases.append((name, head_dim, theta, "none", {}, build))

    default_case("none_d128_b1e4", 128, 10000.0)
    default_case("none_d128_b5e5", 128, 500000.0)
    default_case("none_d16_b1e4", 16, 10000.0)
    default_case("none_d24_b1e4", 24, 10000.0)
    default_case("none_d512_b1e8", 512, 1e8)

    def build_partial():
        # Phi-2's geometry: head_dim 80 = hidden_size / heads, partial 0.4.
        # LlamaRotaryEmbedding.compute_default_rope_parameters ignores
        # partial_rotary_factor (it uses the whole head_dim), so the models
        # with partial rotary (Phi, GPT-NeoX) carry their own default
        # function, which honours it; both are used and must agree.
        rp = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.4}
        cfg = checked_config(lambda: PhiConfig(
            vocab_size=32, hidden_size=160, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=2, max_position_embeddings=4096, rope_parameters=dict(rp)))
        inv, att = modeling_phi.PhiRotaryEmbedding.compute_default_rope_parameters(cfg)
        inv2, att2 = modeling_gpt_neox.GPTNeoXRotaryEmbedding.compute_default_rope_parameters(cfg)
        assert bits_equal(inv, inv2) and att == att2
        lcfg = llama_config(80, rp)
        linv, _ = modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters(lcfg)
        assert linv.shape == (40,), linv.shape  # Llama's default: all 80 dims
        notes = [f"PhiConfig(hidden_size=160, num_attention_heads=2, rope_parameters={rp}) "
                 "(head_dim 80, as Phi-2);",
                 "PhiRotaryEmbedding.compute_default_rope_parameters (== GPT-NeoX's). "
                 "LlamaRotaryEmbedding's default ignores",
                 "partial_rotary_factor (it would give 40 frequencies over head_dim 80)."]
        return cfg, inv, att, modeling_phi.PhiRotaryEmbedding(cfg), None, notes
    cases.append(("partial_d32_of80", 32, 10000.0, "none", {}, build_partial))

    def build_linear():
        rp = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}
        cfg = llama_config(128, rp)
        inv, att = ROPE_INIT_FUNCTIONS["linear"](cfg, CPU)
        notes = [f"LlamaConfig(head_dim=128, rope_parameters={rp}); ROPE_INIT_FUNCTIONS['linear']"]
        return cfg, inv, att, modeling_llama.LlamaRotaryEmbedding(cfg), None, notes
    cases.append(("linear_f4", 128, 10000.0, "linear", {"factor": pretty(4.0)}, build_linear))

    def build_ntk():
        alpha, dim, base = 8.0, 128, 10000.0
        # Static NTK-aware scaling has no HF init function: the default
        # computation with rope_theta = base * alpha ** (dim / (dim - 2)) in
        # Python doubles (torch then rounds that theta to float32 in pow).
        theta = base * alpha ** (dim / (dim - 2))
        rp = {"rope_type": "default", "rope_theta": theta}
        cfg = llama_config(dim, rp)
        inv, att = modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
        notes = ["static NTK: no HF init function; LlamaRotaryEmbedding.compute_default_rope_parameters",
                 f"with rope_theta = base * ntk_alpha ** (rotary_dim / (rotary_dim - 2)) = {theta!r}",
                 "(Python doubles; torch.pow rounds it to float32).  'base' below is the original base."]
        return cfg, inv, att, modeling_llama.LlamaRotaryEmbedding(cfg), None, notes
    cases.append(("ntk_a8", 128, 10000.0, "ntk", {"ntk_alpha": pretty(8.0)}, build_ntk))

    def dynamic_case(name, seq_len):
        def build():
            rp = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
            cfg = llama_config(128, rp, max_position_embeddings=4096)
            inv, att = ROPE_INIT_FUNCTIONS["dynamic"](cfg, CPU, seq_len=seq_len)
            notes = [f"LlamaConfig(head_dim=128, max_position_embeddings=4096, rope_parameters={rp});",
                     f"ROPE_INIT_FUNCTIONS['dynamic'](config, cpu, seq_len={seq_len}) (a Python int: "
                     "the new base is computed in doubles)"]
            module, mpos = None, None
            if seq_len <= 4096:
                # No growth below max_position_embeddings: the module keeps
                # its init inv_freq as long as max(position_ids) + 1 <= 4096.
                module = modeling_llama.LlamaRotaryEmbedding(cfg)
                mpos = [p for p in POSITIONS if p < 4096]
                notes.append(f"checked against LlamaRotaryEmbedding(config) at positions {mpos}")
            else:
                # The module grows itself from a tensor seq_len =
                # max(position_ids) + 1, which takes another arithmetic path
                # (the base in float32 tensors); say whether it agrees.
                m = modeling_llama.LlamaRotaryEmbedding(cfg)
                m(torch.zeros(1), torch.arange(seq_len, dtype=torch.int64)[None, :])
                same = bits_equal(m.inv_freq, inv)
                n_diff = int((m.inv_freq.view(torch.int32) != inv.view(torch.int32)).sum())
                notes.append("the module itself, fed position_ids 0..%d, grows to seq_len as a tensor and "
                             "computes %s" % (seq_len - 1, "the same inv_freq" if same else
                                              f"an inv_freq differing in {n_diff} of {inv.numel()} values "
                                              f"(max {ulp_distance(m.inv_freq.numpy(), inv.numpy())} ulp): "
                                              "its new base is a float32 tensor, not a double"))
            return cfg, inv, att, module, mpos, notes
        keys = {"factor": pretty(2.0), "original_max_position": "4096", "seq_len": str(seq_len)}
        cases.append((name, 128, 10000.0, "dynamic", keys, build))

    dynamic_case("dynamic_f2", 10000)
    dynamic_case("dynamic_short", 100)

    def yarn_case(name, head_dim, theta, rp_extra, max_pos, keys):
        def build():
            rp = {"rope_type": "yarn", "rope_theta": theta, **rp_extra}
            cfg = llama_config(head_dim, rp, max_position_embeddings=max_pos)
            inv, att = ROPE_INIT_FUNCTIONS["yarn"](cfg, CPU)
            notes = [f"LlamaConfig(head_dim={head_dim}, max_position_embeddings={max_pos}, "
                     f"rope_parameters={rp});",
                     "ROPE_INIT_FUNCTIONS['yarn'] (beta_fast, beta_slow and truncate below are the values "
                     "it used, HF's defaults where not passed)"]
            return cfg, inv, att, modeling_llama.LlamaRotaryEmbedding(cfg), None, notes
        cases.append((name, head_dim, theta, "yarn", keys, build))

    yarn_case("yarn_qwen", 128, 1000000.0,
              {"factor": 4.0, "original_max_position_embeddings": 32768}, 131072,
              {"factor": pretty(4.0), "original_max_position": "32768",
               "beta_fast": pretty(32), "beta_slow": pretty(1), "truncate": "1"})
    yarn_case("yarn_deepseek", 64, 10000.0,
              {"factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
               "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}, 163840,
              {"factor": pretty(40), "original_max_position": "4096",
               "beta_fast": pretty(32), "beta_slow": pretty(1), "truncate": "1",
               "mscale": pretty(1.0), "mscale_all_dim": pretty(1.0)})
    yarn_case("yarn_mscale", 64, 10000.0,
              {"factor": 40, "original_max_position_embeddings": 4096, "mscale": 0.707,
               "mscale_all_dim": 1.0}, 163840,
              {"factor": pretty(40), "original_max_position": "4096",
               "beta_fast": pretty(32), "beta_slow": pretty(1), "truncate": "1",
               "mscale": pretty(0.707), "mscale_all_dim": pretty(1.0)})
    yarn_case("yarn_gptoss", 64, 150000.0,
              {"factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0,
               "beta_slow": 1.0, "truncate": False}, 131072,
              {"factor": pretty(32.0), "original_max_position": "4096",
               "beta_fast": pretty(32.0), "beta_slow": pretty(1.0), "truncate": "0"})

    def build_llama3():
        rp = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
        cfg = llama_config(128, rp, max_position_embeddings=131072)
        inv, att = ROPE_INIT_FUNCTIONS["llama3"](cfg, CPU)
        notes = [f"LlamaConfig(head_dim=128, max_position_embeddings=131072, rope_parameters={rp});",
                 "ROPE_INIT_FUNCTIONS['llama3']"]
        return cfg, inv, att, modeling_llama.LlamaRotaryEmbedding(cfg), None, notes
    cases.append(("llama3", 128, 500000.0, "llama3",
                  {"factor": pretty(8.0), "original_max_position": "8192",
                   "low_freq_factor": pretty(1.0), "high_freq_factor": pretty(4.0)}, build_llama3))

    short, long = longrope_factors()

    def longrope_case(name, seq_len, factors):
        def build():
            # Phi-3-mini-128k style: no 'factor' key; HF derives it as
            # max_position_embeddings / original_max_position_embeddings.
            rp = {"rope_type": "longrope", "rope_theta": 10000.0,
                  "original_max_position_embeddings": 4096,
                  "short_factor": list(short), "long_factor": list(long)}
            cfg = llama_config(96, rp, max_position_embeddings=131072,
                               expected_warning="Please set the `factor` field")
            inv, att = ROPE_INIT_FUNCTIONS["longrope"](cfg, CPU, seq_len=seq_len)
            assert att == math.sqrt(1 + math.log(32.0) / math.log(4096))
            notes = ["LlamaConfig(head_dim=96, max_position_embeddings=131072, rope_parameters={"
                     "'rope_type': 'longrope', 'rope_theta': 10000.0, 'original_max_position_embeddings': 4096,",
                     "'short_factor': [1.0 + 0.01 * i for i in range(48)], "
                     "'long_factor': [1.0 + 0.5 * i for i in range(48)]}) (no 'factor': HF derives",
                     f"131072 / 4096 = 32.0, recorded below); ROPE_INIT_FUNCTIONS['longrope'](config, cpu, "
                     f"seq_len={seq_len})",
                     "longrope_factors: the set that seq_len selects (long when seq_len > "
                     "original_max_position), as float32"]
            module = modeling_llama.LlamaRotaryEmbedding(cfg)
            if seq_len > 4096:
                mpos = None  # max(POSITIONS) + 1 > 4096: the module picks the long set
            else:
                mpos = [p for p in POSITIONS if p < 4096]  # the module keeps the short set
                notes.append(f"checked against LlamaRotaryEmbedding(config) at positions {mpos} (any "
                             "larger position makes the module switch to the long set)")
            return cfg, inv, att, module, mpos, notes
        keys = {"factor": pretty(32.0), "original_max_position": "4096", "seq_len": str(seq_len),
                "longrope_factors": " ".join([str(len(factors))]
                                             + hexbits(torch.tensor(factors, dtype=torch.float32)))}
        cases.append((name, 96, 10000.0, "longrope", keys, build))

    longrope_case("longrope_short", 4096, short)
    longrope_case("longrope_long", 4097, long)
    return cases


KEY_ORDER = ["factor", "ntk_alpha", "original_max_position", "seq_len", "beta_fast", "beta_slow",
             "truncate", "mscale", "mscale_all_dim", "attention_factor", "low_freq_factor",
             "high_freq_factor", "longrope_factors"]


def make_cache():
    position_ids = torch.tensor([POSITIONS], dtype=torch.int64)
    x = torch.zeros(1, dtype=torch.float32)
    blocks, parsed_expect = [], []
    for name, rotary_dim, base, scaling, keys, build in cache_cases():
        cfg, inv, att, module, mpos, notes = build()
        n = rotary_dim // 2
        assert inv.dtype == torch.float32 and inv.shape == (n,), (name, inv.dtype, inv.shape)
        assert isinstance(att, float), (name, type(att))
        freqs, cos, sin = hf_forward(inv, att, position_ids)
        assert cos.dtype == torch.float32 and cos.shape == (1, len(POSITIONS), 2 * n)
        # HF duplicates the frequencies: emb = cat(freqs, freqs)
        assert bits_equal(cos[..., :n], cos[..., n:]) and bits_equal(sin[..., :n], sin[..., n:])

        checked = "formula only"
        if module is not None and name != "longrope_long":
            assert bits_equal(module.inv_freq, inv) and module.attention_scaling == att, name
            if mpos is None:
                mcos, msin = module(x, position_ids)
                assert bits_equal(mcos, cos) and bits_equal(msin, sin), name
                checked = "module: all rows"
            else:
                idx = [POSITIONS.index(p) for p in mpos]
                mcos, msin = module(x, torch.tensor([mpos], dtype=torch.int64))
                assert bits_equal(mcos, cos[:, idx]) and bits_equal(msin, sin[:, idx]), name
                checked = f"module: rows {mpos}"
        if name == "longrope_long":
            # The module holds the short set until a forward call sees
            # max(position_ids) + 1 > original_max_position_embeddings; then
            # it computes the long set with seq_len = original + 1 = 4097.
            assert not bits_equal(module.inv_freq, inv)
            mcos, msin = module(x, position_ids)
            assert bits_equal(module.inv_freq, inv) and module.attention_scaling == att
            assert bits_equal(mcos, cos) and bits_equal(msin, sin), name
            checked = "module: all rows"

        # How the float32 pipeline goes (what the C side has to reproduce):
        # angle = (float)pos * inv_freq, one float32 product; cos/sin of
        # that; then a product with (float)attention_scaling (torch rounds
        # the Python double scalar to float32 first).
        inv_np = inv.numpy()
        pos_f = np.array(POSITIONS, dtype=np.int64).astype(np.float32)
        angle = pos_f[:, None] * inv_np[None, :]
        assert np_bits_equal(freqs[0].numpy(), angle), name
        ucos = torch.from_numpy(angle).cos().numpy()
        usin = torch.from_numpy(angle).sin().numpy()
        assert np_bits_equal(cos[0, :, :n].numpy(), ucos * np.float32(att)), name
        assert np_bits_equal(sin[0, :, :n].numpy(), usin * np.float32(att)), name
        # Informative: torch's cos/sin against libm's double cos/sin of the
        # same float32 angle, rounded to float32 (not asserted).
        rcos = np.array([[math.cos(float(a)) for a in r] for r in angle], dtype=np.float64).astype(np.float32)
        rsin = np.array([[math.sin(float(a)) for a in r] for r in angle], dtype=np.float64).astype(np.float32)
        ndiff = int((ucos.view(np.uint32) != rcos.view(np.uint32)).sum()
                    + (usin.view(np.uint32) != rsin.view(np.uint32)).sum())
        maxulp = max(ulp_distance(ucos, rcos), ulp_distance(usin, rsin))

        lines = [f"# {s}" for s in notes]
        lines.append(f"# unscaled cos/sin against float32(libm double cos/sin of the float32 angle): "
                     f"{ndiff} of {2 * cos[0, :, :n].numel()} differ, at most {maxulp} ulp")
        lines.append(f"case {name}")
        lines.append(f"rotary_dim {rotary_dim}")
        lines.append(f"base {base!r}")
        lines.append(f"scaling {scaling}")
        for k in KEY_ORDER:
            if k in keys:
                lines.append(f"{k} {keys[k]}")
        assert set(keys) <= set(KEY_ORDER), keys
        lines.append(" ".join(["inv_freq", str(n)] + hexbits(inv)))
        lines.append(f"attention_scaling {att!r}")
        rows = []
        for i, p in enumerate(POSITIONS):
            c, s = hexbits(cos[0, i, :n]), hexbits(sin[0, i, :n])
            lines.append(" ".join(["row", str(p)] + c + s))
            rows.append((p, c, s))
        lines.append("end")
        blocks.append("\n".join(lines))
        parsed_expect.append({"name": name, "rotary_dim": rotary_dim, "base": base,
                              "scaling": scaling, "keys": dict(keys), "inv_freq": hexbits(inv),
                              "attention_scaling": att, "rows": rows})
        print(f"cache {name:17s} {scaling:8s} rotary_dim {rotary_dim:3d}  "
              f"inv_freq[0] {inv[0].item():.9g} inv_freq[-1] {inv[-1].item():.9g}  "
              f"attention_scaling {att!r}  ({checked}; cos/sin vs libm: {ndiff} differ, "
              f"max {maxulp} ulp)")
    return blocks, parsed_expect


# --------------------------------------------------------------------------
# rope-hf-apply.txt


def apply_cases():
    cases = []
    pos = torch.tensor(APPLY_POSITIONS, dtype=torch.int64)

    def randn(idx, shape):
        g = torch.Generator().manual_seed(APPLY_SEED + idx)
        return torch.randn(*shape, generator=g, dtype=torch.float32)

    # half_split_full: LlamaRotaryEmbedding + modeling_llama.apply_rotary_pos_emb
    B, H, L, D, rd = 1, 3, len(APPLY_POSITIONS), 16, 16
    x = randn(0, (B, H, L, D))
    k = randn(100, (B, H, L, D))
    cfg = llama_config(D, {"rope_type": "default", "rope_theta": 10000.0})
    pids = pos[None, :].expand(B, L)
    cos, sin = modeling_llama.LlamaRotaryEmbedding(cfg)(x, pids)
    y, _ = modeling_llama.apply_rotary_pos_emb(x, k, cos, sin)
    cases.append(("half_split_full", "half_split", x, rd, cos, sin, y,
                  "LlamaRotaryEmbedding(LlamaConfig(head_dim=16, rope_theta=10000.0)) and "
                  "modeling_llama.apply_rotary_pos_emb(q, k, cos, sin); y is q_embed"))

    # half_split_partial: GPT-NeoX's apply_rotary_pos_emb rotates the first
    # cos.shape[-1] columns and passes the rest through
    B, H, L, D, rd = 2, 3, len(APPLY_POSITIONS), 16, 8
    x = randn(1, (B, H, L, D))
    k = randn(101, (B, H, L, D))
    rp = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    ncfg = checked_config(lambda: GPTNeoXConfig(
        vocab_size=32, hidden_size=H * D, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=H, max_position_embeddings=4096, rope_parameters=dict(rp)))
    pids = pos[None, :].expand(B, L)
    cos, sin = modeling_gpt_neox.GPTNeoXRotaryEmbedding(ncfg)(x, pids)
    assert cos.shape == (B, L, rd)
    y, k_embed = modeling_gpt_neox.apply_rotary_pos_emb(x, k, cos, sin)
    # The same through Phi: PhiRotaryEmbedding and the lines of
    # modeling_phi.PhiAttention.forward (transformers 5.24.0) that split off
    # the rotary part, rotate it with apply_rotary_pos_emb and concatenate.
    pcfg = checked_config(lambda: PhiConfig(
        vocab_size=32, hidden_size=H * D, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=H, max_position_embeddings=4096, rope_parameters=dict(rp)))
    pcos, psin = modeling_phi.PhiRotaryEmbedding(pcfg)(x, pids)
    assert bits_equal(pcos, cos) and bits_equal(psin, sin)
    rotary_ndims = int(D * pcfg.rope_parameters["partial_rotary_factor"])
    query_states, key_states = x, k
    # --- from modeling_phi.PhiAttention.forward ---
    query_rot, query_pass = (query_states[..., :rotary_ndims], query_states[..., rotary_ndims:])
    key_rot, key_pass = (key_states[..., :rotary_ndims], key_states[..., rotary_ndims:])
    query_rot, key_rot = modeling_phi.apply_rotary_pos_emb(query_rot, key_rot, pcos, psin)
    query_states = torch.cat((query_rot, query_pass), dim=-1)
    key_states = torch.cat((key_rot, key_pass), dim=-1)
    # --- end ---
    assert bits_equal(query_states, y) and bits_equal(key_states, k_embed)
    cases.append(("half_split_partial", "half_split", x, rd, cos, sin, y,
                  "GPTNeoXRotaryEmbedding(GPTNeoXConfig(hidden_size=48, num_attention_heads=3, "
                  "partial_rotary_factor=0.5)) and modeling_gpt_neox.apply_rotary_pos_emb;\n"
                  "# equal to PhiRotaryEmbedding + modeling_phi.PhiAttention.forward's split / "
                  "apply_rotary_pos_emb / concat"))

    # interleaved: GPT-J.  GPTJRotaryEmbedding gathers rows of
    # create_sinusoidal_positions(n_positions, rotary_dim) = [sin | cos]; GPT-J
    # rotates query in [B, L, H, D] order (before its transpose(1, 2)).
    for idx, (name, rd) in enumerate((("interleaved_full", 16), ("interleaved_partial", 8)), start=2):
        B, H, L, D = 2, 3, len(APPLY_POSITIONS), 16
        x = randn(idx, (B, H, L, D))
        jcfg = GPTJConfig(vocab_size=32, n_positions=4096, n_embd=H * D, n_layer=1, n_head=H,
                          rotary_dim=rd, bos_token_id=None, eos_token_id=None)
        remb = modeling_gptj.GPTJRotaryEmbedding(jcfg)
        assert bits_equal(remb.embed_positions, modeling_gptj.create_sinusoidal_positions(4096, rd))
        pids = pos[None, :].expand(B, L)
        sin, cos = remb(x, pids)
        assert sin.shape == (B, L, rd // 2)
        query = x.transpose(1, 2)  # [B, L, H, D], as GPTJAttention holds it
        rotary_dim = jcfg.rotary_dim
        # --- from modeling_gptj.GPTJAttention.forward (transformers 5.24.0) ---
        q_rot = query[:, :, :, :rotary_dim]
        q_pass = query[:, :, :, rotary_dim:]
        q_rot = modeling_gptj.apply_rotary_pos_emb(q_rot, sin, cos)
        query = torch.cat([q_rot, q_pass], dim=-1)
        # --- end ---
        if rd == D:
            assert bits_equal(query, modeling_gptj.apply_rotary_pos_emb(x.transpose(1, 2), sin, cos))
        y = query.transpose(1, 2).contiguous()  # back to [B, H, L, D]
        # what apply_rotary_pos_emb multiplied by: each value twice in a row
        rep = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
        assert bits_equal(rep[..., 0::2], cos[:, :, None, :]) and bits_equal(rep[..., 1::2], cos[:, :, None, :])
        cases.append((name, "interleaved", x, rd, cos, sin, y,
                      f"GPTJRotaryEmbedding(GPTJConfig(n_embd=48, n_head=3, rotary_dim={rd}, "
                      "n_positions=4096)) and modeling_gptj.apply_rotary_pos_emb on\n"
                      "# query[:, :, :, :rotary_dim] in GPT-J's [B, L, H, D] order, then cat with the rest "
                      "(GPTJAttention.forward); x and y stored as [B, H, L, D]"))
    return cases


def make_apply():
    blocks, parsed_expect = [], []
    for name, pairing, x, rd, cos, sin, y, note in apply_cases():
        B, H, L, D = x.shape
        n = rd // 2
        # the un-duplicated half of what HF multiplied by, [L, rd/2]
        if pairing == "half_split":
            assert cos.shape == (B, L, rd)
            assert bits_equal(cos[..., :n], cos[..., n:]) and bits_equal(sin[..., :n], sin[..., n:])
            c, s = cos[..., :n], sin[..., :n]
        else:
            assert cos.shape == (B, L, n)
            c, s = cos, sin
        for b in range(1, B):
            assert bits_equal(c[b], c[0]) and bits_equal(s[b], s[0])
        c, s = c[0].contiguous(), s[0].contiguous()

        # The rotation is mul, mul, add in float32 (no fused multiply-add):
        # y_a = x_a*c - x_b*s, y_b = x_b*c + x_a*s, with the pass-through
        # columns copied.  Check that against numpy.
        xn, cn, sn = x.numpy(), c.numpy()[None, None], s.numpy()[None, None]
        ref = xn.copy()
        if pairing == "half_split":
            a, b = xn[..., :n], xn[..., n:rd]
        else:
            a, b = xn[..., 0:rd:2], xn[..., 1:rd:2]
        ya = a * cn + (-b) * sn
        yb = b * cn + a * sn
        if pairing == "half_split":
            ref[..., :n], ref[..., n:rd] = ya, yb
        else:
            ref[..., 0:rd:2], ref[..., 1:rd:2] = ya, yb
        assert np_bits_equal(ref, y.numpy()), name

        lines = [f"# {note}",
                 f"case {name}",
                 f"pairing {pairing}",
                 f"shape {B} {H} {L} {D}",
                 f"rotary_dim {rd}",
                 " ".join(["positions"] + [str(p) for p in APPLY_POSITIONS]),
                 " ".join(["x"] + hexbits(x)),
                 " ".join(["cos"] + hexbits(c)),
                 " ".join(["sin"] + hexbits(s)),
                 " ".join(["y"] + hexbits(y)),
                 "end"]
        blocks.append("\n".join(lines))
        parsed_expect.append({"name": name, "pairing": pairing, "shape": (B, H, L, D),
                              "rotary_dim": rd, "positions": list(APPLY_POSITIONS),
                              "x": hexbits(x), "cos": hexbits(c), "sin": hexbits(s), "y": hexbits(y)})
        print(f"apply {name:19s} {pairing:11s} shape [{B},{H},{L},{D}] rotary_dim {rd:2d}  "
              f"positions {APPLY_POSITIONS}  max|y| {float(y.abs().max()):.6g}")
    return blocks, parsed_expect


# --------------------------------------------------------------------------
# output and the round trip


def header(title, body):
    cap = torch.backends.cpu.get_cpu_capability()
    lines = [f"# {title}",
             "# Written by scripts/rope-reference.py (do not edit; rerun it: "
             "sh scripts/peers-venv.sh && .venv-peers/bin/python scripts/rope-reference.py).",
             f"# transformers {transformers.__version__}, torch {torch.__version__} "
             f"(CPU, 1 thread, ATen CPU capability {cap}), numpy {np.__version__}, "
             f"Python {platform.python_version()}.",
             "# Lines starting with '#' are comments and appear only between blocks; there are no "
             "blank lines.",
             "# Every float value is a float32 bit pattern: 8 lowercase hex digits "
             "(3f800000 = 1.0), space separated."]
    return "\n".join(lines + [f"# {s}" if s else "#" for s in body])


CACHE_HEADER = [
    "",
    "Block format:",
    "  case <name>",
    "  rotary_dim <int>",
    "  base <rope_theta, Python repr of a double>",
    "  scaling <none|linear|ntk|dynamic|yarn|llama3|longrope>",
    "  <key> <value>   the scheme's parameters, in this order when present: factor, ntk_alpha,",
    "                  original_max_position, seq_len, beta_fast, beta_slow, truncate (0/1), mscale,",
    "                  mscale_all_dim, attention_factor (only when the config sets it), low_freq_factor,",
    "                  high_freq_factor, longrope_factors <n> <n hex>; decimals are Python reprs",
    "  inv_freq <n> <n hex>             n = rotary_dim / 2, as HF's init function returned it",
    "  attention_scaling <Python repr of the double HF returned>",
    "  row <position> <n hex cos> <n hex sin>",
    "  end",
    "cos/sin are LlamaRotaryEmbedding.forward's: freqs = position_ids[..., None].float() * inv_freq",
    "(one float32 product), emb = cat(freqs, freqs), cos = emb.cos() * attention_scaling (torch rounds",
    "the double to float32 before the product), likewise sin; a row holds the first n columns (the",
    "second n are identical).  position_ids are int64 [[0, 1, 4095, 65535, 131071, 1000000, 16777215]].",
    "scaling 'ntk' (static NTK-aware, ntk_alpha) has no HF init function: the default computation with",
    "rope_theta = base * ntk_alpha ** (rotary_dim / (rotary_dim - 2)) in doubles; 'base' is the original.",
    "scaling 'dynamic': ROPE_INIT_FUNCTIONS['dynamic'] called with the block's seq_len (a Python int);",
    "original_max_position is the config's max_position_embeddings.",
    "yarn: beta_fast / beta_slow / truncate are the values HF used (its defaults 32 / 1 / true where the",
    "config does not set them).  longrope: factor is HF's max_position_embeddings /",
    "original_max_position_embeddings (not in the config), longrope_factors the set seq_len selected.",
    "The comment lines above each block give the exact config and function.",
]

APPLY_HEADER = [
    "",
    "Block format:",
    "  case <name>",
    "  pairing <half_split|interleaved>",
    "  shape <B> <H> <L> <D>      HF's [batch, heads, seq, head_dim]",
    "  rotary_dim <int>           columns rotary_dim..D-1 pass through unchanged",
    "  positions <L ints>         the same for every batch row",
    "  x <B*H*L*D hex>            row-major [B, H, L, D]",
    "  cos <L*rotary_dim/2 hex>   row-major [L, rotary_dim/2]: the values HF multiplied by, once each",
    "  sin <L*rotary_dim/2 hex>   (half_split: HF's cos[..., :rotary_dim/2], the second half being equal;",
    "                             interleaved: GPT-J's cos before repeat_interleave(2))",
    "  y <B*H*L*D hex>            HF's output, row-major [B, H, L, D]",
    "  end",
    "half_split pairs column i with i + rotary_dim/2; interleaved pairs 2i with 2i+1.  With",
    "a, b a pair and c, s its cos, sin: y_a = a*c + (-b)*s, y_b = b*c + a*s, each product and the",
    "sum rounded to float32 (separate torch ops, no fused multiply-add); checked by the script.",
    f"x comes from torch.randn with torch.Generator().manual_seed({APPLY_SEED} + case index).",
]


def write(path, head, blocks):
    text = head + "\n" + "\n".join(blocks) + "\n"
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write(text)
    return len(text)


def parse_blocks(path):
    """A minimal parser like the C tests' one: '#' lines are skipped, a block
    runs from 'case' to 'end', each line is '<key> <words...>'."""
    blocks, cur = [], None
    with open(path, encoding="ascii") as f:
        for line in f:
            line = line.rstrip("\n")
            assert line.strip() == line and line, f"{path}: stray blank or whitespace: {line!r}"
            if line.startswith("#"):
                assert cur is None, f"{path}: comment inside a block"
                continue
            key, _, rest = line.partition(" ")
            words = rest.split(" ") if rest else []
            if key == "case":
                assert cur is None
                cur = {"name": words[0], "lines": []}
            elif key == "end":
                blocks.append(cur)
                cur = None
            else:
                cur["lines"].append((key, words))
    assert cur is None
    return blocks


def hexlist(words, count):
    assert len(words) == count, (len(words), count)
    for w in words:
        assert len(w) == 8 and w == w.lower() and int(w, 16) >= 0
    return words


def check_cache(path, expect):
    blocks = parse_blocks(path)
    assert len(blocks) == len(expect)
    for blk, exp in zip(blocks, expect):
        assert blk["name"] == exp["name"]
        d = {"keys": {}, "rows": []}
        for key, words in blk["lines"]:
            if key == "rotary_dim":
                d["rotary_dim"] = int(words[0])
            elif key == "base":
                d["base"] = float(words[0])
            elif key == "scaling":
                d["scaling"] = words[0]
            elif key == "inv_freq":
                n = int(words[0])
                d["inv_freq"] = hexlist(words[1:], n)
            elif key == "attention_scaling":
                d["attention_scaling"] = float(words[0])
            elif key == "row":
                n = d["rotary_dim"] // 2
                vals = hexlist(words[1:], 2 * n)
                d["rows"].append((int(words[0]), vals[:n], vals[n:]))
            elif key in KEY_ORDER:
                if key == "longrope_factors":
                    hexlist(words[1:], int(words[0]))
                d["keys"][key] = " ".join(words)
            else:
                raise AssertionError(f"unknown key {key}")
        assert d["rotary_dim"] == exp["rotary_dim"] and d["base"] == exp["base"]
        assert d["scaling"] == exp["scaling"] and d["keys"] == exp["keys"]
        assert d["inv_freq"] == exp["inv_freq"] and len(d["inv_freq"]) == d["rotary_dim"] // 2
        assert d["attention_scaling"] == exp["attention_scaling"]
        assert d["rows"] == exp["rows"] and [r[0] for r in d["rows"]] == POSITIONS
        order = [k for k, _ in blk["lines"] if k in KEY_ORDER]
        assert order == [k for k in KEY_ORDER if k in order], order


def check_apply(path, expect):
    blocks = parse_blocks(path)
    assert len(blocks) == len(expect)
    for blk, exp in zip(blocks, expect):
        assert blk["name"] == exp["name"]
        d = dict(blk["lines"])
        B, H, L, D = (int(w) for w in d["shape"])
        rd = int(d["rotary_dim"][0])
        assert d["pairing"] == [exp["pairing"]] and (B, H, L, D) == exp["shape"] and rd == exp["rotary_dim"]
        assert [int(w) for w in d["positions"]] == exp["positions"] and len(exp["positions"]) == L
        assert hexlist(d["x"], B * H * L * D) == exp["x"]
        assert hexlist(d["y"], B * H * L * D) == exp["y"]
        assert hexlist(d["cos"], L * rd // 2) == exp["cos"]
        assert hexlist(d["sin"], L * rd // 2) == exp["sin"]


def main():
    print(f"rope-reference: transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    cache_blocks, cache_expect = make_cache()
    apply_blocks, apply_expect = make_apply()
    os.makedirs(os.path.dirname(CACHE_PATH), exist_ok=True)
    n1 = write(CACHE_PATH, header("Hugging Face RoPE inv_freq and cos/sin rows, for peak's RoPE tests",
                                  CACHE_HEADER), cache_blocks)
    n2 = write(APPLY_PATH, header("Hugging Face RoPE rotations of small tensors, for peak's RoPE tests",
                                  APPLY_HEADER), apply_blocks)
    check_cache(CACHE_PATH, cache_expect)
    check_apply(APPLY_PATH, apply_expect)
    assert n1 < 300_000 and n2 < 300_000
    print(f"rope-reference: wrote {os.path.relpath(CACHE_PATH, ROOT)} ({n1} bytes, "
          f"{len(cache_blocks)} cases) and {os.path.relpath(APPLY_PATH, ROOT)} ({n2} bytes, "
          f"{len(apply_blocks)} cases); both parse back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
