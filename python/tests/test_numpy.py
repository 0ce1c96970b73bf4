"""peak's Python binding against NumPy references (float64 formulas).

Run: python3 python/tests/run.py numpy (meson test: python-numpy).
"""
import ctypes
import math
import os
import re
import subprocess
import tempfile
import threading
import unittest

import numpy as np

import peak

RNG = np.random.default_rng(20261129)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def pe_ref(n_pos, d, pos0=0, layout="interleaved", base=10000.0):
    """peak.h's formulas in float64."""
    p = np.arange(pos0, pos0 + n_pos, dtype=np.float64)[:, None]
    out = np.zeros((n_pos, d))
    if layout == "interleaved":
        i = np.arange((d + 1) // 2)
        ang = p * base ** (-2.0 * i / d)
        out[:, 0::2] = np.sin(ang)
        out[:, 1::2] = np.cos(ang)[:, : d // 2]
    else:
        half = d // 2
        i = np.arange(half)
        if layout == "split":
            w = np.exp(-i * math.log(base) / max(half - 1, 1))
        else:
            w = base ** (-2.0 * i / d)
        out[:, :half] = np.sin(p * w)
        out[:, half:2 * half] = np.cos(p * w)
    return out


def visible(B, H, Lq, Lk, causal=False, align="top_left", q_offset=0, window=0, key_len=None,
            keep=None):
    vis = np.ones((B, H, Lq, Lk), bool)
    i = np.arange(Lq)[:, None]
    j = np.arange(Lk)[None, :]
    qpos = i + q_offset + (Lk - Lq if align == "bottom_right" else 0)
    if causal:
        vis &= j <= qpos
    if window:
        vis &= j > qpos - window
    if key_len is not None:
        vis &= j[None, None] < np.asarray(key_len)[:, None, None, None]
    if keep is not None:
        vis &= np.broadcast_to(keep.astype(bool), vis.shape)
    return vis


def softmax_ref(s, vis):
    s = np.where(vis, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.where(vis, np.exp(s - m), 0)
    tot = e.sum(axis=-1, keepdims=True)
    return np.where(tot > 0, e / np.where(tot > 0, tot, 1), 0), m + np.log(tot)


def attention_ref(q, k, v, scale=None, bias=None, **mask):
    """q [B, H, Lq, D], k/v [B, Hkv, Lk, D]; float64."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    B, H, Lq, D = q.shape
    g = H // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    scale = 1 / math.sqrt(D) if scale is None else scale
    s = q @ k.transpose(0, 1, 3, 2) * scale + (0 if bias is None else bias)
    p, lse = softmax_ref(s, visible(B, H, Lq, k.shape[2], **mask))
    return p @ v, lse[..., 0]


HAVE_CC = bool(os.environ.get("PEAK_CC") and os.environ.get("PEAK_SOURCE_DIR"))
NEED_CC = "needs PEAK_CC and PEAK_SOURCE_DIR (meson test sets them)"


def c_printed(prints):
    """What a C program that includes peak.h prints with the printf
    statements `prints`, compiled by PEAK_CC (meson test sets it)."""
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "peak.h"',
             'int main(void) {'] + list(prints) + ["return 0; }"]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write("\n".join(lines))
        inc = os.path.join(os.environ["PEAK_SOURCE_DIR"], "include")
        cc = os.environ["PEAK_CC"].split()
        subprocess.run(cc + ["-std=c11", "-I", inc, src, "-o", exe], check=True)
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        return subprocess.run([exe], check=True, capture_output=True, text=True,
                              env=env).stdout


def check_layouts(test, structs):
    """Asserts that each ctypes mirror in structs ({C name: class}) has its
    C struct's size and field offsets; returns how many were compared."""
    prints = []
    for cname, py in structs.items():
        prints.append(f'printf("{cname} size %zu\\n", sizeof({cname}));')
        for field, _ in py._fields_:
            prints.append(f'printf("{cname} {field} %zu\\n", offsetof({cname}, {field}));')
    seen = 0
    for line in c_printed(prints).splitlines():
        cname, what, value = line.split()
        py = structs[cname]
        got = ctypes.sizeof(py) if what == "size" else getattr(py, what).offset
        test.assertEqual(got, int(value), f"{cname}.{what}")
        seen += 1
    return seen


class Basics(unittest.TestCase):
    def test_version(self):
        self.assertEqual(peak.version(), peak.__version__)
        src = os.environ.get("PEAK_SOURCE_DIR")
        if src:
            with open(os.path.join(src, "include", "peak.h")) as f:
                m = re.search(r'#define PEAK_VERSION_STRING "([^"]+)"', f.read())
            self.assertEqual(m.group(1), peak.version())

    def test_library_path(self):
        self.assertIn("libpeak.so", peak.library_path())

    def test_tiers(self):
        self.assertIn(peak.isa_active(), peak.isa_names())
        self.assertTrue(peak.isa_supported("scalar"))
        self.assertTrue(peak.isa_reason())
        with self.assertRaises(ValueError):
            peak.isa_supported("sse9")
        for isa in peak.isa_names():
            if not peak.isa_supported(isa):
                with self.assertRaises(peak.Unsupported) as cm:
                    peak.isa_force(isa)
                self.assertEqual(cm.exception.status, 3)
        before = peak.isa_active()
        with peak.use_isa("scalar"):
            self.assertEqual(peak.isa_active(), "scalar")
        self.assertEqual(peak.isa_active(), before)

    @unittest.skipUnless(HAVE_CC, NEED_CC)
    def test_struct_layouts_match_the_header(self):
        """ctypes mirrors of the descriptors have C's sizes and offsets."""
        structs = {
            "peak_pe_params": peak._PeParams, "peak_embed_desc": peak._EmbedDesc,
            "peak_mask": peak._Mask, "peak_logits": peak._Logits,
            "peak_softmax_desc": peak._SoftmaxDesc,
            "peak_attention_desc": peak._AttentionDesc,
            "peak_attention_merge_desc": peak._MergeDesc,
        }
        self.assertGreater(check_layouts(self, structs), 40)


class PeTable(unittest.TestCase):
    def test_layouts_against_the_formula(self):
        for layout in ("interleaved", "split", "split_paper"):
            for d in (7, 64, 512):
                pe = peak.pe_table(300, d, pos0=4700, layout=layout)
                self.assertEqual(pe.shape, (300, d))
                err = np.abs(pe - pe_ref(300, d, 4700, layout)).max()
                self.assertLessEqual(err, 2.0 ** -23, (layout, d))

    def test_out_and_errors(self):
        out = np.empty((10, 16), np.float32)
        self.assertIs(peak.pe_table(10, 16, out=out), out)
        with self.assertRaises(ValueError):
            peak.pe_table(10, 16, out=np.empty((10, 17), np.float32))
        with self.assertRaises(TypeError):
            peak.pe_table(10, 16, out=np.empty((10, 16)))
        with self.assertRaises(peak.OutOfRange) as cm:
            peak.pe_table(2, 4, pos0=peak.MAX_POSITION - 1)
        self.assertIn("PEAK_ERR_OUT_OF_RANGE", str(cm.exception))
        with self.assertRaises(peak.InvalidArgument):
            peak.pe_table(2, 4, base=-1.0)
        with self.assertRaises(ValueError):
            peak.pe_table(2, 4, layout="diagonal")

    def test_integer_arguments_do_not_wrap(self):
        # ctypes would store 2**64 in a size_t as 0
        for args in ((1, 4, 2 ** 64), (1, 4, 2 ** 64 + 1), (2 ** 64, 4), (1, 2 ** 64 + 4)):
            with self.assertRaises(peak.OutOfRange, msg=str(args)):
                peak.pe_table(*args)
        with self.assertRaises(ValueError):
            peak.pe_table(1, 4, -1)
        for bad in (1.0, 2.7, True, "3", None):
            with self.assertRaises(TypeError, msg=repr(bad)):
                peak.pe_table(1, 4, bad)
        with self.assertRaises(TypeError):
            peak.pe_table(2.0, 4)
        np.testing.assert_array_equal(peak.pe_table(1, 4, np.int64(3)), peak.pe_table(1, 4, 3))

    def test_half_types(self):
        """float16 / bfloat16 (ml_dtypes) tables: the float32 table rounded once
        (peak.convert's bits) in both modes; exact mode within half an ULP of
        the type plus 2^-24 of the formula (peak.h); out's type by default."""
        types = [np.float16] + ([peak._bfloat16()] if peak._bfloat16() else [])
        for dt in types:
            for layout in ("interleaved", "split", "split_paper"):
                for mode in ("exact", "torch_f32"):
                    for n, d, pos0 in ((5, 7, 0), (300, 64, 4700), (40, 513, 96070)):
                        want = peak.convert(peak.pe_table(n, d, pos0, layout=layout, mode=mode),
                                            dt)
                        got = peak.pe_table(n, d, pos0, layout=layout, mode=mode, dtype=dt)
                        self.assertEqual(got.dtype, np.dtype(dt))
                        self.assertTrue(np.array_equal(got.view(np.uint16), want.view(np.uint16)),
                                        (dt, layout, mode, n, d))
                ref = pe_ref(300, 65, 1 << 19, layout)
                got = peak.pe_table(300, 65, 1 << 19, layout=layout, dtype=dt).astype(np.float64)
                mbits, emin = (10, -14) if dt == np.float16 else (7, -126)
                _, e = np.frexp(ref)  # |ref| in [2^(e-1), 2^e)
                ulp = np.ldexp(1.0, np.maximum(e - 1, emin) - mbits)
                self.assertTrue(np.all(np.abs(got - ref) <= 0.5 * ulp + 2.0 ** -24), (dt, layout))
            out = np.zeros((6, 16), dt)
            self.assertIs(peak.pe_table(6, 16, 9, out=out), out)
            self.assertTrue(np.array_equal(out.view(np.uint16),
                                           peak.pe_table(6, 16, 9, dtype=dt).view(np.uint16)))
            with self.assertRaises(TypeError):  # dtype and out disagree
                peak.pe_table(6, 16, dtype=dt, out=np.empty((6, 16), np.float32))
        for bad in (np.float64, np.int16, "float8"):
            with self.assertRaises(TypeError, msg=repr(bad)):
                peak.pe_table(6, 16, dtype=bad)
        if not peak._bfloat16():
            with self.assertRaises(TypeError):
                peak.pe_table(2, 4, dtype="bfloat16")


class PeAdd(unittest.TestCase):
    def test_table_and_on_the_fly(self):
        x = rand(2, 50, 512)
        pe = peak.pe_table(5000, 512)
        a = peak.pe_add(x.copy(), pe=pe)
        b = peak.pe_add(x.copy())
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, x + pe[None, :50])
        c = peak.pe_add(x[1].copy(), pos0=7, pe=pe)  # 2-D [seq, d]
        np.testing.assert_array_equal(c, x[1] + pe[7:57])

    def test_strided_view_in_place(self):
        big = rand(3, 60, 80)
        view = big[::2, 5:25, :32]  # batch and row strides, contiguous rows
        want = view + pe_ref(20, 32).astype(np.float32)[None]
        peak.pe_add(view)
        np.testing.assert_allclose(view, want, atol=3e-7)

    def test_checks(self):
        with self.assertRaises(TypeError):
            peak.pe_add(np.zeros((2, 4, 8)))  # float64
        ro = np.zeros((2, 4, 8), np.float32)
        ro.flags.writeable = False
        with self.assertRaises(ValueError):
            peak.pe_add(ro)
        with self.assertRaises(ValueError):  # last axis not contiguous
            peak.pe_add(np.zeros((4, 16), np.float32)[:, ::2])
        with self.assertRaises(peak.OutOfRange):
            peak.pe_add(np.zeros((1, 10, 8), np.float32), pe=peak.pe_table(5, 8))
        with self.assertRaises(ValueError):  # x inside the table
            pe = peak.pe_table(20, 8)
            peak.pe_add(pe[:4], pe=pe)

    def test_pos0_does_not_wrap(self):
        x = rand(1, 3, 8)
        for pe in (None, peak.pe_table(8, 8)):
            y = x.copy()
            with self.assertRaises(peak.OutOfRange):
                peak.pe_add(y, 2 ** 64 + 1, pe=pe)
            np.testing.assert_array_equal(y, x)
        with self.assertRaises(ValueError):
            peak.pe_add(x.copy(), -1)
        with self.assertRaises(TypeError):
            peak.pe_add(x.copy(), 1.0)


class EmbedPe(unittest.TestCase):
    def test_against_gather(self):
        table = rand(100, 64)
        ids = RNG.integers(0, 100, (2, 9))
        pe = peak.pe_table(64, 64)
        got = peak.embed_pe(ids, table, scale=8.0, pe=pe)
        want = table[ids] * np.float32(8.0) + pe[None, :9]
        np.testing.assert_array_equal(got, want)
        otf = peak.embed_pe(ids.astype(np.int64), table, scale=8.0)  # on the fly, int64 ids
        np.testing.assert_array_equal(otf, got)
        flat = peak.embed_pe(ids.reshape(-1), table, scale=8.0, pos0=3)  # one sequence
        np.testing.assert_array_equal(flat, table[ids.reshape(-1)] * np.float32(8.0)
                                      + peak.pe_table(18, 64, pos0=3))

    def test_positions_and_padding(self):
        table = rand(50, 16)
        ids = np.array([[5, 6, 1, 1], [7, 1, 8, 9]], np.int32)
        pos = np.array([[0, 4, 2, 2], [9, 9, 9, 0]])
        got = peak.embed_pe(ids, table, positions=pos)
        pe = peak.pe_table(10, 16)
        np.testing.assert_array_equal(got, table[ids] + pe[pos])
        # fairseq numbering: padding 1, positions from padding_idx + 1
        got = peak.embed_pe(ids, table, padding_idx=1)
        pe = peak.pe_table(8, 16)
        want = table[ids].copy()
        want[0, 0] += pe[2]
        want[0, 1] += pe[3]
        want[1, 0] += pe[2]
        want[1, 2] += pe[3]
        want[1, 3] += pe[4]
        np.testing.assert_array_equal(got, want)

    def test_errors(self):
        table = rand(10, 8)
        with self.assertRaises(peak.OutOfRange):
            peak.embed_pe(np.array([1, 10]), table)
        with self.assertRaises(peak.OutOfRange):
            peak.embed_pe(np.array([-1, 2]), table)
        with self.assertRaises(TypeError):
            peak.embed_pe(np.array([1.0, 2.0]), table)
        with self.assertRaises(TypeError):
            peak.embed_pe(np.array([1, 2]), table.astype(np.float64))
        with self.assertRaises(peak.OutOfRange):  # an object array: no int64 holds it
            peak.embed_pe([1, 2 ** 64 + 1], table)

    def test_half_types(self):
        """float16 / bfloat16 (ml_dtypes) table and out, independently: the
        float32 call on the widened table, bit for bit, rounded once; out
        defaults to the table's type; d_model above 8192 refused."""
        table, ids = rand(40, 72), RNG.integers(0, 40, (3, 11))
        types = [np.float16, np.float32] + ([peak._bfloat16()] if peak._bfloat16() else [])
        for tt in types:
            for ot in types:
                ht = table.astype(tt)
                for pe in (None, peak.pe_table(11, 72)):
                    got = peak.embed_pe(ids, ht, scale=3.0, pe=pe, out=np.empty((3, 11, 72), ot))
                    wide = peak.embed_pe(ids, ht.astype(np.float32), scale=3.0, pe=pe)
                    np.testing.assert_array_equal(got.view(np.uint8),
                                                  peak.convert(wide, ot).view(np.uint8))
            self.assertEqual(peak.embed_pe(ids, table.astype(tt)).dtype, np.dtype(tt))
        with self.assertRaises(peak.Unsupported):
            peak.embed_pe(np.array([0]), rand(1, 8193).astype(np.float16))

    def test_integer_arguments_do_not_wrap(self):
        table = rand(10, 8)
        ids = np.array([[1, 2, 3]])
        with self.assertRaises(peak.OutOfRange):
            peak.embed_pe(ids, table, pos0=2 ** 64 + 1)
        for pad in (2 ** 32 + 1, -2 ** 31 - 1):  # int32_t padding_idx
            with self.assertRaises(peak.OutOfRange, msg=str(pad)):
                peak.embed_pe(ids, table, padding_idx=pad)
        with self.assertRaises(ValueError):
            peak.embed_pe(ids, table, pos0=-1)
        for kw in (dict(pos0=1.0), dict(padding_idx=1.0), dict(padding_idx=True)):
            with self.assertRaises(TypeError, msg=str(kw)):
                peak.embed_pe(ids, table, **kw)

    def test_positions_must_be_integers(self):
        table = rand(10, 8)
        ids = np.array([1, 2, 3])
        with self.assertRaises(TypeError):  # was truncated to [0, 1, 2]
            peak.embed_pe(ids, table, positions=np.array([0.0, 1.7, 2.9]))
        with self.assertRaises(TypeError):
            peak.embed_pe(ids, table, positions=[0, 1, 2.5])
        with self.assertRaises(TypeError):
            peak.embed_pe(ids, table, positions=np.array([True, False, True]))
        for pos in (np.array([0, 1, 2 ** 63], np.uint64), [0, 1, 2 ** 63], [0, 1, 2 ** 64 + 1],
                    [-2 ** 63 - 1, 0, 1]):
            with self.assertRaises(peak.OutOfRange, msg=str(pos)):
                peak.embed_pe(ids, table, positions=pos)
        want = peak.embed_pe(ids, table, positions=np.array([4, 0, 2]))
        for pos in (np.array([4, 0, 2], np.uint8), [4, 0, 2], np.array([4, 0, 2], np.uint64)):
            np.testing.assert_array_equal(peak.embed_pe(ids, table, positions=pos), want)


class Softmax(unittest.TestCase):
    def test_masks(self):
        B, H, Lq, Lk = 2, 3, 5, 9
        x = rand(B, H, Lq, Lk, lo=-4, hi=4)
        keep = RNG.random((Lq, Lk)) > 0.2  # broadcast over batch and heads
        bias = rand(1, H, 1, Lk)
        cases = [dict(), dict(causal=True), dict(causal=True, align="bottom_right"),
                 dict(causal=True, q_offset=2, window=3), dict(key_len=[9, 4]),
                 dict(keep=keep), dict(bias=bias)]
        for kw in cases:
            got = peak.softmax(x, scale=0.5, **kw)
            s = x.astype(np.float64) * 0.5 + (kw["bias"] if "bias" in kw else 0)
            vkw = {k: v for k, v in kw.items() if k != "bias"}
            want, _ = softmax_ref(s, visible(B, H, Lq, Lk, **vkw))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7, err_msg=str(kw))

    def test_half_types(self):
        """float16 / bfloat16 (ml_dtypes) x and out, independently: the
        float32 call on the widened scores, bit for bit, rounded once; in
        place in a 16-bit array; rows past the 8192-key stack buffer."""
        types = [np.float16, np.float32] + ([peak._bfloat16()] if peak._bfloat16() else [])
        for shape in ((2, 3, 5, 40), (1, 1, 2, 9000)):
            x = rand(*shape) * 8
            for xt in types:
                for yt in types:
                    hx = x.astype(xt)
                    got = peak.softmax(hx, causal=True, out=np.empty(shape, yt))
                    wide = peak.softmax(hx.astype(np.float32), causal=True)
                    np.testing.assert_array_equal(got.view(np.uint8),
                                                  peak.convert(wide, yt).view(np.uint8))
                hx = x.astype(xt)
                want = peak.softmax(hx)
                self.assertIs(peak.softmax(hx, out=hx), hx)
                np.testing.assert_array_equal(hx.view(np.uint8), want.view(np.uint8))

    def test_in_place_and_empty_rows(self):
        x = rand(4, 6)
        y = peak.softmax(x, key_len=None, keep=np.zeros(6, bool), out=x)
        self.assertIs(y, x)
        np.testing.assert_array_equal(x, 0)  # no visible key: zeros, not NaN

    def test_errors(self):
        with self.assertRaises(ValueError):
            peak.softmax(rand(2, 3), keep=np.ones((3, 3), bool))  # does not broadcast
        with self.assertRaises(TypeError):
            peak.softmax(rand(2, 3), keep=np.ones(3, np.int32))
        with self.assertRaises(peak.OutOfRange):
            peak.softmax(rand(2, 1, 1, 3), key_len=[4, 1])

    def test_key_len_does_not_wrap(self):
        x = rand(2, 1, 1, 9)
        # as int32, 2**32 + 3 would be 3: a valid length
        for kl in ([2 ** 32 + 3, 7], np.array([2 ** 32 + 3, 7]), [2 ** 63, 7],
                   [2 ** 64 + 3, 7], [-2 ** 32 + 3, 7], np.array([2 ** 32 + 3, 7], np.uint64)):
            with self.assertRaises(peak.OutOfRange, msg=str(kl)):
                peak.softmax(x, key_len=kl)
        for kl in ([3.0, 7], np.array([3.0, 7.0]), np.array([True, True])):
            with self.assertRaises(TypeError, msg=str(kl)):
                peak.softmax(x, key_len=kl)
        want = peak.softmax(x, key_len=[3, 7])
        np.testing.assert_array_equal(peak.softmax(x, key_len=np.array([3, 7], np.uint64)), want)

    def test_mask_offsets_do_not_wrap(self):
        x = rand(1, 1, 4, 6)
        for kw in (dict(q_offset=2 ** 64 + 1), dict(causal=True, q_offset=2 ** 64 + 1),
                   dict(window=2 ** 64), dict(window=2 ** 64 + 2)):
            with self.assertRaises(peak.OutOfRange, msg=str(kw)):
                peak.softmax(x, **kw)
        for kw in (dict(q_offset=-1), dict(window=-1)):
            with self.assertRaises(ValueError, msg=str(kw)):
                peak.softmax(x, **kw)
        for kw in (dict(q_offset=1.0), dict(window=2.0), dict(window=True)):
            with self.assertRaises(TypeError, msg=str(kw)):
                peak.softmax(x, **kw)
        np.testing.assert_array_equal(peak.softmax(x, window=None), peak.softmax(x))

    def test_zero_scale_is_an_error(self):
        x = rand(2, 5)
        for scale in (0.0, -0.0, 0, 1e-50, -1e-60):  # all 0.0f: C's "default" marker
            with self.assertRaises(ValueError, msg=repr(scale)) as cm:
                peak.softmax(x, scale=scale)
            self.assertNotIsInstance(cm.exception, peak.PeakError)
        np.testing.assert_array_equal(peak.softmax(x, scale=None), peak.softmax(x, scale=1.0))
        tiny = peak.softmax(x, scale=1e-30)  # not 0 in float32: nearly uniform, not scale 1
        np.testing.assert_allclose(tiny, 0.2, rtol=1e-6)


class Attention(unittest.TestCase):
    def check(self, q, k, v, tol=2e-5, **kw):
        got, lse = peak.attention(q, k, v, return_lse=True, **kw)
        want, want_lse = attention_ref(q, k, v, **kw)
        np.testing.assert_allclose(got, want, atol=tol, err_msg=str(kw))
        finite = np.isfinite(want_lse)
        np.testing.assert_allclose(lse[finite], want_lse[finite], atol=4e-5)
        self.assertTrue(np.all(np.isneginf(lse[~finite])))
        return got

    def test_self_attention(self):
        for d in (1, 7, 16, 64):
            q, k, v = rand(2, 4, 11, d), rand(2, 4, 11, d), rand(2, 4, 11, d)
            self.check(q, k, v)
            self.check(q, k, v, causal=True)

    def test_cross_gqa_and_masks(self):
        q, k, v = rand(2, 8, 5, 32), rand(2, 2, 13, 32), rand(2, 2, 13, 24)  # GQA, Dv != D
        self.check(q, k, v, key_len=[13, 6])
        self.check(q, k, v, causal=True, align="bottom_right")
        self.check(q, k, v, causal=True, q_offset=8, window=4, scale=0.3)
        self.check(q, k, v, keep=RNG.random((2, 1, 5, 13)) > 0.3)
        self.check(q, k, v, bias=rand(5, 13))

    def test_half_types(self):
        """float16 and bfloat16 (ml_dtypes) q, k, v and out, independently:
        the float32 call on the widened values, bit for bit, its out rounded
        once (peak.convert); out defaults to q's type; other dtypes refused."""
        q, k, v = rand(2, 8, 5, 32), rand(2, 2, 70, 32), rand(2, 2, 70, 24)
        types = [np.float16, np.float32] + ([peak._bfloat16()] if peak._bfloat16() else [])
        for qt in types:
            for kt in types:
                hq, hk, hv = q.astype(qt), k.astype(kt), v.astype(kt)
                got = peak.attention(hq, hk, hv, causal=True, align="bottom_right")
                self.assertEqual(got.dtype, np.dtype(qt))
                wide = peak.attention(*(a.astype(np.float32) for a in (hq, hk, hv)),
                                      causal=True, align="bottom_right")
                np.testing.assert_array_equal(got.view(np.uint8),
                                              peak.convert(wide, qt).view(np.uint8))
        out = np.empty((2, 8, 5, 24), np.float16)
        self.assertIs(peak.attention(q, k, v, out=out), out)
        with self.assertRaises(TypeError):
            peak.attention(q.astype(np.float64), k, v)
        with self.assertRaises(TypeError):
            peak.attention(q, k, v, out=np.empty((2, 8, 5, 24), np.float64))

    def test_blhd_layout_and_views(self):
        q, k, v = rand(2, 4, 6, 16), rand(2, 4, 9, 16), rand(2, 4, 9, 16)
        want = peak.attention(q, k, v)
        qt, kt, vt = (np.ascontiguousarray(a.transpose(0, 2, 1, 3)) for a in (q, k, v))
        got = peak.attention(qt, kt, vt, layout="blhd")
        np.testing.assert_allclose(got.transpose(0, 2, 1, 3), want, atol=1e-6)
        # transposed views (no copy): the [B, L, H, D] buffers read as [B, H, L, D]
        views = [a.transpose(0, 2, 1, 3) for a in (qt, kt, vt)]
        np.testing.assert_allclose(peak.attention(*views), want, atol=1e-6)

    def test_errors(self):
        q = rand(1, 3, 4, 8)
        with self.assertRaises(ValueError):
            peak.attention(q, rand(1, 2, 4, 8), rand(1, 2, 4, 8))  # 2 does not divide 3
        with self.assertRaises(ValueError):
            peak.attention(q, rand(1, 3, 4, 9), rand(1, 3, 4, 8))
        with self.assertRaises(ValueError):
            peak.attention(q, q, q, out=q)
        with self.assertRaises(peak.OutOfRange):
            peak.attention(q, q.copy(), q.copy(), key_len=[5])

    def test_integer_arguments_do_not_wrap(self):
        q, k, v = rand(2, 2, 3, 8), rand(2, 2, 5, 8), rand(2, 2, 5, 8)
        for kw in (dict(key_len=[2 ** 32 + 3, 5]), dict(key_len=[2 ** 64 + 3, 5]),
                   dict(q_offset=2 ** 64 + 1), dict(causal=True, q_offset=2 ** 64 + 1),
                   dict(window=2 ** 64)):
            with self.assertRaises(peak.OutOfRange, msg=str(kw)):
                peak.attention(q, k, v, **kw)
        for kw in (dict(key_len=[3.0, 5]), dict(q_offset=0.5), dict(window=1.0)):
            with self.assertRaises(TypeError, msg=str(kw)):
                peak.attention(q, k, v, **kw)
        for scale in (0.0, 1e-50):
            with self.assertRaises(ValueError):
                peak.attention(q, k, v, scale=scale)

    def test_threads(self):
        q, k, v = rand(2, 4, 33, 32), rand(2, 4, 70, 32), rand(2, 4, 70, 32)
        want = peak.attention(q, k, v, causal=True)
        results = [None] * 4

        def work(i):
            for _ in range(5):
                results[i] = peak.attention(q, k, v, causal=True)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            np.testing.assert_array_equal(r, want)


class LayerNorm(unittest.TestCase):
    def test_half_types(self):
        """float16 / bfloat16 (ml_dtypes) x, residual, out and sum_out: the
        float32 call on the widened values, bit for bit, rounded once."""
        x, r = rand(37, 96) * 4, rand(37, 96)
        g, b = rand(96) + 1, rand(96)
        types = [np.float16] + ([peak._bfloat16()] if peak._bfloat16() else [])
        for t in types:
            for xt, rt, ot in ((t, t, t), (np.float32, t, t), (t, np.float32, np.float32)):
                hx, hr = x.astype(xt), r.astype(rt)
                s = np.empty(x.shape, ot)
                got = peak.add_layernorm(hx, hr, g, b, out=np.empty(x.shape, ot), sum_out=s)
                s32 = np.empty(x.shape, np.float32)
                want = peak.add_layernorm(hx.astype(np.float32), hr.astype(np.float32), g, b,
                                          sum_out=s32)
                np.testing.assert_array_equal(got.view(np.uint8),
                                              peak.convert(want, ot).view(np.uint8))
                np.testing.assert_array_equal(s.view(np.uint8),
                                              peak.convert(s32, ot).view(np.uint8))
            self.assertEqual(peak.add_layernorm(x.astype(t)).dtype, np.dtype(t))
        with self.assertRaises(TypeError):
            peak.add_layernorm(x.astype(np.float64))
        with self.assertRaises(peak.PeakError):  # a 16-bit row beyond 16384
            peak.add_layernorm(np.zeros((1, 16385), np.float16))

    def ref(self, x, r, g, b, eps):
        s = x.astype(np.float64) + (0 if r is None else r)
        m = s.mean(-1, keepdims=True)
        var = ((s - m) ** 2).mean(-1, keepdims=True)
        y = (s - m) / np.sqrt(var + eps)
        return y * (1 if g is None else g) + (0 if b is None else b)

    def test_against_formula(self):
        x, r, g, b = rand(2, 7, 96), rand(2, 7, 96), rand(96), rand(96)
        for args in ((None, None, None), (r, None, None), (r, g, b)):
            got = peak.add_layernorm(x, *args, eps=1e-5)
            np.testing.assert_allclose(got, self.ref(x, *args, 1e-5), atol=1e-5)
        s = np.empty_like(x)
        peak.add_layernorm(x, r, g, b, sum_out=s)
        np.testing.assert_array_equal(s, x + r)
        y = x.copy()
        peak.add_layernorm(y, r, out=y)  # in place
        np.testing.assert_allclose(y, self.ref(x, r, None, None, 1e-5), atol=1e-5)

    def test_in_place_on_residual_and_interleaved_rows(self):
        x, r = rand(5, 32), rand(5, 32)
        want = self.ref(x, r, None, None, 1e-5)
        r2 = r.copy()
        self.assertIs(peak.add_layernorm(x, r2, out=r2), r2)  # out = residual
        np.testing.assert_allclose(r2, want, atol=1e-5)
        buf = np.zeros((5, 64), np.float32)  # [x | y] in one buffer: rows interleave
        buf[:, :32] = x
        peak.add_layernorm(buf[:, :32], r, out=buf[:, 32:])
        np.testing.assert_allclose(buf[:, 32:], want, atol=1e-5)
        np.testing.assert_array_equal(buf[:, :32], x)
        with self.assertRaises(ValueError):  # a partial overlap
            peak.add_layernorm(buf[:, :32], r, out=buf[:, 16:48])

    def test_errors(self):
        x = rand(3, 8)
        with self.assertRaises(ValueError):
            peak.add_layernorm(x, rand(3, 9))
        with self.assertRaises(ValueError):
            peak.add_layernorm(x, None, rand(7))
        with self.assertRaises(peak.InvalidArgument):
            peak.add_layernorm(x, eps=-1.0)
        with self.assertRaises(ValueError):  # rows not evenly spaced: no [rows, d] view
            peak.add_layernorm(rand(2, 3, 8), out=np.empty((2, 4, 8), np.float32)[:, :3])


class Exp(unittest.TestCase):
    def test_ulp(self):
        x = np.linspace(-87, 88, 100001, dtype=np.float32)
        got = peak.exp(x)
        want = np.exp(x.astype(np.float64))
        ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
        self.assertLessEqual(np.max(np.abs(got - want) / ulp), 1.0)
        self.assertEqual(peak.exp(np.array([-np.inf, 0, np.inf], np.float32)).tolist(),
                         [0.0, 1.0, np.inf])
        y = x.copy()
        self.assertIs(peak.exp(y, out=y), y)
        np.testing.assert_array_equal(y, got)

    def test_same_bits_every_tier(self):
        x = rand(4097, lo=-100, hi=100)
        want = peak.exp(x)
        for isa in peak.isa_names():
            if peak.isa_supported(isa):
                with peak.use_isa(isa):
                    np.testing.assert_array_equal(peak.exp(x), want, err_msg=isa)


def same_bytes(test, got, want, msg=""):
    """Every byte equal (NaNs and signed zeros included)."""
    test.assertEqual(got.shape, want.shape, msg)
    test.assertTrue(np.array_equal(np.ascontiguousarray(got).view(np.uint32),
                                   np.ascontiguousarray(want).view(np.uint32)), msg)


def every_function():
    """(name, fn(**where) -> output arrays) for every kernel function, on
    shapes big enough that a pool is used (well over 20 microseconds)."""
    d = 512
    pe = peak.pe_table(400, d)
    x3 = rand(4, 300, d)
    table = rand(1000, d)
    ids = RNG.integers(0, 1000, (4, 256))
    s = rand(2, 8, 96, 257, lo=-8, hi=8)
    keep = RNG.random((2, 1, 96, 257)) > 0.2
    q, k, v = rand(2, 8, 100, 64), rand(2, 2, 300, 64), rand(2, 2, 300, 48)
    qd, kd, vd = rand(1, 8, 1, 64), rand(1, 8, 4096, 64), rand(1, 8, 4096, 64)  # decode
    xl, rl, g, b = rand(1024, d), rand(1024, d), rand(d), rand(d)
    xe = rand((1 << 20) + 3, lo=-90, hi=90)
    merge_parts = [peak.attention(rand(2, 8, 200, 64), rand(2, 2, n, 64), rand(2, 2, n, 64),
                                  return_lse=True) for n in (100, 37, 64)]
    merge_parts[1][1][:, :, ::7] = -np.inf  # rows that part 1 did not see

    def pe_add(**w):
        y = x3.copy()
        peak.pe_add(y, 7, pe=pe, **w)
        z = x3.copy()
        peak.pe_add(z, 5, layout="split", **w)
        return y, z

    def layernorm(**w):
        s_out = np.empty_like(xl)
        y = peak.add_layernorm(xl, rl, g, b, sum_out=s_out, **w)
        return y, s_out, peak.add_layernorm(xl, **w)

    return [
        ("pe_table", lambda **w: (peak.pe_table(300, d, 11, **w),
                                  peak.pe_table(257, 96, layout="split", mode="torch_f32", **w))),
        ("pe_add", pe_add),
        ("embed_pe", lambda **w: (peak.embed_pe(ids, table, scale=22.6, **w),
                                  peak.embed_pe(ids, table, pe=pe, padding_idx=1, **w))),
        ("softmax", lambda **w: (peak.softmax(s, **w),
                                 peak.softmax(s, scale=0.5, causal=True, keep=keep, **w))),
        ("attention", lambda **w: (
            *peak.attention(q, k, v, return_lse=True, **w),
            *peak.attention(q, k, v, causal=True, align="bottom_right", return_lse=True, **w),
            *peak.attention(qd, kd, vd, key_len=[3000], return_lse=True, **w))),
        ("attention_merge", lambda **w: peak.attention_merge(merge_parts, return_lse=True, **w)),
        ("add_layernorm", layernorm),
        ("exp", lambda **w: (peak.exp(xe, **w),)),
    ]


def _pools_supported():
    try:
        peak.ThreadPool(1).close()
        return True
    except peak.Unsupported:
        return False


POOLS = _pools_supported()
needs_pools = unittest.skipUnless(POOLS, "libpeak built without pthreadpool (-Dpthreadpool="
                                         "disabled): ThreadPool() raises Unsupported")


@needs_pools
class Threads(unittest.TestCase):
    def test_same_bytes_at_any_thread_count(self):
        pools = [peak.ThreadPool(n) for n in (1, 2, 3)]
        try:
            for name, fn in every_function():
                want = fn()
                wheres = [dict(threads=n) for n in (1, 2, 3, 0)]
                wheres += [dict(pool=p) for p in pools]
                for w in wheres:
                    got = fn(**w)
                    self.assertEqual(len(got), len(want))
                    for i, (a, b) in enumerate(zip(got, want)):
                        same_bytes(self, a, b, f"{name} output {i}, {w}")
        finally:
            for p in pools:
                p.close()

    def test_python_threads_sharing_a_pool(self):
        """Several Python threads on one pool (their calls take turns) and
        on the shared threads=2 pool: the single-thread bytes every time."""
        q, k, v = rand(2, 4, 64, 32), rand(2, 4, 200, 32), rand(2, 4, 200, 32)
        want = peak.attention(q, k, v, causal=True)
        errors = []
        with peak.ThreadPool(2) as pool:
            def work(w):
                try:
                    for _ in range(10):
                        same_bytes(self, peak.attention(q, k, v, causal=True, **w), want)
                except Exception as e:  # noqa: BLE001 (reported below)
                    errors.append(e)

            threads = [threading.Thread(target=work, args=(w,))
                       for w in (dict(pool=pool), dict(pool=pool), dict(threads=2),
                                 dict(threads=2), dict())]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])


class ThreadPoolApi(unittest.TestCase):
    @unittest.skipIf(POOLS, "libpeak has pthreadpool")
    def test_without_pthreadpool(self):
        """threads=n still works (on the calling thread), ThreadPool() does not."""
        with self.assertRaises(peak.Unsupported):
            peak.ThreadPool(2)
        x = rand(1000)
        same_bytes(self, peak.exp(x, threads=2), peak.exp(x))
        self.assertEqual(peak._workers(threads=2), 1)

    @needs_pools
    def test_workers_and_lifetime(self):
        with peak.ThreadPool(3) as pool:
            self.assertEqual(pool.threads, 3)
            self.assertFalse(pool.closed)
            self.assertIn("threads=3", repr(pool))
            self.assertEqual(peak._workers(pool=pool), 3)
        self.assertTrue(pool.closed)
        self.assertIn("closed", repr(pool))
        pool.close()  # idempotent
        with self.assertRaises(ValueError):
            peak.exp(rand(8), pool=pool)
        with self.assertRaises(ValueError):
            with pool:
                pass
        online = os.sysconf("SC_NPROCESSORS_ONLN")
        with peak.ThreadPool() as pool:
            self.assertEqual(pool.threads, online)
        self.assertEqual(peak._workers(threads=0), online)
        self.assertEqual(peak._workers(), 1)
        self.assertEqual(peak._workers(threads=1), 1)
        self.assertEqual(peak._workers(threads=2), 2)

    @needs_pools
    def test_shared_pools_are_cached(self):
        self.assertIs(peak._shared_pool(2), peak._shared_pool(2))
        self.assertIsNot(peak._shared_pool(2), peak._shared_pool(3))

    @needs_pools
    def test_argument_errors(self):
        x = rand(8)
        with peak.ThreadPool(2) as pool:
            with self.assertRaises(ValueError):
                peak.exp(x, threads=2, pool=pool)
        for bad in (1.5, True, "2", [2]):
            with self.assertRaises(TypeError, msg=repr(bad)):
                peak.exp(x, threads=bad)
            with self.assertRaises(TypeError, msg=repr(bad)):
                peak.ThreadPool(bad)
        with self.assertRaises(ValueError):
            peak.exp(x, threads=-1)
        with self.assertRaises(ValueError):
            peak.ThreadPool(-2)
        with self.assertRaises(peak.OutOfRange):
            peak.exp(x, threads=2 ** 64)
        for bad in (2, "pool", object()):
            with self.assertRaises(TypeError, msg=repr(bad)):
                peak.exp(x, pool=bad)
        # checked before anything is computed or written
        y = x.copy()
        with self.assertRaises(ValueError):
            peak.exp(x, y, threads=-1)
        same_bytes(self, y, x)

    @needs_pools
    def test_copy_pickle_and_garbage_collection(self):
        import copy
        import gc
        import pickle
        pool = peak.ThreadPool(2)
        self.assertIs(copy.copy(pool), pool)
        self.assertIs(copy.deepcopy([pool])[0], pool)
        clone = pickle.loads(pickle.dumps(pool))
        self.assertIsNot(clone, pool)
        self.assertEqual(clone.threads, 2)
        x = rand(100000)
        same_bytes(self, peak.exp(x, pool=clone), peak.exp(x))
        fin = pool._finalizer
        del pool, clone
        gc.collect()
        self.assertFalse(fin.alive)  # destroyed on collection, not leaked

    @needs_pools
    def test_close_while_a_call_runs(self):
        """close() from another thread while calls run on the pool: the
        running call finishes (C's destroy waits for it), later ones raise."""
        x = rand(1 << 22)
        want = peak.exp(x)
        pool = peak.ThreadPool(2)
        results, errors = [], []

        def work():
            try:
                for _ in range(20):
                    results.append(peak.exp(x, pool=pool))
            except ValueError:
                pass  # closed
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=work)
        t.start()
        while not results and t.is_alive():
            pass
        pool.close()
        t.join()
        self.assertEqual(errors, [])
        for r in results:
            same_bytes(self, r, want)
        self.assertIsNone(pool._handle.ptr)

    @needs_pools
    @unittest.skipUnless(hasattr(os, "fork"), "needs os.fork")
    def test_fork(self):
        """A forked child cannot use its parent's pools (their threads are
        not there) but threads= makes new ones."""
        x = rand(300000)
        want = peak.exp(x)
        peak.exp(x, threads=2)  # the shared pool exists before the fork
        with peak.ThreadPool(2) as pool:
            pid = os.fork()
            if pid == 0:  # the child: no unittest machinery here
                code = 1
                try:
                    try:
                        peak.exp(x, pool=pool)
                    except RuntimeError:
                        if np.array_equal(peak.exp(x, threads=2), want):
                            code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            same_bytes(self, peak.exp(x, pool=pool), want)  # the parent's pool still works


def merge_bound(want, v):
    """peak.h: a merge of peak_attention() parts is peak_attention() over
    all the keys within its own bound (the 1e-5 * max|V| target, here for q,
    k in [-1, 1]) plus 2^-24 |O|; two such results differ by twice that."""
    return 2 * 1e-5 * np.abs(v).max() + 2.0 ** -24 * np.abs(want).max()


def lse_bound(want_lse):
    """Twice attention's lse bound, 4e-6 (1 + |lse|), plus one ULP."""
    a = np.abs(np.where(np.isfinite(want_lse), want_lse, 0))
    return 8e-6 * (1 + a) + np.spacing(a.astype(np.float32))


class AttentionMerge(unittest.TestCase):
    def setUp(self):
        B, H, Hkv, Lq, Lk = 2, 8, 2, 9, 203
        self.q, self.k = rand(B, H, Lq, 64), rand(B, Hkv, Lk, 64)
        self.v = rand(B, Hkv, Lk, 48)
        bias = np.where(RNG.random((B, 1, Lq, Lk)) < 0.2, -np.inf, rand(B, 1, Lq, Lk))
        bias[:, :, 1, 100:] = -np.inf  # row 1: nothing in the later parts
        bias[:, :, 2, :] = -np.inf     # row 2: nothing anywhere
        self.bias = bias.astype(np.float32)

    def parts(self, cuts, layout="bhld", **kw):
        q, k, v, bias = self.q, self.k, self.v, self.bias
        if layout == "blhd":
            q, k, v = (np.ascontiguousarray(a.transpose(0, 2, 1, 3)) for a in (q, k, v))
        edges = [0, *cuts, self.k.shape[2]]
        key = (lambda s: (slice(None), slice(None), s)) if layout == "bhld" else \
            (lambda s: (slice(None), s))
        return [peak.attention(q, k[key(slice(a, b))], v[key(slice(a, b))],
                               bias=bias[..., a:b], layout=layout, return_lse=True, **kw)
                for a, b in zip(edges, edges[1:])]

    def test_against_one_call(self):
        want, want_lse = peak.attention(self.q, self.k, self.v, bias=self.bias, return_lse=True)
        with np.errstate(divide="ignore"):  # log(0): lse -inf for row 2
            ref, _ = attention_ref(self.q, self.k, self.v, bias=self.bias)
        for cuts in ((101,), (100,), (1, 202), (50, 100, 150), (7, 8, 120, 200)):
            got, lse = peak.attention_merge(self.parts(cuts), return_lse=True)
            np.testing.assert_allclose(got, want, rtol=0, atol=merge_bound(want, self.v),
                                       err_msg=str(cuts))
            np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5, err_msg=str(cuts))
            finite = np.isfinite(want_lse)
            np.testing.assert_array_equal(np.isfinite(lse), finite)
            self.assertTrue(np.all(np.abs(lse[finite] - want_lse[finite])
                                   <= lse_bound(want_lse)[finite]))
            self.assertTrue(np.all(np.isneginf(lse[:, :, 2])))
            same_bytes(self, got[:, :, 2], np.zeros_like(got[:, :, 2]))  # +0.0 everywhere
            # without lse, the same bytes
            same_bytes(self, peak.attention_merge(self.parts(cuts)), got, str(cuts))

    def test_one_part_is_a_copy(self):
        (o, lse), = self.parts(())
        got, got_lse = peak.attention_merge([(o, lse)], return_lse=True)
        same_bytes(self, got, o)
        same_bytes(self, got_lse, lse)

    def test_same_bytes_whatever_the_layout_and_strides(self):
        parts = self.parts((60, 140))
        want, want_lse = peak.attention_merge(parts, return_lse=True)
        blhd = peak.attention_merge(self.parts((60, 140), layout="blhd"), layout="blhd")
        same_bytes(self, blhd.transpose(0, 2, 1, 3), want)
        # one part a strided view, another a copy: laid out differently (copied)
        o0 = np.ascontiguousarray(parts[0][0].transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
        mixed = [(o0, parts[0][1]), *parts[1:]]
        got, got_lse = peak.attention_merge(mixed, return_lse=True)
        same_bytes(self, got, want)
        same_bytes(self, got_lse, want_lse)
        # out with other strides: a slice of a wider buffer
        buf = np.full(want.shape[:3] + (64,), np.nan, np.float32)
        out = buf[..., :want.shape[3]]
        self.assertIs(peak.attention_merge(parts, out=out), out)
        same_bytes(self, out, want)

    def test_running_merge_in_place(self):
        parts = self.parts((70, 140))
        want, want_lse = peak.attention_merge(parts[:2], return_lse=True)
        acc, acc_lse = parts[0][0].copy(), parts[0][1].copy()
        res = peak.attention_merge([(acc, acc_lse), parts[1]], out=acc, lse_out=acc_lse)
        self.assertIs(res[0], acc)
        self.assertIs(res[1], acc_lse)
        same_bytes(self, acc, want)
        same_bytes(self, acc_lse, want_lse)
        peak.attention_merge([(acc, acc_lse), parts[2]], out=acc, lse_out=acc_lse)
        full = peak.attention(self.q, self.k, self.v, bias=self.bias)
        np.testing.assert_allclose(acc, full, rtol=0, atol=merge_bound(full, self.v))

    def test_order_is_fixed_by_the_caller(self):
        parts = self.parts((50, 100, 150))
        want = peak.attention_merge(parts)
        rev = peak.attention_merge(parts[::-1])
        np.testing.assert_allclose(rev, want, rtol=0, atol=merge_bound(want, self.v))
        for _ in range(3):
            same_bytes(self, peak.attention_merge(parts), want)

    def test_non_finite_lse(self):
        (o0, l0), (o1, l1) = self.parts((100,))
        l1 = l1.copy()
        l1[0, 0, 0] = np.nan
        l1[0, 0, 3] = np.inf
        got, lse = peak.attention_merge([(o0, l0), (o1, l1)], return_lse=True)
        self.assertTrue(np.all(np.isnan(got[0, 0, 0])) and np.isnan(lse[0, 0, 0]))
        self.assertTrue(np.all(np.isnan(got[0, 0, 3])) and np.isnan(lse[0, 0, 3]))
        self.assertFalse(np.any(np.isnan(got[0, 0, 1])))
        o1 = o1.copy()
        o1[1, 1, 2] = np.nan  # row 2 has lse -inf in every part: its O rows are not read
        same_bytes(self, peak.attention_merge([(o0, l0), (o1, l1)])[1, 1, 2],
                   np.zeros(o1.shape[3], np.float32))

    def test_errors(self):
        (o0, l0), (o1, l1) = self.parts((100,))
        with self.assertRaises(ValueError):
            peak.attention_merge([])
        with self.assertRaises(TypeError):
            peak.attention_merge([(o0,)])
        with self.assertRaises(TypeError):
            peak.attention_merge(5)
        with self.assertRaises(ValueError):
            peak.attention_merge([(o0, l0), (o1[:, :, :4], l1)])
        with self.assertRaises(ValueError):
            peak.attention_merge([(o0, l0), (o1, l1[:, :, :4])])
        with self.assertRaises(TypeError):
            peak.attention_merge([(o0, l0), (o1.astype(np.float64), l1)])
        with self.assertRaises(ValueError):
            peak.attention_merge([(o0, l0)], layout="bhdl")
        with self.assertRaises(ValueError):  # out on the second part: not in place
            peak.attention_merge([(o0, l0), (o1, l1)], out=o1)
        with self.assertRaises(ValueError):
            peak.attention_merge([(o0, l0), (o1, l1)], out=o0, lse_out=l1)
        with self.assertRaises(ValueError):
            peak.attention_merge([(o0, l0)], out=np.empty(o0.shape[:3] + (5,), np.float32))
        with self.assertRaises(ValueError):
            peak.attention_merge([(o0, l0)], threads=2, pool=peak._shared_pool(2))

    def test_threads(self):
        parts = self.parts((100,))
        want, want_lse = peak.attention_merge(parts, return_lse=True)
        for w in (dict(threads=1), dict(threads=2), dict(threads=3)):
            got, lse = peak.attention_merge(parts, return_lse=True, **w)
            same_bytes(self, got, want, str(w))
            same_bytes(self, lse, want_lse, str(w))


class Convert(unittest.TestCase):
    """peak.convert against NumPy's own float16 conversions (round to
    nearest even) and ml_dtypes' bfloat16 where it is installed."""

    @staticmethod
    def bits(a):
        return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)

    def test_float16_both_ways(self):
        h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
        wide = peak.convert(h, np.float32)
        ref = h.astype(np.float32)
        nan = np.isnan(ref)
        self.assertTrue(np.array_equal(self.bits(wide)[~nan], self.bits(ref)[~nan]))
        self.assertTrue(np.all(np.isnan(wide[nan])))
        self.assertTrue(np.all(self.bits(wide)[nan] & 0x400000))  # quiet
        x = np.concatenate([rand(100000, lo=-7e4, hi=7e4), rand(100000, lo=-1e-4, hi=1e-4),
                            np.array([65504, 65519.996, 65520, -65520, 2.0**-25, 3 * 2.0**-25,
                                      2.0**-24, 1e-45, -0.0, np.inf, -np.inf], np.float32)])
        for threads in (None, 3):
            got = peak.convert(x, np.float16, threads=threads)
            with np.errstate(over="ignore"):  # 65520 and beyond: inf, as intended
                ref16 = x.astype(np.float16)
            self.assertTrue(np.array_equal(self.bits(got), self.bits(ref16)))

    def test_bfloat16_against_ml_dtypes(self):
        try:
            import ml_dtypes
        except ImportError:
            self.skipTest("ml_dtypes is not installed (pip install ml_dtypes)")
        bf = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
        wide = peak.convert(bf, np.float32)
        ref = bf.astype(np.float32)
        ok = ~np.isnan(ref)
        self.assertTrue(np.array_equal(self.bits(wide)[ok], self.bits(ref)[ok]))
        x = rand(200000, lo=-3e38, hi=3e38) * rand(200000, lo=-1, hi=1) ** 20
        got = peak.convert(x, "bfloat16")
        self.assertEqual(got.dtype, ml_dtypes.bfloat16)
        self.assertTrue(np.array_equal(got.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16)))
        self.assertTrue(np.array_equal(peak.convert(got, np.float16).view(np.uint16),
                                       got.astype(np.float32).astype(np.float16).view(np.uint16)))

    def test_errors(self):
        x = rand(8)
        with self.assertRaises(TypeError):
            peak.convert(x.astype(np.float64), np.float16)
        with self.assertRaises(TypeError):
            peak.convert(x, np.int16)
        with self.assertRaises(ValueError):
            peak.convert(x, np.float16, out=np.empty(7, np.float16))
        with self.assertRaises(TypeError):
            peak.convert(x, np.float16, out=np.empty(8, np.float32))
        with self.assertRaises(ValueError):
            peak.convert(np.empty(0, np.float32), np.float16)
        buf = np.zeros(16, np.float32)
        with self.assertRaises(ValueError):  # out overlaps x across types
            peak.convert(buf, np.float16, out=buf.view(np.float16)[:16])
        same = rand(16)
        self.assertIs(peak.convert(same, np.float32, out=same), same)  # a copy onto itself
        try:
            import ml_dtypes  # noqa: F401
        except ImportError:
            with self.assertRaises(TypeError):
                peak.convert(x, "bfloat16")

    def test_cpu_features(self):
        names = {"f16c", "avx512_bf16", "avx512_fp16", "arm_fp16", "arm_bf16"}
        self.assertTrue(set(peak.cpu_features()) <= names)


if __name__ == "__main__":
    unittest.main()
