"""peak's RoPE binding: peak.rope_cache / peak.rope_apply against a float64
NumPy oracle (the schemes' formulas) and against Hugging Face transformers'
values (tests/data/rope-hf-cache.txt and rope-hf-apply.txt, parsed here);
peak.torch's apply_rotary_pos_emb and RotaryEmbedding against transformers'
formulas and data, and against transformers itself where it can be imported.

Run: python3 python/tests/run.py rope (meson test: python-rope).  Without
torch the peak.torch tests skip; without transformers (Debian has none) so
do the direct comparisons, which run in the peers venv
(scripts/peers-venv.sh):

    PEAK_LIBRARY=build/libpeak.so.4 PYTHONPATH=python \\
        .venv-peers/bin/python python/tests/run.py rope
"""
import dataclasses
import math
import os
import unittest

import numpy as np

import peak
from test_numpy import HAVE_CC, NEED_CC, POOLS, c_printed, check_layouts

try:
    import torch
    import peak.torch as pt
except ImportError:
    torch = None
try:
    import transformers
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama
except ImportError:
    transformers = None

RNG = np.random.default_rng(20261202)
QUICK = os.environ.get("PEAK_TEST_QUICK", "0") not in ("", "0")
EXACT_BOUND = 2.0 ** -23   # peak.h, PEAK_ROPE_EXACT, positions below 2^24
HF_ULP = 2                 # peak.h, PEAK_ROPE_HF_F32 against transformers

SOURCE = os.environ.get("PEAK_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(SOURCE, "tests", "data")




def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def same_bits(a, b):
    a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def ulps(a, b):
    """Largest distance in float32 ULPs (signed-magnitude order, so that
    -0.0 and 0.0 are 0 apart)."""
    def ordered(x):
        i = np.ascontiguousarray(x, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return int(np.abs(ordered(a) - ordered(b)).max()) if np.size(a) else 0


# ---- the float64 oracle ------------------------------------------------------

def freqs_ref(rd, p):
    """(frequencies w_i [rd / 2], attention factor A) of the RopeParams p, in
    float64: the schemes' formulas as peak.h states them (RoFormer; the
    scalings as transformers' modeling_rope_utils.py)."""
    n, r = rd // 2, float(rd)
    i = np.arange(n, dtype=np.float64)
    base = p.base
    if p.scaling == "ntk":
        base = base * p.ntk_alpha ** (r / (r - 2))
    elif p.scaling == "dynamic":
        l0 = p.original_max_position
        length = max(p.seq_len, l0)
        base = base * (p.factor * length / l0 - (p.factor - 1)) ** (r / (r - 2))
    w = base ** (-2.0 * i / r)
    if p.scaling == "linear":
        w = w / p.factor
    elif p.scaling == "yarn":
        def dim(rotations):
            return r * math.log(p.original_max_position / (rotations * 2 * math.pi)) / (
                2 * math.log(p.base))
        lo, hi = dim(p.beta_fast), dim(p.beta_slow)
        if p.truncate:
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, r - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((i - lo) / (hi - lo), 0.0, 1.0)
        w = w / p.factor * ramp + w * (1.0 - ramp)
    elif p.scaling == "llama3":
        l0 = p.original_max_position
        wavelen = 2 * math.pi / w
        smooth = (l0 / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor)
        w = np.where(wavelen < l0 / p.high_freq_factor, w,
                     np.where(wavelen > l0 / p.low_freq_factor, w / p.factor,
                              (1 - smooth) * w / p.factor + smooth * w))
    elif p.scaling == "longrope":
        w = w / np.array(p.longrope_factors, np.float32).astype(np.float64)

    def m(s, k):
        return 1.0 if s <= 1 else 0.1 * k * math.log(s) + 1.0

    if p.attention_factor is not None:
        a = p.attention_factor
    elif p.scaling == "yarn":
        a = (m(p.factor, p.mscale) / m(p.factor, p.mscale_all_dim)
             if p.mscale and p.mscale_all_dim else m(p.factor, 1.0))
    elif p.scaling == "longrope" and p.factor > 1:
        a = math.sqrt(1 + math.log(p.factor) / math.log(p.original_max_position))
    else:
        a = 1.0
    return w, a


def cache_ref(positions, rd, p):
    """float64 [len(positions), rd]: n cosines then n sines, times A."""
    w, a = freqs_ref(rd, p)
    ang = np.asarray(positions, np.float64)[:, None] * w[None, :]
    return np.concatenate((np.cos(ang), np.sin(ang)), axis=1) * a


def rotate_ref(x, cache_rows, rd, pairing):
    """transformers' rotation in float32 NumPy: x [..., D] with cos/sin
    rows broadcast against x[..., 0]; each product and the sum rounded
    (NumPy never fuses them)."""
    n = rd // 2
    c, s = cache_rows[..., :n], cache_rows[..., n:rd]
    y = x.copy()
    if pairing == "half_split":
        a, b = x[..., :n], x[..., n:rd]
    else:
        a, b = x[..., 0:rd:2], x[..., 1:rd:2]
    ya, yb = a * c + (-b) * s, b * c + a * s
    if pairing == "half_split":
        y[..., :n], y[..., n:rd] = ya, yb
    else:
        y[..., 0:rd:2], y[..., 1:rd:2] = ya, yb
    return y


LONG_SHORT = [1.0 + 0.01 * i for i in range(48)]
LONG_LONG = [1.0 + 0.5 * i for i in range(48)]

# (rotary_dim, RopeParams) of every scheme, exact mode
SCHEMES = [
    (2, peak.RopeParams()),
    (16, peak.RopeParams()),
    (24, peak.RopeParams(base=10000.0)),
    (64, peak.RopeParams(base=1e8)),
    (128, peak.RopeParams(base=500000.0)),
    (512, peak.RopeParams(base=1e8)),
    (128, peak.RopeParams(scaling="linear", factor=4.0)),
    (128, peak.RopeParams(scaling="ntk", ntk_alpha=8.0)),
    (4, peak.RopeParams(scaling="ntk", ntk_alpha=2.0)),
    (128, peak.RopeParams(scaling="dynamic", factor=2.0, original_max_position=4096,
                          seq_len=10000)),
    (128, peak.RopeParams(scaling="dynamic", factor=2.0, original_max_position=4096)),
    (128, peak.RopeParams(base=1e6, scaling="yarn", factor=4.0, original_max_position=32768)),
    (64, peak.RopeParams(scaling="yarn", factor=40.0, original_max_position=4096, mscale=0.707,
                         mscale_all_dim=1.0)),
    (64, peak.RopeParams(base=150000.0, scaling="yarn", factor=32.0, original_max_position=4096,
                         truncate=False)),
    (64, peak.RopeParams(scaling="yarn", factor=8.0, original_max_position=2048, beta_fast=16.0,
                         beta_slow=2.0, attention_factor=0.75)),
    (128, peak.RopeParams(base=500000.0, scaling="llama3", factor=8.0,
                          original_max_position=8192)),
    (96, peak.RopeParams(scaling="longrope", factor=32.0, original_max_position=4096,
                         longrope_factors=LONG_SHORT)),
    (96, peak.RopeParams(scaling="longrope", factor=32.0, original_max_position=4096,
                         longrope_factors=LONG_LONG, attention_factor=1.5)),
]


# ---- Hugging Face reference data -----------------------------------------------

def hexfloats(words):
    return np.array([int(w, 16) for w in words], np.uint32).view(np.float32)


def parse_blocks(name):
    """Blocks of a tests/data/rope-hf-*.txt file (format in its header):
    '#' lines skipped, 'case' .. 'end', each line '<key> <words...>'."""
    blocks, cur = [], None
    with open(os.path.join(DATA, name), encoding="ascii") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue
            key, _, rest = line.partition(" ")
            words = rest.split(" ") if rest else []
            if key == "case":
                cur = {"name": words[0], "rows": []}
            elif key == "end":
                blocks.append(cur)
                cur = None
            elif key == "row":
                cur["rows"].append((int(words[0]), hexfloats(words[1:])))
            else:
                cur[key] = words
    return blocks


_FLOAT_KEYS = ("factor", "ntk_alpha", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
               "attention_factor", "low_freq_factor", "high_freq_factor")


def hf_cases():
    """(name, rotary_dim, RopeParams in mode "hf", rows [(position, [2n]
    float32)], block) of rope-hf-cache.txt."""
    out = []
    for blk in parse_blocks("rope-hf-cache.txt"):
        rd = int(blk["rotary_dim"][0])
        kw = {"base": float(blk["base"][0]), "scaling": blk["scaling"][0], "mode": "hf"}
        for k in _FLOAT_KEYS:
            if k in blk:
                kw[k] = float(blk[k][0])
        for k in ("original_max_position", "seq_len"):
            if k in blk:
                kw[k] = int(blk[k][0])
        if "truncate" in blk:
            kw["truncate"] = blk["truncate"][0] == "1"
        if "longrope_factors" in blk:
            kw["longrope_factors"] = hexfloats(blk["longrope_factors"][1:])
        rows = blk["rows"]
        for _, r in rows:
            assert r.shape == (rd,)
        out.append((blk["name"], rd, peak.RopeParams(**kw), rows, blk))
    return out


def hf_apply_cases():
    out = []
    for blk in parse_blocks("rope-hf-apply.txt"):
        B, H, L, D = (int(w) for w in blk["shape"])
        rd = int(blk["rotary_dim"][0])
        out.append({
            "name": blk["name"], "pairing": blk["pairing"][0], "rotary_dim": rd,
            "positions": np.array([int(w) for w in blk["positions"]], np.int64),
            "x": hexfloats(blk["x"]).reshape(B, H, L, D),
            "cos": hexfloats(blk["cos"]).reshape(L, rd // 2),
            "sin": hexfloats(blk["sin"]).reshape(L, rd // 2),
            "y": hexfloats(blk["y"]).reshape(B, H, L, D)})
    return out


# ---- rope_cache --------------------------------------------------------------------

class RopeCacheExact(unittest.TestCase):
    def starts(self):
        starts = [0, 4090, 65530, 999990, (1 << 24) - 8]
        return starts if QUICK else starts + [int(v) for v in RNG.integers(0, 1 << 24, 6)]

    def test_every_scheme_against_the_oracle(self):
        """Within 2^-23 of the formulas in float64 (peak.h's bound)."""
        for rd, p in SCHEMES:
            for pos0 in self.starts():
                got = peak.rope_cache(8, rd, pos0, params=p)
                self.assertEqual(got.shape, (8, rd))
                self.assertEqual(got.dtype, np.float32)
                err = np.abs(got - cache_ref(np.arange(pos0, pos0 + 8), rd, p)).max()
                self.assertLessEqual(err, EXACT_BOUND, (rd, p, pos0))

    def test_same_bits_whatever_the_split(self):
        for rd, p in SCHEMES[::3]:
            whole = peak.rope_cache(300, rd, 4000, params=p)
            self.assertTrue(same_bits(peak.rope_cache(1, rd, 4123, params=p)[0], whole[123]))
            parts = [peak.rope_cache(k, rd, 4000 + a, params=p)
                     for a, k in ((0, 7), (7, 100), (107, 193))]
            self.assertTrue(same_bits(np.concatenate(parts), whole), (rd, p))

    def test_params_dict_and_keywords(self):
        p = peak.RopeParams(scaling="yarn", factor=4.0, original_max_position=1024)
        want = peak.rope_cache(5, 32, 100, params=p)
        as_dict = dataclasses.asdict(p)
        self.assertTrue(same_bits(peak.rope_cache(5, 32, 100, params=as_dict), want))
        self.assertTrue(same_bits(peak.rope_cache(5, 32, 100, scaling="yarn", factor=4.0,
                                                  original_max_position=1024), want))
        # keywords override params
        self.assertTrue(same_bits(peak.rope_cache(5, 32, 100, params=dataclasses.replace(
            p, factor=2.0), factor=4.0), want))
        self.assertFalse(same_bits(peak.rope_cache(5, 32, 100, params=p, factor=2.0), want))
        self.assertEqual(peak.RopeParams(scaling=None), peak.RopeParams())

    def test_out(self):
        out = np.full((6, 16), np.nan, np.float32)
        self.assertIs(peak.rope_cache(6, 16, 9, out=out), out)
        self.assertTrue(same_bits(out, peak.rope_cache(6, 16, 9)))
        for bad in (np.empty((6, 18), np.float32), np.empty((12, 16), np.float32)[::2]):
            with self.assertRaises(ValueError):
                peak.rope_cache(6, 16, out=bad)
        with self.assertRaises(TypeError):
            peak.rope_cache(6, 16, out=np.empty((6, 16)))

    def test_half_types(self):
        """float16 / bfloat16 (ml_dtypes) caches: the float32 cache rounded once
        (peak.convert's bits) for every scheme and both modes; exact mode within
        half an ULP of the type plus 2^-24 A of the formulas (peak.h)."""
        types = [np.float16] + ([peak._bfloat16()] if peak._bfloat16() else [])
        for dt in types:
            mbits, emin = (10, -14) if dt == np.float16 else (7, -126)
            for rd, p in SCHEMES:
                for mode in ("exact", "hf"):
                    q = dataclasses.replace(p, mode=mode)
                    for n, pos0 in ((3, 0), (300, 4000), (9, (1 << 20) - 9)):
                        want = peak.convert(peak.rope_cache(n, rd, pos0, params=q), dt)
                        got = peak.rope_cache(n, rd, pos0, params=q, dtype=dt)
                        self.assertEqual(got.dtype, np.dtype(dt))
                        self.assertTrue(np.array_equal(got.view(np.uint16), want.view(np.uint16)),
                                        (dt, rd, q, n, pos0))
                _, a = freqs_ref(rd, p)
                ref = cache_ref(np.arange(4000, 4300), rd, p)
                got = peak.rope_cache(300, rd, 4000, params=p, dtype=dt).astype(np.float64)
                _, e = np.frexp(ref)  # |ref| in [2^(e-1), 2^e)
                ulp = np.ldexp(1.0, np.maximum(e - 1, emin) - mbits)
                self.assertTrue(np.all(np.abs(got - ref) <= 0.5 * ulp + 2.0 ** -24 * max(1.0, a)),
                                (dt, rd, p))
            out = np.zeros((6, 16), dt)
            self.assertIs(peak.rope_cache(6, 16, 9, out=out), out)
            self.assertTrue(np.array_equal(out.view(np.uint16),
                                           peak.rope_cache(6, 16, 9, dtype=dt).view(np.uint16)))
            with self.assertRaises(TypeError):  # dtype and out disagree
                peak.rope_cache(6, 16, dtype=dt, out=np.empty((6, 16), np.float32))
            with self.assertRaises(TypeError):  # rope_apply takes float32 caches
                peak.rope_apply(rand(1, 4, 2, 16), cache=peak.rope_cache(8, 16, dtype=dt))
        with self.assertRaises(TypeError):
            peak.rope_cache(6, 16, dtype=np.float64)

    def test_errors(self):
        canary = np.full((4, 8), 7.0, np.float32)
        status = [  # (kwargs, exception): C's checks, through the binding
            (dict(rotary_dim=7), peak.InvalidArgument),
            (dict(rotary_dim=514), peak.InvalidArgument),
            (dict(base=1.0), peak.InvalidArgument),
            (dict(base=float("inf")), peak.InvalidArgument),
            (dict(scaling="linear", factor=0.5), peak.InvalidArgument),
            (dict(scaling="ntk", ntk_alpha=0.5), peak.InvalidArgument),
            (dict(scaling="dynamic", factor=2.0), peak.InvalidArgument),  # no original length
            (dict(scaling="yarn", factor=4.0), peak.InvalidArgument),
            (dict(scaling="yarn", factor=4.0, original_max_position=64, beta_fast=-1.0),
             peak.InvalidArgument),
            (dict(scaling="llama3", factor=8.0, original_max_position=64, low_freq_factor=4.0,
                  high_freq_factor=1.0), peak.InvalidArgument),
            (dict(scaling="longrope", original_max_position=64,
                  longrope_factors=[1.0, 0.0, 1.0, 1.0]), peak.InvalidArgument),
            (dict(scaling="longrope", original_max_position=64,
                  longrope_factors=[1.0, 1e300, 1.0, 1.0]), peak.InvalidArgument),
            (dict(attention_factor=-1.0), peak.InvalidArgument),
            (dict(pos0=peak.MAX_POSITION - 3), peak.OutOfRange),
            (dict(pos0=2 ** 64 + 1), peak.OutOfRange),
            (dict(mode="hf_f16"), ValueError),
            (dict(scaling="ntk-by-parts"), ValueError),
            (dict(attention_factor=0.0), ValueError),  # 0: peak's "default" marker
            (dict(scaling="longrope", original_max_position=64), ValueError),  # no factors
            (dict(scaling="longrope", original_max_position=64, longrope_factors=[1.0] * 3),
             ValueError),  # C would read rotary_dim / 2 = 4
            (dict(pos0=-1), ValueError),
            (dict(base="1e4"), TypeError),
            (dict(factor=True), TypeError),
            (dict(truncate=1), TypeError),
            (dict(pos0=1.0), TypeError),
            (dict(seq_len=1.5), TypeError),
            (dict(longrope_factors="abcd"), TypeError),
            (dict(theta=1e4), TypeError),  # not a rope parameter
            (dict(params=[("base", 1e4)]), TypeError),
            (dict(params={"theta": 1e4}), TypeError),
        ]
        for kw, exc in status:
            kw = dict(kw)
            rd = kw.pop("rotary_dim", 8)
            out = canary.copy() if rd == 8 else None
            with self.assertRaises(exc, msg=str(kw)) as cm:
                peak.rope_cache(4, rd, out=out, **kw)
            if isinstance(cm.exception, peak.PeakError):
                self.assertEqual(cm.exception.status, {peak.InvalidArgument: 1,
                                                       peak.OutOfRange: 2}[exc], kw)
            if out is not None:
                self.assertTrue(same_bits(out, canary), kw)  # nothing written
        self.assertEqual(peak.InvalidArgument.name, "PEAK_ERR_INVALID_ARG")
        with self.assertRaises(peak.OutOfRange):
            peak.rope_cache(2 ** 40, 8)  # before allocating 4 TB
        with self.assertRaises(ValueError):
            peak.rope_cache(0, 8)


class RopeCacheHF(unittest.TestCase):
    """mode "hf" against transformers 5.24 / torch 2.15's cos/sin rows."""

    def test_rows_within_2_ulp(self):
        cases = hf_cases()
        self.assertEqual(len(cases), 17)
        seen = set()
        for name, rd, p, rows, _ in cases:
            seen.add(p.scaling)
            self.assertEqual([pos for pos, _ in rows],
                             [0, 1, 4095, 65535, 131071, 1000000, 16777215])
            for pos, want in rows:
                got = peak.rope_cache(1, rd, pos, params=p)[0]
                self.assertLessEqual(ulps(got, want), HF_ULP, (name, pos))
            # a table through several rows gives the rows' bits
            table = peak.rope_cache(3, rd, 4094, params=p)
            self.assertTrue(same_bits(table[1], peak.rope_cache(1, rd, 4095, params=p)[0]))
        self.assertEqual(seen, {"none", "linear", "ntk", "dynamic", "yarn", "llama3",
                                "longrope"})

    def test_oracle_against_hf_inv_freq(self):
        """The oracle's frequencies are the schemes transformers computes: its
        float32 inv_freq within 4 ULP of them (7 float32 roundings at most),
        and its attention_scaling equal to the oracle's factor."""
        for name, rd, p, _, blk in hf_cases():
            w, a = freqs_ref(rd, p)
            hf = hexfloats(blk["inv_freq"][1:])
            self.assertLessEqual(ulps(w.astype(np.float32), hf), 4, name)
            self.assertAlmostEqual(a, float(blk["attention_scaling"][0]), places=14, msg=name)


# ---- rope_apply --------------------------------------------------------------------

def expand(x_shape, layout, cache, pos):
    """cos/sin rows for each token, broadcastable against x [..., D]:
    pos [B, L] indexes cache."""
    rows = cache[pos]  # [B, L, rd]
    return rows[:, :, None, :] if layout == "blhd" else rows[:, None, :, :]


class RopeApply(unittest.TestCase):
    def test_against_numpy_rotation(self):
        """Bit for bit the float32 rotation of peak's own cache rows, for both
        pairings and layouts, partial rotary, positions or pos0."""
        B, L, H = 2, 9, 3
        for D, rd in ((16, 16), (64, 32), (128, 128), (80, 32), (6, 2)):
            for pairing in ("half_split", "interleaved"):
                for layout in ("blhd", "bhld"):
                    shape = (B, L, H, D) if layout == "blhd" else (B, H, L, D)
                    x = rand(*shape)
                    pos = RNG.integers(0, 5000, (B, L))
                    cache = peak.rope_cache(5000, rd, base=500000.0)
                    want = rotate_ref(x, expand(shape, layout, cache, pos), rd, pairing)
                    kw = dict(rotary_dim=rd, pairing=pairing, layout=layout)
                    got = peak.rope_apply(x, pos, cache=cache, **kw)
                    self.assertTrue(same_bits(got, want), (D, rd, pairing, layout))
                    # on the fly: the same bits
                    self.assertTrue(same_bits(peak.rope_apply(x, pos, base=500000.0, **kw), want))
                    # pos0: token l at pos0 + l
                    pos0 = np.broadcast_to(np.arange(700, 700 + L), (B, L))
                    want0 = rotate_ref(x, expand(shape, layout, cache, pos0), rd, pairing)
                    self.assertTrue(same_bits(peak.rope_apply(x, pos0=700, cache=cache, **kw),
                                              want0))
                    self.assertTrue(same_bits(peak.rope_apply(x, pos0=700, base=500000.0, **kw),
                                              want0))
                    if rd < D:
                        self.assertTrue(same_bits(got[..., rd:], x[..., rd:]))

    def test_positions_forms(self):
        B, L, H, D = 3, 5, 2, 8
        x = rand(B, L, H, D)
        row = np.array([4, 0, 99, 7, 7])
        want = peak.rope_apply(x, np.broadcast_to(row, (B, L)).copy())
        for pos in (row, row[None], row.astype(np.int32), row.astype(np.int32)[None],
                    row.astype(np.uint16), list(row), np.tile(row, (B, 1)).astype(np.int32),
                    np.tile(np.repeat(row, 2), (B, 1))[:, ::2]):  # strided rows: copied
            self.assertTrue(same_bits(peak.rope_apply(x, pos), want), repr(pos))
        self.assertTrue(same_bits(peak.rope_apply(x), peak.rope_apply(x, np.arange(L))))
        # per-sequence positions (left padding, batched decode)
        pos = np.array([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14], [3, 3, 3, 3, 3]], np.int32)
        got = peak.rope_apply(x, pos)
        for b in range(B):
            self.assertTrue(same_bits(got[b], peak.rope_apply(x[b:b + 1], pos[b])[0]))

    def test_strided_views_out_and_in_place(self):
        big = rand(3, 20, 6, 72)
        x = big[::2, 3:15, 1:5, 4:68]  # [2, 12, 4, 64] with every stride its own
        want = peak.rope_apply(np.ascontiguousarray(x), pos0=30)
        self.assertTrue(same_bits(peak.rope_apply(x, pos0=30), want))
        out_big = np.full((2, 12, 5, 70), np.nan, np.float32)
        out = out_big[:, :, 1:, 3:67]
        self.assertIs(peak.rope_apply(x, pos0=30, out=out), out)
        self.assertTrue(same_bits(out, want))
        self.assertTrue(np.isnan(out_big[:, :, 0]).all() and np.isnan(out_big[..., :3]).all())
        before = big.copy()
        self.assertIs(peak.rope_apply(x, pos0=30, out=x), x)  # in place
        self.assertTrue(same_bits(x, want))
        mask = np.ones(big.shape, bool)
        mask[::2, 3:15, 1:5, 4:68] = False
        self.assertTrue(same_bits(big[mask], before[mask]))  # nothing else touched
        # bhld view of blhd memory (transformers' transpose(1, 2))
        q = rand(2, 7, 4, 32)
        got = peak.rope_apply(q.transpose(0, 2, 1, 3), layout="bhld", pos0=5)
        self.assertTrue(same_bits(got.transpose(0, 2, 1, 3), peak.rope_apply(q, pos0=5)))

    @unittest.skipUnless(POOLS, "libpeak built without pthreadpool")
    def test_same_bytes_at_any_thread_count(self):
        x = rand(2, 40, 8, 128)
        pos = RNG.integers(0, 1 << 20, (2, 40))
        p = dict(scaling="yarn", factor=4.0, original_max_position=4096, mode="hf")
        want_c = peak.rope_cache(300, 128, 17, **p)
        want_a = peak.rope_apply(x, pos, **p)
        with peak.ThreadPool(3) as pool:
            for w in (dict(threads=1), dict(threads=2), dict(threads=4), dict(pool=pool)):
                self.assertTrue(same_bits(peak.rope_cache(300, 128, 17, **p, **w), want_c), w)
                self.assertTrue(same_bits(peak.rope_apply(x, pos, **p, **w), want_a), w)

    def test_errors(self):
        x = rand(2, 5, 3, 16)
        cache = peak.rope_cache(50, 16)
        cases = [
            (dict(rotary_dim=15), peak.InvalidArgument),
            (dict(rotary_dim=18), peak.InvalidArgument),  # above head_dim
            (dict(base=0.5), peak.InvalidArgument),
            (dict(positions=np.array([0, 1, -1, 2, 3])), peak.OutOfRange),
            (dict(positions=np.array([0, 1, 50, 2, 3]), cache=cache), peak.OutOfRange),
            (dict(pos0=46, cache=cache), peak.OutOfRange),
            (dict(pos0=peak.MAX_POSITION - 2), peak.OutOfRange),
            (dict(positions=[0, 1, 2 ** 63, 2, 3]), peak.OutOfRange),
            (dict(layout="bshd"), ValueError),
            (dict(pairing="rotate_every_two"), ValueError),
            (dict(positions=[0, 1, 2, 3, 4], pos0=3), ValueError),
            (dict(positions=np.zeros((2, 4), np.int64)), ValueError),
            (dict(positions=np.zeros((3, 5), np.int64)), ValueError),
            (dict(cache=cache, base=500.0), ValueError),
            (dict(cache=cache, params=peak.RopeParams()), ValueError),
            (dict(cache=cache, rotary_dim=8), ValueError),
            (dict(cache=np.empty((50, 32), np.float32)[:, ::2]), ValueError),
            (dict(out=np.empty((2, 5, 3, 15), np.float32)), ValueError),
            (dict(positions=np.array([0.0, 1.0, 2.0, 3.0, 4.0])), TypeError),
            (dict(positions=np.array([True] * 5)), TypeError),
            (dict(cache=cache.astype(np.float64)), TypeError),
            (dict(out=np.empty((2, 5, 3, 16))), TypeError),
            (dict(rotary_dim=8.0), TypeError),
            (dict(scale=2.0), TypeError),
        ]
        for kw, exc in cases:
            out = np.full(x.shape, 3.0, np.float32)
            kw.setdefault("out", out)
            with self.assertRaises(exc, msg=str({k: v for k, v in kw.items() if k != "out"})):
                peak.rope_apply(x, **kw)
            self.assertTrue(same_bits(out, np.full(x.shape, 3.0, np.float32)))
        # the message names the argument and its limit
        with self.assertRaisesRegex(peak.InvalidArgument, r"rotary_dim 15 must be even, 2 \.\. "):
            peak.rope_apply(x, rotary_dim=15)
        with self.assertRaisesRegex(peak.InvalidArgument, "rotary_dim 18 exceeds head_dim 16"):
            peak.rope_apply(x, rotary_dim=18)
        with self.assertRaisesRegex(peak.InvalidArgument, "rotary_dim 32 exceeds head_dim 16"):
            peak.rope_apply(x, cache=peak.rope_cache(50, 32))
        with self.assertRaisesRegex(peak.InvalidArgument, "rotary_dim 514 must be even"):
            peak.rope_cache(4, 514)
        with self.assertRaises(TypeError):
            peak.rope_apply(x.astype(np.float64))
        with self.assertRaises(ValueError):
            peak.rope_apply(x[0])  # 3-D
        with self.assertRaises(ValueError):
            peak.rope_apply(rand(2, 5, 3, 32)[..., ::2])  # last axis not contiguous
        ro = x.copy()
        ro.flags.writeable = False
        with self.assertRaises(ValueError):
            peak.rope_apply(ro, out=ro)
        with self.assertRaises(ValueError):  # overlapping, not the same rows
            big = rand(2, 6, 3, 16)
            peak.rope_apply(big[:, :5], out=big[:, 1:])
        with self.assertRaises(ValueError):  # out inside the cache
            c = peak.rope_cache(200, 16)
            peak.rope_apply(x, cache=c, out=c[:30].reshape(2, 5, 3, 16))


class RopeApplyHF(unittest.TestCase):
    """transformers' rotations (rope-hf-apply.txt): x, the cos/sin it
    multiplied by, and its output."""

    def test_bit_for_bit_from_hf_cos_sin(self):
        cases = hf_apply_cases()
        self.assertEqual({c["pairing"] for c in cases}, {"half_split", "interleaved"})
        for c in cases:
            x, y, rd, pos = c["x"], c["y"], c["rotary_dim"], c["positions"]
            rows = np.concatenate((c["cos"], c["sin"]), axis=1)  # [L, rd]: token l's row l
            kw = dict(rotary_dim=rd, pairing=c["pairing"])
            self.assertTrue(same_bits(peak.rope_apply(x, cache=rows, layout="bhld", **kw), y),
                            c["name"])
            # the same rows at the tokens' real positions, through positions
            table = np.zeros((int(pos.max()) + 1, rd), np.float32)
            table[pos] = rows
            for p in (pos, pos.astype(np.int32)):
                self.assertTrue(same_bits(peak.rope_apply(x, p, cache=table, layout="bhld", **kw),
                                          y))
            # [B, L, H, D] memory, in place
            xb = np.ascontiguousarray(x.transpose(0, 2, 1, 3))
            peak.rope_apply(xb, pos, cache=table, out=xb, **kw)
            self.assertTrue(same_bits(xb.transpose(0, 2, 1, 3), y), c["name"])

    def test_hf_mode_cos_sin(self):
        """Every case's cos/sin (Llama, GPT-NeoX and GPT-J modules, base 1e4)
        within 2 ULP of peak's "hf" cache rows at those positions."""
        for c in hf_apply_cases():
            got = np.stack([peak.rope_cache(1, c["rotary_dim"], int(p), mode="hf")[0]
                            for p in c["positions"]])
            n = c["rotary_dim"] // 2
            self.assertLessEqual(ulps(got[:, :n], c["cos"]), HF_ULP, c["name"])
            self.assertLessEqual(ulps(got[:, n:], c["sin"]), HF_ULP, c["name"])


class Layouts(unittest.TestCase):
    @unittest.skipUnless(HAVE_CC, NEED_CC)
    def test_struct_layouts_match_the_header(self):
        """The ctypes mirrors of peak_rope_params / peak_rope_desc have C's
        sizes and offsets, and ROPE_MAX_DIM is PEAK_ROPE_MAX_DIM."""
        structs = {"peak_rope_params": peak._RopeParams, "peak_rope_desc": peak._RopeDesc}
        self.assertEqual(check_layouts(self, structs),
                         len(peak._RopeParams._fields_) + len(peak._RopeDesc._fields_) + 2)
        self.assertEqual(int(c_printed(['printf("%zu\\n", (size_t)PEAK_ROPE_MAX_DIM);'])),
                         peak.ROPE_MAX_DIM)


# ---- peak.torch -------------------------------------------------------------------

def hf_rotate_half(x):
    """transformers' rotate_half (modeling_llama.py), for runs without it."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply(q, k, cos, sin, unsqueeze_dim=1):
    """transformers' apply_rotary_pos_emb (modeling_llama.py, 5.24)."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (hf_rotate_half(q) * sin), (k * cos) + (hf_rotate_half(k) * sin)


def torch_same(test, got, want, msg=""):
    test.assertEqual(tuple(got.shape), tuple(want.shape), msg)
    test.assertEqual(got.dtype, want.dtype, msg)
    test.assertTrue(torch.equal(got.contiguous().view(torch.int32),
                                want.contiguous().view(torch.int32)), msg)


def torch_ulps(a, b):
    return ulps(a.detach().float().numpy(), b.detach().float().numpy())


def bf16_ulps(a, b):
    def ordered(x):
        i = x.contiguous().view(torch.int16).to(torch.int64)
        return torch.where(i < 0, -(i & 0x7FFF), i)
    return int((ordered(a) - ordered(b)).abs().max())


def hf_cos_sin(rd, positions, **p):
    """cos, sin [B, L, rd] as transformers' modules return them, from peak's
    "hf" rows (halves equal)."""
    rows = np.stack([peak.rope_cache(1, rd, int(v), mode="hf", **p)[0]
                     for v in np.ravel(positions)])
    rows = torch.from_numpy(rows).reshape(tuple(np.shape(positions)) + (rd,))
    n = rd // 2
    c, s = rows[..., :n], rows[..., n:]
    return torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)


@unittest.skipIf(torch is None, "needs torch")
class TorchApply(unittest.TestCase):
    def test_bit_for_bit_against_hf_formula(self):
        torch.manual_seed(1)
        B, L, H, Hkv, D = 2, 11, 8, 2, 64
        pos = RNG.integers(0, 1 << 20, (B, L))
        for cos_batch in (B, 1):
            cos, sin = hf_cos_sin(D, pos[:cos_batch], base=500000.0)
            # [B, L, H, D] projections viewed as [B, H, L, D], as LlamaAttention
            q = torch.randn(B, L, H, D).transpose(1, 2)
            k = torch.randn(B, L, Hkv, D).transpose(1, 2)
            with torch.no_grad():
                got = pt.apply_rotary_pos_emb(q, k, cos, sin)
            want = hf_apply(q, k, cos, sin)
            for g, w in zip(got, want):
                torch_same(self, g, w, f"cos batch {cos_batch}")
            self.assertEqual(got[0].stride(), want[0].stride())
            # unsqueeze_dim 2: [B, L, H, D]
            q2, k2 = q.transpose(1, 2), k.transpose(1, 2)
            got2 = pt.apply_rotary_pos_emb(q2, k2, cos, sin, unsqueeze_dim=2)
            for g, w in zip(got2, hf_apply(q2, k2, cos, sin, unsqueeze_dim=2)):
                torch_same(self, g, w)
            got3 = pt.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=-3, threads=2)
            torch_same(self, got3[0], want[0])

    def test_old_signature_tables(self):
        """transformers < 4.38: cos, sin [max_len, D] indexed by position_ids."""
        D = 32
        table_c, table_s = hf_cos_sin(D, np.arange(300))
        pid = torch.tensor([[5, 6, 7, 299], [0, 0, 1, 2]])
        q, k = torch.randn(2, 3, 4, D), torch.randn(2, 3, 4, D)
        got = pt.apply_rotary_pos_emb(q, k, table_c, table_s, pid)
        want = hf_apply(q, k, table_c[pid], table_s[pid])
        for g, w in zip(got, want):
            torch_same(self, g, w)
        # position_ids beside [B, L, D] cos: ignored, as transformers >= 4.38
        c, s = table_c[pid], table_s[pid]
        for g, w in zip(pt.apply_rotary_pos_emb(q, k, c, s, pid), want):
            torch_same(self, g, w)

    def test_fallbacks(self):
        """What peak cannot take runs transformers' own expression."""
        B, H, L, D = 1, 2, 5, 16
        cos, sin = hf_cos_sin(D, np.arange(L)[None])
        q, k = torch.randn(B, H, L, D), torch.randn(B, H, L, D)
        cases = {
            "float64": (q.double(), k.double(), cos.double(), sin.double()),
            "bfloat16": (q.bfloat16(), k.bfloat16(), cos.bfloat16(), sin.bfloat16()),
            "last axis strided": (torch.randn(B, H, L, 2 * D)[..., ::2], k, cos, sin),
            "halves differ": (q, k, cos + torch.arange(D) * 1e-3, sin),
            "odd head_dim": (q[..., :15], k[..., :15], cos[..., :15], sin[..., :15]),
        }
        for name, args in cases.items():
            with torch.no_grad():
                got = pt.apply_rotary_pos_emb(*args)
            for g, w in zip(got, hf_apply(*args)):
                self.assertTrue(torch.equal(g, w), name)
        # autograd: PyTorch's code, differentiable
        qg = q.clone().requires_grad_()
        qe, _ = pt.apply_rotary_pos_emb(qg, k, cos, sin)
        qe.sum().backward()
        self.assertEqual(tuple(qg.grad.shape), (B, H, L, D))


def rope_dict(rope_type, theta, **kw):
    return dict(rope_type=rope_type, rope_theta=theta, **kw)


@unittest.skipIf(torch is None, "needs torch")
class TorchRotaryEmbedding(unittest.TestCase):
    """RotaryEmbedding built from rope_parameters dicts, against
    transformers' rows (rope-hf-cache.txt), in any torch."""

    def module_for(self, name, rd, p):
        """(module, position lists whose rows the module must give)."""
        s = p.scaling
        kw = dict(head_dim=rd, max_position_embeddings=4096)
        every = [[0, 1, 4095, 65535, 131071, 1000000, 16777215]]  # one call each
        if s == "none":
            if name.startswith("partial"):
                return pt.RotaryEmbedding(rope_dict("default", p.base, partial_rotary_factor=0.4),
                                          head_dim=80), every
            return pt.RotaryEmbedding(rope_dict("default", p.base), **kw), every
        if s == "linear":
            return pt.RotaryEmbedding(rope_dict("linear", p.base, factor=p.factor), **kw), every
        if s == "dynamic":
            m = pt.RotaryEmbedding(rope_dict("dynamic", p.base, factor=p.factor),
                                   head_dim=rd, max_position_embeddings=p.original_max_position)
            if p.seq_len > p.original_max_position:
                m(torch.zeros(1), torch.tensor([[p.seq_len - 1]]))  # grows to seq_len
                return m, [[0, 1, 4095, p.seq_len - 1]]
            return m, [[0, 1, 4095]]
        if s == "yarn":
            d = rope_dict("yarn", p.base, factor=p.factor,
                          original_max_position_embeddings=p.original_max_position,
                          truncate=p.truncate)
            if p.mscale:
                d.update(mscale=p.mscale, mscale_all_dim=p.mscale_all_dim)
            return pt.RotaryEmbedding(d, head_dim=rd, max_position_embeddings=131072), every
        if s == "llama3":
            d = rope_dict("llama3", p.base, factor=p.factor,
                          original_max_position_embeddings=p.original_max_position,
                          low_freq_factor=p.low_freq_factor, high_freq_factor=p.high_freq_factor)
            return pt.RotaryEmbedding(d, **kw), every
        if s == "longrope":
            mine, other = list(p.longrope_factors), [2.0] * (rd // 2)
            long = name.endswith("long")
            d = rope_dict("longrope", p.base,
                          original_max_position_embeddings=p.original_max_position,
                          short_factor=other if long else mine, long_factor=mine if long else other)
            # no 'factor': max_position_embeddings / original, as transformers
            m = pt.RotaryEmbedding(d, head_dim=rd, max_position_embeddings=131072)
            return m, (every if long else [[0, 1, 4095]])
        return None, None

    def test_rows_of_hf_data(self):
        done = 0
        x = torch.zeros(2, dtype=torch.float32)
        for name, rd, p, rows, _ in hf_cases():
            m, pos_lists = self.module_for(name, rd, p)
            if m is None:  # static NTK: no transformers rope_type
                continue
            want = dict(rows)
            for pl in pos_lists:
                cos, sin = m(x, torch.tensor([pl]))
                self.assertEqual(tuple(cos.shape), (1, len(pl), rd))
                n = rd // 2
                self.assertTrue(torch.equal(cos[..., :n], cos[..., n:]))
                for j, pos in enumerate(pl):
                    if pos not in want:
                        continue
                    got = torch.cat((cos[0, j, :n], sin[0, j, :n])).numpy()
                    self.assertLessEqual(ulps(got, want[pos]), HF_ULP, (name, pos))
                    done += 1
        self.assertGreater(done, 80)

    def test_exact_mode_and_dtypes(self):
        d = rope_dict("yarn", 1e6, factor=4.0, original_max_position_embeddings=32768)
        m = pt.RotaryEmbedding(d, head_dim=128, max_position_embeddings=131072, mode="exact")
        pid = torch.tensor([[0, 17, 4095, 100000, 16777215], [3, 2, 1, 0, 9]])
        cos, sin = m(torch.zeros(1), pid)
        p = peak.RopeParams(base=1e6, scaling="yarn", factor=4.0, original_max_position=32768)
        ref = cache_ref(pid.numpy().ravel(), 128, p).reshape(2, 5, 128)
        self.assertLessEqual(np.abs(cos[..., :64].numpy() - ref[..., :64]).max(), EXACT_BOUND)
        self.assertLessEqual(np.abs(sin[..., 64:].numpy() - ref[..., 64:]).max(), EXACT_BOUND)
        c16, s16 = m(torch.zeros(1, dtype=torch.bfloat16), pid)
        self.assertEqual(c16.dtype, torch.bfloat16)
        self.assertTrue(torch.equal(c16, cos.bfloat16()) and torch.equal(s16, sin.bfloat16()))
        with self.assertRaises(TypeError):
            m(torch.zeros(1), pid.float())
        with self.assertRaises(peak.OutOfRange):
            m(torch.zeros(1), torch.tensor([[-1, 3]]))

    def test_dynamic_state_is_transformers(self):
        """max_seq_len_cached: grows past its value, stays for shorter calls
        down to max_position_embeddings, resets below it; each call's
        rows are those of peak's parameters for that state."""
        m = pt.RotaryEmbedding(rope_dict("dynamic", 10000.0, factor=2.0), head_dim=64,
                               max_position_embeddings=1024)
        x = torch.zeros(1)
        init = m(x, torch.tensor([[0, 5, 1000]]))
        for last, cached in ((99, 1024), (5000, 5001), (3000, 5001), (1023, 5001), (2000, 5001),
                             (1022, 1024), (100000, 100001), (1, 1024)):
            cos, _ = m(x, torch.tensor([[0, 5, 1000, last]]))
            self.assertEqual(m.max_seq_len_cached, cached, last)
            if cached == 1024:
                self.assertTrue(torch.equal(cos[:, :3], init[0]))
            else:
                base = peak.rope_cache(1, 64, 1000, params=m.params(cached))[0, :32]
                self.assertTrue(same_bits(cos[0, 2, :32].numpy(), base))
                self.assertFalse(torch.equal(cos[:, :3], init[0]))
        # exact mode: peak's own scheme at the kept length
        e = pt.RotaryEmbedding(rope_dict("dynamic", 10000.0, factor=2.0), head_dim=64,
                               max_position_embeddings=1024, mode="exact")
        e(x, torch.tensor([[7000]]))
        self.assertEqual(e.params(10).seq_len, 7001)
        self.assertEqual(e.params(10).scaling, "dynamic")

    def test_longrope_choice(self):
        d = rope_dict("longrope", 10000.0, original_max_position_embeddings=4096,
                      short_factor=LONG_SHORT, long_factor=LONG_LONG)
        m = pt.RotaryEmbedding(d, head_dim=96, max_position_embeddings=131072)
        self.assertEqual(m.params(4096).longrope_factors, tuple(LONG_SHORT))
        self.assertEqual(m.params(4097).longrope_factors, tuple(LONG_LONG))
        short, _ = m(torch.zeros(1), torch.tensor([[10, 4095]]))
        long, _ = m(torch.zeros(1), torch.tensor([[10, 4096]]))
        self.assertFalse(torch.equal(short[0, 0], long[0, 0]))
        again, _ = m(torch.zeros(1), torch.tensor([[10, 4095]]))  # nothing kept
        self.assertTrue(torch.equal(again, short))

    def test_config_errors(self):
        with self.assertRaises(ValueError):
            pt.RotaryEmbedding(rope_dict("proportional", 1e4), head_dim=64)
        with self.assertRaises(ValueError):
            pt.RotaryEmbedding(rope_dict("default", 1e4))  # no head_dim
        with self.assertRaises(ValueError):
            pt.RotaryEmbedding(rope_dict("default", 1e4), head_dim=64, mode="f16")
        nested = {"full_attention": rope_dict("default", 1e6),
                  "sliding_attention": rope_dict("default", 1e4)}
        with self.assertRaises(ValueError):
            pt.RotaryEmbedding(nested, head_dim=64)
        m = pt.RotaryEmbedding(nested, head_dim=64, layer_type="sliding_attention")
        self.assertEqual(m.params(10).base, 1e4)
        # a scheme's required field missing: named, not a KeyError
        with self.assertRaisesRegex(ValueError, "low_freq_factor, high_freq_factor"):
            pt.RotaryEmbedding(rope_dict("llama3", 5e5, factor=8.0,
                                         original_max_position_embeddings=8192), head_dim=64)
        with self.assertRaisesRegex(ValueError, "needs long_factor"):
            pt.RotaryEmbedding(rope_dict("longrope", 1e4, original_max_position_embeddings=4096,
                                         short_factor=LONG_SHORT), head_dim=96,
                               max_position_embeddings=131072)


# ---- against transformers itself -------------------------------------------------------

def llama_config(head_dim, rope_parameters, max_position_embeddings=4096):
    return LlamaConfig(vocab_size=32, hidden_size=2 * head_dim, intermediate_size=64,
                       num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                       head_dim=head_dim, max_position_embeddings=max_position_embeddings,
                       rope_parameters=dict(rope_parameters))


HF_CONFIGS = {
    "default": (128, rope_dict("default", 10000.0), 4096),
    "default_d64_b5e5": (64, rope_dict("default", 500000.0), 4096),
    "linear": (128, rope_dict("linear", 10000.0, factor=4.0), 4096),
    "dynamic": (128, rope_dict("dynamic", 10000.0, factor=2.0), 4096),
    "yarn_qwen": (128, rope_dict("yarn", 1e6, factor=4.0,
                                 original_max_position_embeddings=32768), 131072),
    "yarn_deepseek": (64, rope_dict("yarn", 10000.0, factor=40,
                                    original_max_position_embeddings=4096, mscale=0.707,
                                    mscale_all_dim=1.0), 163840),
    "yarn_gptoss": (64, rope_dict("yarn", 150000.0, factor=32.0,
                                  original_max_position_embeddings=4096, truncate=False), 131072),
    "llama3": (128, rope_dict("llama3", 500000.0, factor=8.0, low_freq_factor=1.0,
                              high_freq_factor=4.0, original_max_position_embeddings=8192), 131072),
    "longrope": (96, rope_dict("longrope", 10000.0, original_max_position_embeddings=4096,
                               short_factor=LONG_SHORT, long_factor=LONG_LONG), 131072),
}

# position_ids of successive calls (one module per config, so that dynamic
# NTK grows, keeps and resets its length as transformers' does)
HF_CALLS = [
    [list(range(64))],
    [[0, 1, 2, 4095], [4094, 4093, 7, 3]],
    [[5000, 9999, 0, 1]],                       # dynamic: grows to 10000
    [[4096, 4097, 7000, 12]],                   # kept at 10000
    [[131071, 65535, 0, 100]],                  # 131072: float32 base off the double one
    [[123456, 3, 2, 1]],                        # shorter: kept at 131072
    [[50, 60, 70, 80]],                         # below 4096: reset
    [[999999, 1000000, 0, 5], [17, 500000, 250000, 1]],
    [[1000000, 2, 3, 4]],
    [list(range(4000, 4096))],
]


@unittest.skipIf(torch is None or transformers is None,
                 "needs torch and transformers (scripts/peers-venv.sh's venv has them)")
class AgainstTransformers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import logging
        cls._log = logging.getLogger("transformers")
        cls._level = cls._log.level
        cls._log.setLevel(logging.ERROR)  # its LongRoPE 'factor' advice

    @classmethod
    def tearDownClass(cls):
        cls._log.setLevel(cls._level)

    def test_rotary_embedding_within_2_ulp(self):
        x = torch.zeros(1)
        for name, (hd, rp, max_pos) in HF_CONFIGS.items():
            cfg = llama_config(hd, rp, max_pos)
            hf = modeling_llama.LlamaRotaryEmbedding(cfg)
            ours = pt.RotaryEmbedding(cfg)
            self.assertEqual(ours.rotary_dim, hd)
            worst = 0
            for pid in HF_CALLS:
                pid = torch.tensor(pid)
                with torch.no_grad():
                    hc, hs = hf(x, pid)
                oc, os_ = ours(x, pid)
                self.assertEqual(tuple(oc.shape), tuple(hc.shape), name)
                self.assertEqual(oc.dtype, hc.dtype)
                worst = max(worst, torch_ulps(oc, hc), torch_ulps(os_, hs))
                self.assertLessEqual(worst, HF_ULP, (name, pid.tolist()))
                self.assertEqual(int(ours.max_seq_len_cached), int(hf.max_seq_len_cached), name)
            # bfloat16 activations: cos/sin rounded from the same float32 values
            pid = torch.tensor(HF_CALLS[1])
            hc, _ = hf(x.bfloat16(), pid)
            oc, _ = ours(x.bfloat16(), pid)
            self.assertEqual(oc.dtype, torch.bfloat16)
            self.assertLessEqual(bf16_ulps(oc, hc), 1, name)  # 2 float32 ULP: 1 at most

    def test_apply_bit_for_bit(self):
        torch.manual_seed(2)
        x = torch.zeros(1)
        for name, (hd, rp, max_pos) in HF_CONFIGS.items():
            cfg = llama_config(hd, rp, max_pos)
            hf = modeling_llama.LlamaRotaryEmbedding(cfg)
            for pid in ([list(range(9))], [[0, 4095, 65535, 1000000], [1, 2, 3, 131071]]):
                pid = torch.tensor(pid)
                B, L = pid.shape
                with torch.no_grad():
                    cos, sin = hf(x, pid)
                q = torch.randn(B, L, 4, hd).transpose(1, 2)
                k = torch.randn(B, L, 2, hd).transpose(1, 2)
                want = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
                got = pt.apply_rotary_pos_emb(q, k, cos, sin)
                for g, w in zip(got, want):
                    torch_same(self, g, w, name)
                # and with peak's own cos/sin (within 2 ULP of transformers')
                oc, os_ = pt.RotaryEmbedding(cfg)(x, pid)
                got = pt.apply_rotary_pos_emb(q, k, oc, os_)
                for g, w in zip(got, modeling_llama.apply_rotary_pos_emb(q, k, oc, os_)):
                    torch_same(self, g, w, name)


if __name__ == "__main__":
    unittest.main()
