"""The logit options (soft-capping, ALiBi, attention sinks) of peak.softmax
and peak.attention against NumPy references, and peak.alibi_slopes against
its formula.  Every value test runs on every tier this CPU has (TIERS).

References: softmax takes peak.h's float32 scores (each step rounded once,
as the library forms them; tanh correctly rounded) and does the rest in
float64; attention is float64 throughout (scores, tanh, the ALiBi bias
tensor, a sink column).

Run: python3 python/tests/run.py logits (meson test: python-logits).
"""
import math
import unittest

import numpy as np

import peak
from test_numpy import POOLS, visible  # masks' visible keys as peak.h defines them

RNG = np.random.default_rng(20261215)
F32, F64 = np.float32, np.float64
EPS = 2.0 ** -23  # float32's ULP at 1
FLT_MIN = float(np.finfo(F32).tiny)
# Every tier this CPU has, up to the automatic choice: PEAK_ISA=scalar
# (which caps that choice) tests the scalar tier alone.
_NAMES = peak.isa_names()
TIERS = [isa for isa in _NAMES if peak.isa_supported(isa)
         and _NAMES.index(isa) <= _NAMES.index(peak.isa_active())]
# The library's float tanh (every tier's capped scores use it): within
# 0.959 ULP over all floats, kernels/tanh.h says.
TANH_ULP = 1




def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(F32)


def qpos_of(Lq, Lk, q_offset=0, align="top_left"):
    return np.arange(Lq, dtype=np.int64) + q_offset + (Lk - Lq if align == "bottom_right" else 0)


def distance(Lq, Lk, form, q_offset=0, align="top_left"):
    """[Lq, Lk] ALiBi distances (int64): qpos - j, or |qpos - j|."""
    d = qpos_of(Lq, Lk, q_offset, align)[:, None] - np.arange(Lk)[None, :]
    return np.abs(d) if form == "symmetric" else d


def slope_ref(h, n):
    """peak.h's rule in Python floats: the paper's for a power of two,
    BLOOM's interleaving otherwise."""
    p = 1 << (n.bit_length() - 1)
    if h < p:
        return 2.0 ** (-8.0 * (h + 1) / p)
    return 2.0 ** (-4.0 * (2 * (h - p) + 1) / p)


def bloom_slopes(n):
    """BLOOM's build_alibi_tensor slopes, in float64: base^k for k = 1 ..
    p, then (base of 2p heads)^k for odd k."""
    p = 2 ** math.floor(math.log2(n))
    base = 2.0 ** (-(2.0 ** -(math.log2(p) - 3)))
    s = [base ** k for k in range(1, p + 1)]
    if p != n:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * p) - 3)))
        s += [extra ** k for k in range(1, 1 + 2 * min(p, n - p), 2)]
    return np.array(s)


def head_vector(a, H):
    """A per-head option as float64 [H] (None stays None)."""
    if a is None:
        return None
    return np.broadcast_to(np.asarray(a, F32).astype(F64).reshape(-1), (H,))


def softmax_scores(x, scale=1.0, softcap=None, alibi=None, alibi_slopes=None, bias=None,
                   q_offset=0, align="top_left"):
    """peak.h's float32 scores of peak_softmax (steps 1-4), and delta [B, H,
    Lq, Lk]: how far the library's own may be from them.  Only the cap
    differs: the library's tanh is within TANH_ULP ULP where this one is
    correctly rounded; the difference grows by an ULP of each later
    rounded result."""
    B, H, Lq, Lk = x.shape
    s = x * F32(scale)
    delta = np.zeros(x.shape)
    if softcap:
        c = F32(softcap)
        th = np.tanh((s / c).astype(F64)).astype(F32)
        s = c * th
        delta = (TANH_ULP + 1.5) * EPS * np.abs(s.astype(F64))
    if alibi:
        slopes = peak.alibi_slopes(H) if alibi_slopes is None else np.asarray(alibi_slopes, F32)
        dist = distance(Lq, Lk, alibi, q_offset, align).astype(F32)
        s = s - slopes[None, :, None, None] * dist[None, None]
        if softcap:
            delta = delta + EPS * np.abs(s.astype(F64))
    if bias is not None:
        s = s + bias
        if softcap:
            delta = delta + EPS * np.abs(s.astype(F64))
    return s, delta


def softmax_exact(s, vis, sinks=None):
    """The exact softmax (float64) of the scores s over the visible keys,
    with sinks[h] as one more term of a row's sum (no output of its own);
    a row with no visible key, or only -inf ones, is zeros."""
    H = s.shape[1]
    s = np.where(vis, s.astype(F64), -np.inf)
    m = s.max(axis=-1, keepdims=True)
    has = np.isfinite(m)
    m = np.where(has, m, 0.0)
    sk = None
    if sinks is not None:
        sk = head_vector(sinks, H)[None, :, None, None]
        m = np.maximum(m, sk)
    e = np.where(vis, np.exp(s - m), 0.0)
    tot = e.sum(axis=-1, keepdims=True) + (0.0 if sk is None else np.exp(sk - m))
    return np.where(has, e / tot, 0.0)


def check_softmax(test, got, want, delta=None, msg=""):
    """peak.h: within 4 ULP of the exact softmax of the float scores, for
    probabilities of at least FLT_MIN (FLT_MIN apart below).  With a cap
    the library's scores may differ from the reference's by delta_j each,
    which moves a probability by a factor within e^(+-2 max_j delta_j) of
    its row: that is added, relative."""
    tol = 4 * np.spacing(want.astype(F32)).astype(F64)
    if delta is not None:
        # a -inf score (a -inf bias) has probability 0 either way
        delta = np.where(np.isfinite(delta), delta, 0.0)
        tol = tol + 2.0 * delta.max(axis=-1, keepdims=True) * want
    tol = np.where(want < FLT_MIN, FLT_MIN, tol)
    err = np.abs(got.astype(F64) - want)
    worst = np.unravel_index(np.argmax(err - tol), err.shape)
    test.assertTrue(np.all(err <= tol), f"{msg}: |err| {err[worst]:.3g} > {tol[worst]:.3g} at "
                    f"{worst} (got {got[worst]!r}, want {want[worst]!r})")


def attention_exact(q, k, v, scale=None, softcap=None, alibi=None, alibi_slopes=None,
                    sinks=None, bias=None, **mask):
    """float64 attention with the logit options as peak.h orders them:
    scores q k^T * scale, cap * tanh(s / cap), the ALiBi bias tensor
    -slope[h] * distance, the additive bias, the masks, and a sink column
    joining the softmax and dropped after it.  Returns (O, lse); a row with
    no visible key is O = 0, lse = sink (or -inf)."""
    q, k, v = (a.astype(F64) for a in (q, k, v))
    B, H, Lq, D = q.shape
    g = H // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    Lk = k.shape[2]
    scale = 1 / math.sqrt(D) if scale is None else float(F32(scale))
    s = q @ k.transpose(0, 1, 3, 2) * scale
    if softcap:
        c = float(F32(softcap))
        s = c * np.tanh(s / c)
    if alibi:
        slopes = head_vector(peak.alibi_slopes(H) if alibi_slopes is None else alibi_slopes, H)
        pos = {n: mask[n] for n in ("q_offset", "align") if n in mask}
        s = s - slopes[None, :, None, None] * distance(Lq, Lk, alibi, **pos)[None, None]
    if bias is not None:
        s = s + bias
    vis = visible(B, H, Lq, Lk, **mask)
    s = np.where(vis, s, -np.inf)
    if sinks is not None:
        col = np.broadcast_to(head_vector(sinks, H)[None, :, None, None], (B, H, Lq, 1))
        s = np.concatenate([s, col], axis=-1)
    m = s.max(axis=-1, keepdims=True)
    mm = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - mm)
    tot = e.sum(axis=-1, keepdims=True)
    lse = np.where(tot > 0, mm + np.log(np.where(tot > 0, tot, 1)), -np.inf)[..., 0]
    p = np.where(tot > 0, e / np.where(tot > 0, tot, 1), 0.0)
    if sinks is not None:
        p = p[..., :-1]
    return p @ v, lse


def attention_tol(v):
    """peak.h: O within ~1e-5 * max|V| of the exact attention (scores of a
    modest spread: q, k in [-1, 1], |ALiBi| below ~40 here)."""
    return 1e-5 * float(np.abs(v).max())


def lse_tol(want):
    """peak.h: lse within 4e-6 * (1 + |lse|)."""
    return 4e-6 * (1 + np.abs(np.where(np.isfinite(want), want, 0)))


def same_bytes(test, got, want, msg=""):
    test.assertEqual(got.shape, want.shape, msg)
    test.assertTrue(np.array_equal(np.ascontiguousarray(got).view(np.uint32),
                                   np.ascontiguousarray(want).view(np.uint32)), msg)


class AlibiSlopes(unittest.TestCase):
    def test_formula_heads_1_to_64(self):
        for n in range(1, 65):
            got = peak.alibi_slopes(n)
            self.assertEqual(got.dtype, F32)
            self.assertEqual(got.shape, (n,))
            want = np.array([slope_ref(h, n) for h in range(n)])
            # the exact value rounded once: the float nearest the double one
            np.testing.assert_array_equal(got, want.astype(F32), err_msg=f"heads {n}")
            # BLOOM's construction (powers of a base), in float64: the same
            # numbers up to the double rounding of its powers
            np.testing.assert_allclose(got, bloom_slopes(n), rtol=EPS, err_msg=f"heads {n}")
        np.testing.assert_array_equal(peak.alibi_slopes(8), 2.0 ** -np.arange(1, 9))

    def test_large_and_errors(self):
        n = peak.ALIBI_MAX_HEADS
        got = peak.alibi_slopes(n)
        self.assertEqual(got.shape, (n,))
        for h in (0, n // 2 - 1, n - 1):
            self.assertEqual(got[h], F32(slope_ref(h, n)))
        self.assertEqual(peak.alibi_slopes(np.int64(3)).shape, (3,))
        with self.assertRaises(peak.InvalidArgument):
            peak.alibi_slopes(0)
        for n in (peak.ALIBI_MAX_HEADS + 1, 2 ** 63, 2 ** 64 + 8):
            with self.assertRaises(peak.OutOfRange, msg=str(n)):
                peak.alibi_slopes(n)
        with self.assertRaises(ValueError):
            peak.alibi_slopes(-1)
        for n in (2.0, "8", None, True):
            with self.assertRaises(TypeError, msg=repr(n)):
                peak.alibi_slopes(n)


class SoftmaxOptions(unittest.TestCase):
    B, H, Lq, Lk = 2, 4, 7, 29

    def cases(self):
        H = self.H
        slopes = RNG.uniform(0, 0.6, H).astype(F32)
        sinks = rand(H, lo=-3, hi=3)
        bias = np.where(RNG.random((1, H, self.Lq, self.Lk)) < 0.15, -np.inf,
                        rand(1, H, self.Lq, self.Lk)).astype(F32)
        return [
            dict(softcap=2.5),
            dict(softcap=50.0, scale=3.0),
            dict(softcap=0.5, causal=True),
            dict(alibi="causal"),
            dict(alibi="causal", causal=True, q_offset=5),
            dict(alibi="symmetric", alibi_slopes=slopes),
            dict(alibi="causal", causal=True, align="bottom_right", window=6),
            dict(sinks=sinks),
            dict(sinks=1.5, causal=True),
            dict(sinks=sinks, key_len=[29, 3]),
            dict(sinks=-30.0),
            dict(sinks=30.0),  # the sink is the row's maximum
            dict(softcap=3.0, alibi="causal", sinks=sinks, causal=True, bias=bias),
            dict(softcap=8.0, alibi="symmetric", alibi_slopes=slopes, sinks=0.25, bias=bias,
                 scale=0.7, q_offset=3),
        ]

    def reference(self, x, kw):
        score_kw = {n: kw[n] for n in ("scale", "softcap", "alibi", "alibi_slopes", "bias",
                                       "q_offset", "align") if n in kw}
        s, delta = softmax_scores(x, **score_kw)
        vkw = {n: kw[n] for n in ("causal", "align", "q_offset", "window", "key_len") if n in kw}
        vis = visible(*x.shape, **vkw)
        return softmax_exact(s, vis, kw.get("sinks")), (delta if kw.get("softcap") else None)

    def test_against_float64(self):
        x = rand(self.B, self.H, self.Lq, self.Lk, lo=-6, hi=6)
        for isa in TIERS:
            with peak.use_isa(isa):
                for kw in self.cases():
                    with self.subTest(isa=isa, options=sorted(kw)):
                        want, delta = self.reference(x, kw)
                        check_softmax(self, peak.softmax(x, **kw), want, delta,
                                      f"{isa} {sorted(kw)}")

    def test_simd_tiers_agree(self):
        """peak.h: the SIMD tiers give the same bits as each other."""
        simd = [isa for isa in TIERS if isa != "scalar"]
        if len(simd) < 2:
            self.skipTest(f"one SIMD tier here ({', '.join(simd) or 'none'})")
        x = rand(2, self.H, 9, 300, lo=-20, hi=20)
        for kw in [c for c in self.cases() if "bias" not in c]:  # bias: the small shape
            with peak.use_isa(simd[0]):
                want = peak.softmax(x, **kw)
            for isa in simd[1:]:
                with self.subTest(isa=isa, options=sorted(kw)):
                    with peak.use_isa(isa):
                        same_bytes(self, peak.softmax(x, **kw), want, f"{isa} {sorted(kw)}")

    def test_long_rows(self):
        """Rows of several vector blocks and a tail, cap and ALiBi inside
        the blocked passes."""
        x = rand(1, 3, 4, 1037, lo=-30, hi=30)
        kw = dict(softcap=20.0, alibi="causal", sinks=[0.5, 2.0, -1.0], causal=True,
                  align="bottom_right", scale=0.5)
        want, delta = self.reference(x, kw)
        for isa in TIERS:
            with self.subTest(isa=isa), peak.use_isa(isa):
                check_softmax(self, peak.softmax(x, **kw), want, delta, isa)

    def test_off_is_off(self):
        x = rand(2, 3, 4, 11)
        want = peak.softmax(x, causal=True)
        for kw in (dict(softcap=None), dict(softcap=0), dict(softcap=0.0), dict(softcap=-0.0),
                   dict(alibi=None), dict(sinks=None)):
            same_bytes(self, peak.softmax(x, causal=True, **kw), want, str(kw))

    def test_default_slopes_and_broadcast_sink(self):
        x = rand(2, 6, 5, 13)
        for isa in TIERS:
            with peak.use_isa(isa):
                same_bytes(self, peak.softmax(x, alibi="causal"),
                           peak.softmax(x, alibi="causal", alibi_slopes=peak.alibi_slopes(6)), isa)
                same_bytes(self, peak.softmax(x, sinks=0.75), peak.softmax(x, sinks=[0.75] * 6),
                           isa)
        # array-likes of any real dtype are converted (float64 rounds once)
        s64 = RNG.uniform(0, 1, 6)
        same_bytes(self, peak.softmax(x, alibi="symmetric", alibi_slopes=s64),
                   peak.softmax(x, alibi="symmetric", alibi_slopes=s64.astype(F32)))
        same_bytes(self, peak.softmax(x, sinks=list(s64)), peak.softmax(x, sinks=s64.astype(F32)))
        same_bytes(self, peak.softmax(x, sinks=np.arange(6)),
                   peak.softmax(x, sinks=np.arange(6, dtype=F32)))
        # a strided float32 view: copied contiguous
        wide = RNG.uniform(0, 1, 12).astype(F32)
        same_bytes(self, peak.softmax(x, sinks=wide[::2]),
                   peak.softmax(x, sinks=wide[::2].copy()))

    def test_edge_rows(self):
        x = rand(1, 2, 3, 5)
        # no visible key: zeros, with or without a sink
        got = peak.softmax(x, keep=np.zeros(5, bool), sinks=[1.0, -1.0], softcap=2.0)
        np.testing.assert_array_equal(got, 0)
        # visible scores all -inf: zeros too (a -inf bias comes after the cap)
        got = peak.softmax(x, bias=np.full(5, -np.inf, F32), sinks=0.5, softcap=2.0)
        np.testing.assert_array_equal(got, 0)
        # the cap maps +-inf to +-cap: no NaN, and -inf is a visible score -cap
        y = x.copy()
        y[0, 0, 0, 1] = np.inf
        y[0, 0, 0, 3] = -np.inf
        for isa in TIERS:
            with self.subTest(isa=isa), peak.use_isa(isa):
                got = peak.softmax(y, softcap=4.0)
                want, delta = self.reference(y, dict(softcap=4.0))
                self.assertTrue(np.all(np.isfinite(got)), isa)
                self.assertGreater(got[0, 0, 0, 3], 0.0)
                check_softmax(self, got, want, delta, isa)
                # uncapped, +inf still poisons its row; NaN does even when capped
                self.assertTrue(np.all(np.isnan(peak.softmax(y, sinks=1.0)[0, 0, 0])), isa)
                z = x.copy()
                z[0, 1, 2, 4] = np.nan
                got = peak.softmax(z, softcap=4.0, alibi="causal", sinks=1.0)
                self.assertTrue(np.all(np.isnan(got[0, 1, 2])), isa)
                self.assertFalse(np.any(np.isnan(got[0, 1, :2])), isa)
        # a sink makes a row sum to less than 1, by its own share
        got = peak.softmax(x, sinks=0.0).astype(F64)
        e = np.exp(x.astype(F64))
        np.testing.assert_allclose(got.sum(-1), e.sum(-1) / (e.sum(-1) + 1), rtol=1e-6)

    def test_errors(self):
        x = rand(2, 3, 4, 5)
        for kw, exc in [
            (dict(softcap="1"), TypeError),
            (dict(softcap=True), TypeError),
            (dict(softcap=1e-50), ValueError),  # 0 in float32: peak's "off"
            (dict(alibi="bloom"), ValueError),
            (dict(alibi=True), ValueError),
            (dict(alibi_slopes=[0.5, 0.25, 0.125]), ValueError),  # without alibi
            (dict(alibi="causal", alibi_slopes=[0.5, 0.25]), ValueError),
            (dict(alibi="causal", alibi_slopes=0.5), ValueError),  # no broadcast for slopes
            (dict(alibi="causal", alibi_slopes=np.ones((3, 1), F32)), ValueError),
            (dict(alibi="causal", alibi_slopes=[True, False, True]), TypeError),
            (dict(alibi="causal", alibi_slopes=["a", "b", "c"]), TypeError),
            (dict(sinks=[1.0, 2.0]), ValueError),
            (dict(sinks=np.ones((1, 3), F32)), ValueError),
            (dict(sinks=[1j, 2, 3]), TypeError),
            (dict(sinks=[1.0, None, 2.0]), TypeError),
        ]:
            with self.assertRaises(exc, msg=str(kw)) as cm:
                peak.softmax(x, **kw)
            if exc is ValueError:
                self.assertNotIsInstance(cm.exception, peak.PeakError, str(kw))
        # values: the library's checks
        for kw in (dict(softcap=-1.0), dict(softcap=np.inf), dict(softcap=np.nan),
                   dict(softcap=1e39),  # inf in float32
                   dict(alibi="causal", alibi_slopes=[0.5, -0.25, 0.1]),
                   dict(alibi="causal", alibi_slopes=[0.5, np.nan, 0.1]),
                   dict(alibi="causal", alibi_slopes=[0.5, np.inf, 0.1]),
                   dict(sinks=[0.0, np.inf, 1.0]), dict(sinks=np.nan), dict(sinks=1e39)):
            with self.assertRaises(peak.InvalidArgument, msg=str(kw)):
                peak.softmax(x, **kw)
        peak.softmax(x, alibi="causal", alibi_slopes=[0.5, -0.0, 0.0])  # -0 is a slope of 0
        peak.softmax(x, softcap=1e-40)  # a subnormal cap is positive
        # the output must not overlap a per-head array
        buf = np.zeros(2 * 3 * 4 * 5, F32)
        out = buf.reshape(x.shape)
        with self.assertRaises(ValueError):
            peak.softmax(x, sinks=buf[:3], out=out)
        with self.assertRaises(ValueError):
            peak.softmax(x, alibi="causal", alibi_slopes=buf[5:8], out=out)


class AttentionOptions(unittest.TestCase):
    def check(self, q, k, v, isa, **kw):
        got, lse = peak.attention(q, k, v, return_lse=True, **kw)
        want, want_lse = attention_exact(q, k, v, **kw)
        msg = f"{isa} {sorted(kw)}"
        np.testing.assert_allclose(got, want, rtol=0, atol=attention_tol(v), err_msg=msg)
        fin = np.isfinite(want_lse)
        np.testing.assert_array_equal(np.isfinite(lse), fin, err_msg=msg)
        self.assertTrue(np.all(np.abs(lse[fin] - want_lse[fin]) <= lse_tol(want_lse)[fin]), msg)
        np.testing.assert_array_equal(lse[~fin], want_lse[~fin], err_msg=msg)
        return got, lse

    def test_options(self):
        B, H, Hkv, Lq, Lk, D, Dv = 2, 8, 2, 9, 37, 32, 24  # GQA, cross, Dv != D
        q, k, v = rand(B, H, Lq, D), rand(B, Hkv, Lk, D), rand(B, Hkv, Lk, Dv)
        slopes = RNG.uniform(0, 0.5, H).astype(F32)
        sinks = rand(H, lo=-2, hi=2)
        bias = rand(Lq, Lk)
        cases = [
            dict(softcap=1.0),
            dict(softcap=0.25, scale=2.0, causal=True, align="bottom_right"),
            dict(alibi="causal"),
            dict(alibi="causal", causal=True, q_offset=28),
            dict(alibi="causal", causal=True, align="bottom_right", window=8),
            dict(alibi="symmetric", alibi_slopes=slopes),
            dict(alibi="symmetric", q_offset=14),
            dict(sinks=sinks),
            dict(sinks=-1.0, causal=True, align="bottom_right"),
            dict(sinks=sinks, key_len=[37, 11]),
            dict(sinks=25.0),  # the sink dominates every row
            dict(softcap=2.0, alibi="causal", sinks=sinks, causal=True, align="bottom_right"),
            dict(softcap=5.0, alibi="symmetric", alibi_slopes=slopes, sinks=0.5, bias=bias,
                 keep=RNG.random((B, 1, Lq, Lk)) > 0.3, scale=0.4),
        ]
        for isa in TIERS:
            with peak.use_isa(isa):
                for kw in cases:
                    with self.subTest(isa=isa, options=sorted(kw)):
                        self.check(q, k, v, isa, **kw)

    def test_decode_and_long_keys(self):
        """One query against many keys (the decode path), and a prefill
        tile's worth of queries: ALiBi's qpos from q_offset."""
        H, Lk, D = 4, 700, 64
        k, v = rand(1, H, Lk, D), rand(1, H, Lk, D)
        qd = rand(1, H, 1, D)
        qp = rand(1, H, 40, D)
        sinks = rand(H)
        # slopes small enough that |ALiBi| stays below ~40 over 700 keys
        slopes = (peak.alibi_slopes(H) / 16).astype(F32)
        for isa in TIERS:
            with peak.use_isa(isa):
                for kw in (dict(q_offset=Lk - 1, causal=True),
                           dict(align="bottom_right", causal=True), dict()):
                    opts = dict(kw, softcap=10.0, alibi="causal", alibi_slopes=slopes,
                                sinks=sinks)
                    with self.subTest(isa=isa, options=sorted(kw)):
                        self.check(qd, k, v, isa, **opts)
                opts = dict(causal=True, align="bottom_right", alibi="symmetric",
                            alibi_slopes=slopes, sinks=sinks, softcap=30.0)
                with self.subTest(isa=isa, options="prefill"):
                    self.check(qp, k, v, isa, **opts)

    def test_empty_rows(self):
        q, k, v = rand(1, 2, 3, 8), rand(1, 2, 4, 8), rand(1, 2, 4, 8)
        for isa in TIERS:
            with peak.use_isa(isa):
                out, lse = peak.attention(q, k, v, key_len=[0], sinks=[0.5, -2.0], softcap=3.0,
                                          alibi="causal", return_lse=True)
                np.testing.assert_array_equal(out, 0, err_msg=isa)
                np.testing.assert_array_equal(lse, np.broadcast_to(
                    np.array([0.5, -2.0], F32)[None, :, None], lse.shape), err_msg=isa)
                out, lse = peak.attention(q, k, v, key_len=[0], alibi="causal", return_lse=True)
                np.testing.assert_array_equal(out, 0, err_msg=isa)
                self.assertTrue(np.all(np.isneginf(lse)), isa)

    def test_lse_is_the_distance_form(self):
        """BLOOM adds slope * j: the same output, an lse larger by slope * qpos."""
        B, H, Lq, Lk, D = 1, 4, 6, 20, 16
        q, k, v = rand(B, H, Lq, D), rand(B, H, Lk, D), rand(B, H, Lk, D)
        slopes = peak.alibi_slopes(H).astype(F64)
        j = np.arange(Lk)
        bloom = (slopes[None, :, None, None] * j[None, None, None, :]).astype(F32)
        bloom = np.broadcast_to(bloom, (B, H, Lq, Lk))
        qpos = qpos_of(Lq, Lk, q_offset=14)
        out, lse = peak.attention(q, k, v, alibi="causal", causal=True, q_offset=14,
                                  return_lse=True)
        out_b, lse_b = peak.attention(q, k, v, bias=bloom, causal=True, q_offset=14,
                                      return_lse=True)
        np.testing.assert_allclose(out, out_b, atol=2 * attention_tol(v), rtol=0)
        shift = slopes[None, :, None] * qpos[None, None, :]
        np.testing.assert_allclose(lse_b - lse, shift, atol=1e-4, rtol=0)

    def test_decode_is_the_last_prefill_row(self):
        H, L, D = 4, 50, 32
        q, k, v = rand(1, H, L, D), rand(1, H, L, D), rand(1, H, L, D)
        kw = dict(alibi="causal", softcap=4.0, sinks=rand(H), causal=True)
        full = peak.attention(q, k, v, **kw)
        last = peak.attention(q[:, :, -1:], k, v, q_offset=L - 1, **kw)
        np.testing.assert_allclose(last, full[:, :, -1:], atol=2 * attention_tol(v), rtol=0)

    def test_layouts_and_merge(self):
        """blhd gives what bhld gives; sinks on one part of split keys merge
        into the one call."""
        B, H, Hkv, Lq, Lk, D = 2, 4, 2, 5, 64, 16
        q, k, v = rand(B, H, Lq, D), rand(B, Hkv, Lk, D), rand(B, Hkv, Lk, D)
        kw = dict(softcap=3.0, sinks=rand(H), alibi="symmetric")
        want, want_lse = peak.attention(q, k, v, return_lse=True, **kw)
        t = [np.ascontiguousarray(a.transpose(0, 2, 1, 3)) for a in (q, k, v)]
        got = peak.attention(*t, layout="blhd", **kw)
        np.testing.assert_allclose(got.transpose(0, 2, 1, 3), want, atol=1e-6, rtol=0)
        no_alibi = dict(softcap=3.0, sinks=kw["sinks"])
        want, want_lse = peak.attention(q, k, v, return_lse=True, **no_alibi)
        parts = [peak.attention(q, k[:, :, :30], v[:, :, :30], return_lse=True, **no_alibi),
                 peak.attention(q, k[:, :, 30:], v[:, :, 30:], return_lse=True, softcap=3.0)]
        got, lse = peak.attention_merge(parts, return_lse=True)
        np.testing.assert_allclose(got, want, atol=2 * attention_tol(v), rtol=0)
        np.testing.assert_allclose(lse, want_lse, atol=8e-6 * (1 + np.abs(want_lse).max()),
                                   rtol=0)

    def test_errors(self):
        q, k, v = rand(1, 4, 3, 8), rand(1, 2, 5, 8), rand(1, 2, 5, 8)
        # per query head: [H] = 4, not the 2 K/V heads
        with self.assertRaises(ValueError):
            peak.attention(q, k, v, sinks=[1.0, 2.0])
        with self.assertRaises(ValueError):
            peak.attention(q, k, v, alibi="causal", alibi_slopes=[0.5, 0.25])
        with self.assertRaises(ValueError):
            peak.attention(q, k, v, alibi_slopes=peak.alibi_slopes(4))
        with self.assertRaises(ValueError):
            peak.attention(q, k, v, softcap=1e-60)
        with self.assertRaises(peak.InvalidArgument):
            peak.attention(q, k, v, softcap=-2.0)
        with self.assertRaises(peak.InvalidArgument):
            peak.attention(q, k, v, sinks=[0, 1, np.inf, 2])
        with self.assertRaises(peak.InvalidArgument):
            peak.attention(q, k, v, alibi="causal", alibi_slopes=[0.1, 0.2, -0.3, 0.4])
        buf = np.zeros(4 * 3 * 8, F32)
        with self.assertRaises(ValueError):
            peak.attention(q, k, v, sinks=buf[:4], out=buf.reshape(1, 4, 3, 8))

    @unittest.skipUnless(POOLS, "libpeak built without pthreadpool: threads= raises Unsupported")
    def test_same_bytes_at_any_thread_count(self):
        q, k, v = rand(2, 8, 40, 64), rand(2, 2, 300, 64), rand(2, 2, 300, 48)
        x = rand(2, 8, 40, 300, lo=-8, hi=8)
        kw = dict(softcap=5.0, alibi="causal", sinks=rand(8), causal=True, align="bottom_right")
        want = peak.attention(q, k, v, return_lse=True, **kw)
        want_s = peak.softmax(x, **kw)
        for threads in (1, 2, 3):
            got = peak.attention(q, k, v, return_lse=True, threads=threads, **kw)
            same_bytes(self, got[0], want[0], f"threads {threads}")
            same_bytes(self, got[1], want[1], f"threads {threads}")
            same_bytes(self, peak.softmax(x, threads=threads, **kw), want_s, f"threads {threads}")


if __name__ == "__main__":
    unittest.main()
