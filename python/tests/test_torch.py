"""peak.torch against PyTorch's own modules (torch.nn, torch.softmax).

Run: python3 python/tests/run.py torch (meson test: python-torch); skipped
when the interpreter cannot import torch (Debian: python3-torch).
"""
import inspect
import math
import unittest
from unittest import mock

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import peak
import peak.torch as pt
from test_numpy import POOLS

torch.manual_seed(0)




def same_bytes(test, got, want, msg=""):
    test.assertEqual(tuple(got.shape), tuple(want.shape), msg)
    test.assertTrue(torch.equal(got.contiguous().view(torch.int32),
                                want.contiguous().view(torch.int32)), msg)


class TorchPositionalEncoding(nn.Module):
    """The usual PyTorch PositionalEncoding module (max_len 5000), in
    substance: float32 arithmetic, batch-first [batch, seq, d_model], no
    dropout."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[:, :x.size(1)]


def exact_pe(max_len, d):
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class PositionalEncoding(unittest.TestCase):
    def test_torch_module(self):
        x = torch.randn(2, 50, 512)
        ref = TorchPositionalEncoding(512).eval()
        with torch.no_grad():
            # the float32 table of that module, reproduced
            ours = pt.PositionalEncoding(512, mode="torch_f32").eval()
            if torch.__version__.startswith("1.13"):
                # peak.h: within 2 ULP of torch 1.13's table
                ulp = torch.finfo(torch.float32).eps
                diff = (ours.pe - ref.pe).abs() / torch.clamp(ref.pe.abs(), min=2 ** -10)
                self.assertLessEqual(diff.max().item(), 2 * ulp)
                torch.testing.assert_close(ours(x), ref(x), atol=2 ** -21, rtol=0)
            else:
                # another torch (2.15) rounds exp(div_term) differently in
                # some columns, and the float angles with it: the two
                # tables differ by up to 2.4e-4 (measured), the float
                # rounding of angles up to 5000, not 2 ULP
                torch.testing.assert_close(ours.pe, ref.pe, atol=5e-4, rtol=0)
                torch.testing.assert_close(ours(x), ref(x), atol=5e-4, rtol=0)
            # the default table: the formula in float64, to 2^-23
            exact = pt.PositionalEncoding(512).eval()
            err = (exact.pe[0].double() - exact_pe(5000, 512)).abs().max().item()
            self.assertLessEqual(err, 2 ** -23)
            self.assertFalse(torch.equal(exact(x), x))  # out of place
            self.assertTrue(torch.equal(exact(x), x + exact.pe[:, :50]))

    def test_seq_first_and_training_fallback(self):
        m = pt.PositionalEncoding(64, max_len=100, batch_first=False)
        x = torch.randn(30, 3, 64)
        with torch.no_grad():
            torch.testing.assert_close(m(x), x + m.pe[0, :30].unsqueeze(1), atol=0, rtol=0)
        xg = x.clone().requires_grad_()
        m(xg).sum().backward()  # PyTorch's own code path: differentiable
        self.assertTrue(torch.equal(xg.grad, torch.ones_like(x)))


class Attention(unittest.TestCase):
    def test_against_torch_math(self):
        q, k, v = torch.randn(2, 8, 10, 64), torch.randn(2, 2, 17, 64), torch.randn(2, 2, 17, 32)
        mask = torch.rand(10, 17) > 0.3
        mask[:, 0] = True
        bias = torch.randn(2, 1, 10, 17)
        for kw in (dict(), dict(attn_mask=mask), dict(attn_mask=bias), dict(scale=0.2)):
            with torch.no_grad():
                got = pt.scaled_dot_product_attention(q, k, v, **kw)
                want = pt._attention_reference(q, k, v, **kw)
            torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4, msg=str(kw.keys()))
        q2, k2, v2 = torch.randn(2, 4, 12, 16), torch.randn(2, 4, 12, 16), torch.randn(2, 4, 12, 16)
        with torch.no_grad():
            torch.testing.assert_close(
                pt.scaled_dot_product_attention(q2, k2, v2, is_causal=True),
                pt._attention_reference(q2, k2, v2, is_causal=True), atol=2e-5, rtol=1e-4)

    def test_against_nn_multihead_attention(self):
        """nn.MultiheadAttention with its projections set to the identity is
        bare multi-head attention: peak must agree with it, key padding and
        a causal mask included."""
        E, H, B, Lq, Lk = 64, 4, 2, 7, 11
        mha = nn.MultiheadAttention(E, H, batch_first=True, bias=False).eval()
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
            mha.out_proj.weight.copy_(torch.eye(E))
        x, mem = torch.randn(B, Lq, E), torch.randn(B, Lk, E)
        lengths = torch.tensor([11, 5])
        pad = torch.arange(Lk)[None] >= lengths[:, None]  # True = padding (torch's sense)
        with torch.no_grad():
            want, _ = mha(x, mem, mem, key_padding_mask=pad, need_weights=False)
            q = x.view(B, Lq, H, E // H).numpy()
            kv = mem.view(B, Lk, H, E // H).numpy()
            got = peak.attention(q, kv, kv, layout="blhd", key_len=lengths.numpy())
        np.testing.assert_allclose(got.reshape(B, Lq, E), want.numpy(), atol=2e-5)
        causal = torch.triu(torch.ones(Lq, Lq, dtype=torch.bool), 1)  # True = masked
        with torch.no_grad():
            want, _ = mha(x, x, x, attn_mask=causal, need_weights=False)
            got = peak.attention(q, q, q, layout="blhd", causal=True)
        np.testing.assert_allclose(got.reshape(B, Lq, E), want.numpy(), atol=2e-5)

    def test_refuses_autograd(self):
        q = torch.randn(1, 2, 3, 4, requires_grad=True)
        with self.assertRaises(RuntimeError):
            pt.scaled_dot_product_attention(q, q, q)
        with torch.no_grad():
            pt.scaled_dot_product_attention(q, q, q)
        with self.assertRaises(TypeError):
            pt.scaled_dot_product_attention(q.double().detach(), q.double().detach(),
                                            q.double().detach())

    def test_return_lse(self):
        q, k, v = torch.randn(2, 4, 9, 16), torch.randn(2, 4, 13, 16), torch.randn(2, 4, 13, 16)
        out, lse = pt.scaled_dot_product_attention(q, k, v, return_lse=True)
        s = q.double() @ k.double().transpose(-2, -1) / 4.0
        torch.testing.assert_close(lse, torch.logsumexp(s, -1).float(), atol=4e-5, rtol=0)
        torch.testing.assert_close(out, pt.scaled_dot_product_attention(q, k, v))
        o3, l3 = pt.scaled_dot_product_attention(q[0], k[0], v[0], return_lse=True)
        self.assertEqual(tuple(o3.shape), (4, 9, 16))
        self.assertEqual(tuple(l3.shape), (4, 9))
        same_bytes(self, l3, lse[0])

    def test_half_tensors(self):
        """float16 and bfloat16 query/key/value, read in place: the float64
        attention of the 16-bit values within 2e-5 plus half an ULP of the
        output's type (query's), and torch 2.x's own scaled_dot_product_attention
        in that type within a few of its ULPs."""
        bf16 = peak._bfloat16() is not None
        q, k, v = torch.randn(2, 8, 10, 64), torch.randn(2, 2, 300, 64), torch.randn(2, 2, 300, 64)
        dec = torch.randn(2, 8, 1, 64)
        for dt, ulp in ((torch.float16, 2.0 ** -10), (torch.bfloat16, 2.0 ** -7)):  # relative
            if dt == torch.bfloat16 and not bf16:
                with self.assertRaises(TypeError):
                    pt.scaled_dot_product_attention(q.to(dt), k.to(dt), v.to(dt))
                continue
            for qq, kw in ((q, {}), (q, {"is_causal": True}), (dec, {})):
                for qt in (dt, torch.float32):  # all 16-bit; float32 query over a 16-bit cache
                    hq, hk, hv = qq.to(qt), k.to(dt), v.to(dt)
                    with torch.no_grad():
                        got = pt.scaled_dot_product_attention(hq, hk, hv, **kw)
                        want = pt._attention_reference(hq.double(), hk.double(), hv.double(),
                                                       **kw)
                    self.assertEqual(got.dtype, qt)
                    err = (got.double() - want).abs()
                    bound = 2e-5 + (ulp / 2 * want.abs() if qt == dt else 0)
                    self.assertTrue(bool((err <= bound).all()),
                                    f"{dt} query {qt} {kw}: max error {err.max().item():.3g}")
                    if hasattr(torch.nn.functional, "scaled_dot_product_attention") and qt == dt:
                        with torch.no_grad():
                            ref = torch.nn.functional.scaled_dot_product_attention(
                                hq, hk.repeat_interleave(4, 1), hv.repeat_interleave(4, 1),
                                **kw)
                        self.assertLessEqual((got.double() - ref.double()).abs().max().item(),
                                             4 * ulp * want.abs().max().item(), f"{dt} {kw}")
        with torch.no_grad():  # the input is not copied: a view of peak's 16-bit output
            out = pt.scaled_dot_product_attention(q.half(), k.half(), v.half())
        self.assertEqual(out.dtype, torch.float16)
        # A 16-bit float mask (torch takes the query's type) is widened: the
        # call equals the one with the float32 mask of the same values, bit
        # for bit, with or without ml_dtypes, for attention and softmax.
        mask = torch.randn(10, 300) * 3
        mask[:, ::7] = -float("inf")
        for mt in (torch.float16, torch.bfloat16):
            m16 = mask.to(mt)
            with torch.no_grad():
                for hq in (q, q.half()):
                    same_bytes(self, pt.scaled_dot_product_attention(hq, k, v, attn_mask=m16),
                               pt.scaled_dot_product_attention(hq, k, v, attn_mask=m16.float()))
            s = torch.randn(2, 8, 10, 300)
            same_bytes(self, pt.softmax(s, attn_mask=m16), pt.softmax(s, attn_mask=m16.float()))
        with self.assertRaises(TypeError):  # not a float or bool mask
            pt.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(10, 300, dtype=torch.int32))

    def test_enable_gqa_and_signature(self):
        """torch 2.x's signature, positional arguments included; enable_gqa
        True takes Hkv dividing H, False PyTorch's rule (Hkv = H, or 1
        broadcast), each raising RuntimeError as torch does, and the
        default None peak's own (Hkv dividing H, ValueError otherwise)."""
        q, k, v = torch.randn(2, 8, 6, 16), torch.randn(2, 2, 9, 16), torch.randn(2, 2, 9, 8)
        with torch.no_grad():
            want = pt.scaled_dot_product_attention(q, k, v, is_causal=True)
            for got in (pt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                        pt.scaled_dot_product_attention(q, k, v, None, 0.0, True, None, True)):
                same_bytes(self, got, want)
            torch.testing.assert_close(
                want, pt._attention_reference(q, k, v, is_causal=True), atol=2e-5, rtol=1e-4)
            if hasattr(F, "scaled_dot_product_attention") and \
                    "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or ""):
                torch.testing.assert_close(
                    want, F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                         enable_gqa=True),
                    atol=2e-5, rtol=1e-4)
            with self.assertRaises(RuntimeError):
                pt.scaled_dot_product_attention(q, k, v, enable_gqa=False)
            k1, v1 = k[:, :1], v[:, :1]  # one K/V head: broadcast, as torch
            same_bytes(self, pt.scaled_dot_product_attention(q, k1, v1, enable_gqa=False),
                       pt.scaled_dot_product_attention(q, k1, v1))
            same_bytes(self, pt.scaled_dot_product_attention(q[:, :2], k, v, enable_gqa=False),
                       pt.scaled_dot_product_attention(q[:, :2], k, v))
            k3, v3 = torch.randn(2, 3, 9, 16), torch.randn(2, 3, 9, 8)
            with self.assertRaises(RuntimeError):
                pt.scaled_dot_product_attention(q, k3, v3, enable_gqa=True)
            with self.assertRaises(ValueError):
                pt.scaled_dot_product_attention(q, k3, v3)
            with self.assertRaises(ValueError):
                pt.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
            with self.assertRaises(ValueError):  # batch differs
                pt.scaled_dot_product_attention(q, k[:1], v[:1])


TIERS = [isa for isa in peak.isa_names() if peak.isa_supported(isa) and
         peak.isa_names().index(isa) <= peak.isa_names().index(peak.isa_active())]
TANH_ULP = 1  # the library's float tanh: 0.959 ULP at most (kernels/tanh.h)


def _head_values(a, H):
    """A per-head option as float64 [H] (the float32 values peak reads)."""
    if isinstance(a, torch.Tensor):
        a = a.detach().float()
    return torch.as_tensor(np.asarray(a, np.float32)).double().reshape(-1).expand(H)


def _alibi_distance(Lq, Lk, form):
    d = torch.arange(Lq)[:, None] - torch.arange(Lk)[None, :]  # qpos = i: SDPA is top-left
    return d.abs() if form == "symmetric" else d


def _mask_scores(s, attn_mask, is_causal):
    if is_causal:
        lq, lk = s.size(-2), s.size(-1)
        s = s.masked_fill(~torch.ones(lq, lk, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask.double()
    return s


def _sink_softmax(s, sinks):
    """softmax over the last axis with a sink column joined, then dropped;
    and the log-sum-exp, the sink's term included."""
    if sinks is None:
        return torch.softmax(s, -1), torch.logsumexp(s, -1)
    H = s.size(-3)
    col = _head_values(sinks, H).view(H, 1, 1).expand(*s.shape[:-1], 1)
    s = torch.cat([s, col], -1)
    return torch.softmax(s, -1)[..., :-1], torch.logsumexp(s, -1)


def attention_long_way(q, k, v, attn_mask=None, is_causal=False, scale=None, softcap=None,
                       alibi=None, alibi_slopes=None, sinks=None):
    """The logit options the long way, in float64 (peak.h's order): scores
    q k^T * scale; cap * tanh(s / cap); an ALiBi bias tensor -slope[h] *
    (i - j) (or |i - j|); the masks; a sink column concatenated before the
    softmax and dropped after it; K/V heads repeated for GQA."""
    q, k, v = q.double(), k.double(), v.double()
    H, Lq, Lk = q.size(-3), q.size(-2), k.size(-2)
    if k.size(-3) != H:
        g = H // k.size(-3)
        k, v = k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else float(np.float32(scale))
    s = q @ k.transpose(-2, -1) * scale
    if softcap:
        c = float(np.float32(softcap))  # the cap peak reads
        s = c * torch.tanh(s / c)
    if alibi:
        slopes = peak.alibi_slopes(H) if alibi_slopes is None else alibi_slopes
        s = s - _head_values(slopes, H).view(H, 1, 1) * _alibi_distance(Lq, Lk, alibi).double()
    p, lse = _sink_softmax(_mask_scores(s, attn_mask, is_causal), sinks)
    return p @ v, lse


def softmax_long_way(x, scale=1.0, softcap=None, alibi=None, alibi_slopes=None, sinks=None,
                     attn_mask=None, is_causal=False):
    """peak.softmax's scores formed in float32 by torch, one rounded
    operation each as peak.h says (tanh correctly rounded), the softmax
    with its sink column in float64.  Also returns how far the library's
    scores may be from these: its own tanh is within TANH_ULP ULP, and each
    later rounding may then differ by an ULP."""
    H, Lq, Lk = x.shape[-3:]
    s = x * scale
    delta = torch.zeros(x.shape, dtype=torch.float64)
    if softcap:
        c = torch.tensor(softcap, dtype=torch.float32)
        s = c * torch.tanh((s / c).double()).float()
        delta = (TANH_ULP + 1.5) * 2.0 ** -23 * s.double().abs()
    if alibi:
        slopes = torch.from_numpy(peak.alibi_slopes(H)) if alibi_slopes is None else \
            _head_values(alibi_slopes, H).float()
        s = s - slopes.view(H, 1, 1) * _alibi_distance(Lq, Lk, alibi).float()
        if softcap:
            delta = delta + 2.0 ** -23 * s.double().abs()
    p, _ = _sink_softmax(_mask_scores(s.double(), attn_mask, is_causal), sinks)
    return p, delta


class LogitOptions(unittest.TestCase):
    """pt.scaled_dot_product_attention's softcap, alibi and sinks (and
    peak.softmax's) against PyTorch computing them the long way, on every
    tier up to the automatic one."""

    def check_attention(self, q, k, v, msg, **kw):
        with torch.no_grad():
            got, lse = pt.scaled_dot_product_attention(q, k, v, return_lse=True, **kw)
        want, want_lse = attention_long_way(q, k, v, **kw)
        # peak.h: O within 1e-5 max|V| of the exact attention, lse within
        # 4e-6 (1 + |lse|)
        torch.testing.assert_close(got.double(), want, atol=1e-5 * v.abs().max().item(), rtol=0,
                                   msg=msg)
        tol = 4e-6 * (1 + want_lse.abs())
        self.assertTrue(bool(((lse.double() - want_lse).abs() <= tol).all()), msg)

    def test_attention(self):
        B, H, Hkv, Lq, Lk = 2, 8, 2, 10, 17
        q, k, v = torch.rand(B, H, Lq, 64) * 2 - 1, torch.rand(B, Hkv, Lk, 64) * 2 - 1, \
            torch.rand(B, Hkv, Lk, 32) * 2 - 1
        mask = torch.rand(Lq, Lk) > 0.3
        mask[:, 0] = True
        bias = torch.randn(B, 1, Lq, Lk)
        slopes = torch.rand(H) * 0.5
        sinks = torch.randn(H)
        cases = [
            dict(softcap=1.0),
            dict(softcap=0.3, is_causal=True),
            dict(alibi="causal"),
            dict(alibi="causal", is_causal=True),
            dict(alibi="symmetric", alibi_slopes=slopes),
            dict(alibi="causal", alibi_slopes=slopes.numpy(), attn_mask=mask),
            dict(sinks=sinks),
            dict(sinks=-0.5, is_causal=True),
            dict(sinks=sinks.tolist(), attn_mask=bias),
            dict(softcap=2.0, alibi="causal", sinks=sinks, is_causal=True),
            dict(softcap=4.0, alibi="symmetric", alibi_slopes=slopes, sinks=0.25, attn_mask=mask,
                 scale=0.3),
            dict(softcap=4.0, alibi="causal", sinks=sinks, attn_mask=bias),
        ]
        for isa in TIERS:
            with peak.use_isa(isa):
                for kw in cases:
                    with self.subTest(isa=isa, options=sorted(kw)):
                        self.check_attention(q, k, v, f"{isa} {sorted(kw)}", **kw)

    def test_attention_fully_masked_row_with_sink(self):
        q, k, v = torch.rand(1, 2, 4, 16), torch.rand(1, 2, 6, 16), torch.rand(1, 2, 6, 16)
        mask = torch.ones(4, 6, dtype=torch.bool)
        mask[2] = False  # row 2 sees no key: O = 0, lse = the sink
        sinks = torch.tensor([0.5, -1.5])
        for isa in TIERS:
            with self.subTest(isa=isa), peak.use_isa(isa):
                self.check_attention(q, k, v, isa, attn_mask=mask, sinks=sinks, softcap=3.0,
                                     alibi="causal")
                out, lse = pt.scaled_dot_product_attention(q, k, v, attn_mask=mask, sinks=sinks,
                                                           return_lse=True)
                self.assertTrue(bool((out[:, :, 2] == 0).all()))
                same_bytes(self, lse[0, :, 2], sinks)

    def test_softmax(self):
        H, Lq, Lk = 4, 7, 40
        x = torch.rand(2, H, Lq, Lk) * 12 - 6
        mask = torch.rand(Lq, Lk) > 0.2
        sinks = torch.randn(H)
        cases = [dict(softcap=2.5), dict(softcap=20.0, scale=3.0), dict(alibi="causal"),
                 dict(alibi="symmetric", alibi_slopes=torch.rand(H)), dict(sinks=sinks),
                 dict(sinks=sinks, is_causal=True),
                 dict(softcap=3.0, alibi="causal", sinks=sinks, attn_mask=mask)]
        flt_min = torch.finfo(torch.float32).tiny
        for isa in TIERS:
            with peak.use_isa(isa):
                for kw in cases:
                    with self.subTest(isa=isa, options=sorted(kw)):
                        want, delta = softmax_long_way(x, **kw)
                        pk = dict(kw)
                        m = pk.pop("attn_mask", None)
                        pk["causal"] = pk.pop("is_causal", False)
                        if isinstance(pk.get("sinks"), torch.Tensor):
                            pk["sinks"] = pk["sinks"].numpy()
                        if isinstance(pk.get("alibi_slopes"), torch.Tensor):
                            pk["alibi_slopes"] = pk["alibi_slopes"].numpy()
                        got = torch.from_numpy(peak.softmax(
                            x.numpy(), keep=None if m is None else m.numpy(), **pk)).double()
                        # peak.h: 4 ULP of the exact softmax of the float
                        # scores; with a cap, plus a factor e^(2 max delta)
                        ulp = torch.from_numpy(np.spacing(want.float().numpy())).double()
                        tol = 4 * ulp
                        if kw.get("softcap"):
                            tol = tol + 2 * delta.amax(-1, keepdim=True) * want
                        tol = torch.where(want < flt_min, torch.full_like(tol, flt_min), tol)
                        self.assertTrue(bool(((got - want).abs() <= tol).all()),
                                        f"{isa} {sorted(kw)}: max |err| / tol "
                                        f"{((got - want).abs() / tol).max().item():.3g}")

    def test_arguments(self):
        q, k, v = torch.rand(4, 5, 16), torch.rand(4, 7, 16), torch.rand(4, 7, 16)  # 3-D
        sinks = nn.Parameter(torch.randn(4))  # gpt-oss keeps its sinks as a parameter
        with torch.no_grad():
            got = pt.scaled_dot_product_attention(q, k, v, sinks=sinks, alibi="causal")
            want = pt.scaled_dot_product_attention(q[None], k[None], v[None],
                                                   sinks=sinks.detach().numpy(),
                                                   alibi="causal")[0]
            same_bytes(self, got, want)
            same_bytes(self, pt.scaled_dot_product_attention(q, k, v, sinks=sinks.double()),
                       pt.scaled_dot_product_attention(q, k, v, sinks=sinks.detach()))
            for bad, exc in ((dict(sinks=torch.arange(4)), TypeError),
                             (dict(sinks=torch.ones(3)), ValueError),
                             (dict(alibi="left"), ValueError),
                             (dict(alibi_slopes=torch.ones(4)), ValueError),
                             (dict(softcap=-1.0), peak.InvalidArgument)):
                with self.assertRaises(exc, msg=str(bad)):
                    pt.scaled_dot_product_attention(q, k, v, **bad)
        with self.assertRaises(RuntimeError):  # a parameter that records grad
            pt.scaled_dot_product_attention(q, k, v, sinks=sinks)


class AttentionMerge(unittest.TestCase):
    def test_against_one_call(self):
        """Keys split in three (a strided view each), merged: the one call
        over all keys within peak.h's bound (2 x attention's 1e-5 max|V|
        target + 2^-24 |O|); 3-D inputs; the order fixed by the caller."""
        q, k, v = torch.rand(2, 8, 6, 32) * 2 - 1, torch.rand(2, 4, 90, 32) * 2 - 1, \
            torch.rand(2, 4, 90, 16) * 2 - 1
        mask = torch.rand(6, 90) > 0.3
        mask[3, 30:] = False  # row 3 sees only the first part
        with torch.no_grad():
            want, want_lse = pt.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                             return_lse=True)
            parts = [pt.scaled_dot_product_attention(q, k[:, :, a:b], v[:, :, a:b],
                                                     attn_mask=mask[:, a:b], return_lse=True)
                     for a, b in ((0, 30), (30, 61), (61, 90))]
            got, lse = pt.attention_merge(parts, return_lse=True)
        bound = 2e-5 * v.abs().max().item() + 2.0 ** -24 * want.abs().max().item()
        torch.testing.assert_close(got, want, atol=bound, rtol=0)
        torch.testing.assert_close(lse, want_lse, atol=8e-6 * (1 + want_lse.abs().max().item()),
                                   rtol=0)
        same_bytes(self, pt.attention_merge(parts), got)
        o3 = pt.attention_merge([(o[0], l[0]) for o, l in parts])
        same_bytes(self, o3, got[0])
        rev = pt.attention_merge(parts[::-1])
        torch.testing.assert_close(rev, want, atol=bound, rtol=0)
        with self.assertRaises(TypeError):
            pt.attention_merge([(parts[0][0].double(), parts[0][1])])
        with self.assertRaises(TypeError):
            pt.attention_merge([parts[0][0]])


class EmbedPe(unittest.TestCase):
    def test_half_tensors(self):
        """float16 and bfloat16 weights, read in place: torch's float32
        F.embedding(ids, weight) * scale + pe of the widened weight, rounded
        once, bit for bit; and F.embedding in the weight's type (its
        product and sum each rounded in that type) within two of its ULPs."""
        weight, pe = torch.randn(300, 96) * 0.1, torch.randn(20, 96)
        ids = torch.randint(0, 300, (3, 20))
        for dt, ulp in ((torch.float32, 0.0), (torch.float16, 2.0 ** -10),
                        (torch.bfloat16, 2.0 ** -7)):
            if dt == torch.bfloat16 and peak._bfloat16() is None:
                with self.assertRaises(TypeError):
                    pt.embed_pe(ids, weight.to(dt), pe=pe)
                continue
            w = weight.to(dt)
            got = pt.embed_pe(ids, w, 4.0, pe=pe)
            self.assertEqual(got.dtype, dt)
            want = (F.embedding(ids, w.float()) * 4.0 + pe[None]).to(dt)
            self.assertTrue(torch.equal(got.view(-1).float(), want.view(-1).float()))
            theirs = F.embedding(ids, w) * 4.0 + pe[None].to(dt)
            self.assertLessEqual((got.double() - theirs.double()).abs().max().item(),
                                 2 * ulp * theirs.double().abs().max().item(), f"{dt}")
            fly = pt.embed_pe(ids, w, 4.0)  # the sinusoid on the fly
            table = torch.from_numpy(peak.pe_table(20, 96))
            self.assertTrue(torch.equal(
                fly.float(), (F.embedding(ids, w.float()) * 4.0 + table[None]).to(dt).float()))


class LayerNorm(unittest.TestCase):
    def test_drop_in(self):
        ln = nn.LayerNorm(512).eval()
        with torch.no_grad():
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
        ours = pt.LayerNorm.from_module(ln).eval()
        x, r = torch.randn(2, 50, 512), torch.randn(2, 50, 512)
        with torch.no_grad():
            torch.testing.assert_close(ours(x), ln(x), atol=1e-5, rtol=1e-5)
            y, s = pt.add_layer_norm(x, r, ln.weight, ln.bias)
            torch.testing.assert_close(y, ln(x + r), atol=1e-5, rtol=1e-5)
            self.assertTrue(torch.equal(s, x + r))
        out = ours(x.requires_grad_())  # training: PyTorch's code, gradients flow
        out.sum().backward()
        self.assertIsNotNone(ours.weight.grad)

    def test_half_tensors(self):
        """float16 and bfloat16 x and residual, read in place: the float64
        LayerNorm of x + r (the 16-bit values, added exactly) within half an
        ULP of the type plus 1e-5 (the float32 bound), the sum x + r rounded
        once, and torch's own F.layer_norm in that type (of its rounded
        x + r) within four of its ULPs at the largest output."""
        ln = nn.LayerNorm(768).eval()
        with torch.no_grad():
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
        x, r = torch.randn(3, 40, 768) * 3 + 1, torch.randn(3, 40, 768)
        for dt, ulp in ((torch.float16, 2.0 ** -10), (torch.bfloat16, 2.0 ** -7)):  # relative
            if dt == torch.bfloat16 and peak._bfloat16() is None:
                with self.assertRaises(TypeError):
                    pt.layer_norm(x.to(dt), (768,))
                continue
            hx, hr = x.to(dt), r.to(dt)
            with torch.no_grad():
                y, s = pt.add_layer_norm(hx, hr, ln.weight, ln.bias)
                self.assertEqual((y.dtype, s.dtype), (dt, dt))
                self.assertTrue(torch.equal(s, (hx.float() + hr.float()).to(dt)))
                exact = hx.double() + hr.double()  # normalised before any rounding
                want = F.layer_norm(exact, (768,), ln.weight.double(), ln.bias.double())
                err = (y.double() - want).abs()
                self.assertTrue(bool((err <= 1e-5 + ulp / 2 * want.abs()).all()),
                                f"{dt}: max error {err.max().item():.3g}")
                theirs = self._torch_layer_norm(hx + hr, ln.weight.to(dt), ln.bias.to(dt))
                scale = want.abs().max().item()
                self.assertLessEqual((y.double() - theirs.double()).abs().max().item(),
                                     4 * ulp * scale, f"{dt}")
                half = pt.LayerNorm.from_module(ln).to(dt).eval()  # a 16-bit module
                got = half(hx)
                self.assertEqual(got.dtype, dt)
                theirs = self._torch_layer_norm(hx, half.weight, half.bias)
                self.assertLessEqual((got.double() - theirs.double()).abs().max().item(),
                                     4 * ulp * theirs.double().abs().max().item(), f"{dt}")

    def test_half_module_beyond_peaks_rows(self):
        """A 16-bit row longer than peak takes (16384) falls back to
        PyTorch's own LayerNorm instead of raising."""
        ln = pt.LayerNorm(16385).to(torch.bfloat16).eval()
        x = torch.randn(2, 16385).to(torch.bfloat16)
        with torch.no_grad():
            self.assertTrue(torch.equal(ln(x), nn.LayerNorm.forward(ln, x)))

    @staticmethod
    def _torch_layer_norm(x, w, b):
        try:
            return F.layer_norm(x, (x.shape[-1],), w, b)
        except RuntimeError:  # torch 1.13 has no CPU float16 LayerNorm: its float32, rounded
            return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float()).to(x.dtype)

    def test_encoder_layer_norms_swapped(self):
        """A whole nn.TransformerEncoderLayer keeps its output when its two
        LayerNorms are replaced by peak's.  train() with dropout 0: in eval
        mode torch 1.13 takes a fused "fast path" that reads the norms'
        weights without calling them, which would test nothing."""
        calls = []

        class Counted(pt.LayerNorm):
            def forward(self, x):
                calls.append(1)
                return super().forward(x)

        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).train()
        x = torch.randn(2, 9, 64)
        with torch.no_grad():
            want = layer(x)
            layer.norm1 = Counted.from_module(layer.norm1)
            layer.norm2 = Counted.from_module(layer.norm2)
            torch.testing.assert_close(layer(x), want, atol=2e-5, rtol=1e-5)
        self.assertEqual(len(calls), 2)


@unittest.skipUnless(POOLS, "libpeak built without pthreadpool: ThreadPool() raises Unsupported")
class Threads(unittest.TestCase):
    def setUp(self):
        self.saved = torch.get_num_threads()

    def tearDown(self):
        torch.set_num_threads(self.saved)

    def calls(self):
        """(name, fn(**where) -> tensors) for every peak.torch entry point."""
        q, k, v = torch.randn(2, 8, 50, 64), torch.randn(2, 2, 300, 64), torch.randn(2, 2, 300, 32)
        mask = torch.rand(50, 300) > 0.3
        x, r = torch.randn(4, 100, 512), torch.randn(4, 100, 512)
        w, b = torch.randn(512), torch.randn(512)
        parts = [pt.scaled_dot_product_attention(q, k[:, :, a:b], v[:, :, a:b], return_lse=True)
                 for a, b in ((0, 100), (100, 250), (250, 300))]
        sinks = torch.randn(8)

        def modules(**where):
            ln = pt.LayerNorm(512, **where).eval()
            pe = pt.PositionalEncoding(512, max_len=200, **where)
            with torch.no_grad():
                return ln(x), pe(x), pe.pe

        return [
            ("scaled_dot_product_attention", lambda **wh: (
                *pt.scaled_dot_product_attention(q, k, v, return_lse=True, **wh),
                pt.scaled_dot_product_attention(q, k, v, attn_mask=mask, **wh),
                *pt.scaled_dot_product_attention(q, k, v, is_causal=True, softcap=5.0,
                                                 alibi="causal", sinks=sinks,
                                                 return_lse=True, **wh))),
            ("attention_merge", lambda **wh: pt.attention_merge(parts, return_lse=True, **wh)),
            ("add_layer_norm", lambda **wh: pt.add_layer_norm(x, r, w, b, **wh)),
            ("layer_norm", lambda **wh: (pt.layer_norm(x, (512,), w, b, **wh),)),
            ("modules", modules),
        ]

    def test_default_is_torch_get_num_threads(self):
        seen = []
        real = peak._Run

        def spy(threads, pool):
            seen.append((threads, pool))
            return real(threads, pool)

        for n in (1, 2, 3):
            torch.set_num_threads(n)
            n = torch.get_num_threads()  # what this build of torch took
            with mock.patch.object(peak, "_Run", spy):
                for name, fn in self.calls():
                    seen.clear()
                    fn()
                    self.assertTrue(seen, name)
                    self.assertEqual(set(seen), {(n, None)}, name)
                    seen.clear()
                    fn(threads=3)
                    self.assertEqual(set(seen), {(3, None)}, name)
                    with pt.ThreadPool(2) as pool:
                        seen.clear()
                        fn(pool=pool)
                        self.assertEqual(set(seen), {(None, pool)}, name)

    def test_same_bytes_at_any_thread_count(self):
        torch.set_num_threads(1)
        for name, fn in self.calls():
            want = fn()
            with peak.ThreadPool(3) as pool:
                for where in (dict(threads=1), dict(threads=2), dict(threads=3),
                              dict(pool=pool)):
                    for i, (a, b) in enumerate(zip(fn(**where), want)):
                        same_bytes(self, a, b, f"{name} output {i}, {where}")
            torch.set_num_threads(2)
            for i, (a, b) in enumerate(zip(fn(), want)):
                same_bytes(self, a, b, f"{name} output {i}, torch threads 2")
            torch.set_num_threads(1)


def bits(t):
    """t's bytes as integers (float32, float16 and bfloat16 alike)."""
    t = t.contiguous()
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16)


class Softmax(unittest.TestCase):
    def test_against_torch(self):
        """pt.softmax as torch.softmax: float32, float16 and bfloat16 in,
        the same type out (or dtype='s), any dim, any number of axes;
        within peak.h's 4 float32 ULP of the float64 softmax of the
        input's values, plus half an ULP of a 16-bit result."""
        x = torch.randn(2, 3, 5, 40) * 4
        src = torch.randn(2 * 2 * 3 * 4 * 40) * 4
        types = [(torch.float32, 0.0), (torch.float16, 2.0 ** -10)]
        if peak._bfloat16() is not None:
            types.append((torch.bfloat16, 2.0 ** -7))
        for dt, ulp in types:
            for shape, dim in (((2, 3, 5, 40), -1), ((2, 3, 5, 40), 1), ((40,), 0),
                               ((2, 2, 3, 4, 40), -1), ((2, 2, 3, 4, 40), 2), ((6, 40), 0)):
                xx = src[:math.prod(shape)].reshape(shape).to(dt)
                with torch.no_grad():
                    got = pt.softmax(xx, dim)
                self.assertEqual((got.dtype, got.shape), (dt, xx.shape))
                want = torch.softmax(xx.double(), dim)
                err = (got.double() - want).abs()
                fi = torch.finfo(dt)  # results below tiny: subnormal steps, absolute
                bound = (4 * 2.0 ** -23 + ulp / 2) * want + 4 * fi.tiny * fi.eps
                self.assertTrue(bool((err <= bound).all()),
                                f"{dt} {shape} dim {dim}: max error {err.max().item():.3g}")
            xx = x.to(dt)
            self.assertTrue(torch.equal(bits(pt.softmax(xx, dtype=torch.float32)),
                                        bits(pt.softmax(xx.float()))))
            self.assertTrue(torch.equal(bits(pt.softmax(x, dtype=dt)),
                                        bits(pt.softmax(x).to(dt))))
        self.assertEqual(tuple(pt.softmax(torch.ones(0, 7)).shape), (0, 7))
        self.assertEqual(pt.softmax(torch.tensor(3.0)).item(), 1.0)

    def test_logit_options(self):
        """The keywords beyond torch.softmax are peak.softmax's, byte for
        byte."""
        x = torch.rand(2, 4, 7, 30) * 12 - 6
        mask = torch.rand(7, 30) > 0.2
        bias = torch.randn(2, 1, 7, 30)
        sinks, slopes = torch.randn(4), torch.rand(4)
        for kw, npkw in (
                (dict(attn_mask=mask, is_causal=True), dict(keep=mask.numpy(), causal=True)),
                (dict(attn_mask=bias, scale=0.5), dict(bias=bias.numpy(), scale=0.5)),
                (dict(softcap=3.0, alibi="causal", sinks=sinks),
                 dict(softcap=3.0, alibi="causal", sinks=sinks.numpy())),
                (dict(alibi="symmetric", alibi_slopes=slopes, sinks=-0.5),
                 dict(alibi="symmetric", alibi_slopes=slopes.numpy(), sinks=-0.5)),
                (dict(sinks=sinks.numpy().tolist()), dict(sinks=sinks.numpy()))):
            with self.subTest(options=sorted(kw)):
                got = pt.softmax(x, **kw)
                want = torch.from_numpy(peak.softmax(x.numpy(), **npkw))
                self.assertTrue(torch.equal(bits(got), bits(want)))

    def test_errors(self):
        x = torch.randn(3, 8)
        with self.assertRaises(TypeError):
            pt.softmax(x.double())
        with self.assertRaises(TypeError):
            pt.softmax(x, dtype=torch.float64)
        with self.assertRaises(IndexError):
            pt.softmax(x, 2)
        with self.assertRaises(ValueError):  # the options need the last dim
            pt.softmax(x, 0, is_causal=True)
        with self.assertRaises(RuntimeError):
            pt.softmax(x.requires_grad_())


class EdgeCases(unittest.TestCase):
    """Inputs a new user tried: a mask on another device, empty tensors, the
    forms F.layer_norm and nn.LayerNorm accept."""

    def test_mask_on_another_device(self):
        q = torch.randn(1, 2, 4, 8)
        for dt in (torch.bool, torch.float32):
            m = torch.ones(4, 4, dtype=dt, device="meta")
            with torch.no_grad(), self.assertRaises(ValueError):
                pt.scaled_dot_product_attention(q, q, q, attn_mask=m)
            with self.assertRaises(ValueError):
                pt.softmax(torch.randn(1, 2, 4, 4), attn_mask=m)

    def test_empty_inputs_as_torch(self):
        q, k = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 5, 8)
        with torch.no_grad():
            for qq, kk, shape in ((q[:0], k[:0], (0, 4, 3, 8)), (q[:, :, :0], k, (2, 4, 0, 8))):
                out = pt.scaled_dot_product_attention(qq, kk, kk)
                self.assertEqual(tuple(out.shape), shape)
            out, lse = pt.scaled_dot_product_attention(q, k[:, :, :0], k[:, :, :0],
                                                       return_lse=True)
            self.assertEqual(tuple(out.shape), (2, 4, 3, 8))
            self.assertTrue(bool((out == 0).all()))  # no key: zeros, lse -inf
            self.assertTrue(bool((lse == -float("inf")).all()))
            # a sink is the lse of a row that sees nothing; H = Hkv = 0 is empty
            _, lse = pt.scaled_dot_product_attention(q, k[:, :, :0], k[:, :, :0],
                                                     sinks=torch.arange(4.0), return_lse=True)
            self.assertTrue(torch.equal(lse, torch.arange(4.0)[None, :, None].expand(2, 4, 3)))
            e = torch.randn(2, 0, 3, 8)
            self.assertEqual(tuple(pt.scaled_dot_product_attention(e, e, e).shape), (2, 0, 3, 8))
            # the arguments are checked as in a call with work
            for kw, err in ((dict(scale=float("nan")), ValueError), (dict(alibi="bogus"), ValueError),
                            (dict(softcap=-1.0), ValueError), (dict(sinks=torch.zeros(7)), ValueError)):
                with self.assertRaises(err, msg=str(kw)):
                    pt.scaled_dot_product_attention(q, k[:, :, :0], k[:, :, :0], **kw)
        x = torch.randn(0, 16)
        with self.assertRaises(ValueError):
            pt.layer_norm(x, 16, eps=float("nan"))
        with self.assertRaises(ValueError):
            pt.layer_norm(x, 16, torch.ones(5))
        with self.assertRaises(TypeError):
            pt.embed_pe(torch.zeros(0), torch.randn(5, 4))
        self.assertEqual(tuple(pt.layer_norm(x, (16,)).shape), (0, 16))
        y, total = pt.add_layer_norm(x, x)
        self.assertEqual((tuple(y.shape), tuple(total.shape)), ((0, 16), (0, 16)))
        w = torch.randn(10, 16)
        ids = torch.zeros(2, 0, dtype=torch.long)
        got = pt.embed_pe(ids, w)
        self.assertEqual((tuple(got.shape), got.dtype),
                         (tuple(F.embedding(ids, w).shape), torch.float32))

    def test_layer_norm_forms(self):
        x, w, b = torch.randn(3, 32), torch.rand(32) + 0.5, torch.randn(32)
        same_bytes(self, pt.layer_norm(x, 32, w, b), pt.layer_norm(x, (32,), w, b))
        torch.testing.assert_close(pt.layer_norm(x, 32, w, b), F.layer_norm(x, (32,), w, b),
                                   atol=2e-6, rtol=1e-5)
        if "bias" in inspect.signature(nn.LayerNorm).parameters:  # torch 2.1 and later
            ln = nn.LayerNorm(32, bias=False).eval()
            with torch.no_grad():
                ln.weight.uniform_(0.5, 1.5)
                mine = pt.LayerNorm.from_module(ln).eval()
                self.assertIsNone(mine.bias)
                torch.testing.assert_close(mine(x), ln(x), atol=2e-6, rtol=1e-5)
        half = nn.LayerNorm(32).half()
        self.assertEqual(pt.LayerNorm.from_module(half).weight.dtype, torch.float16)


class TinyBlock(nn.Module):
    """A small pre-norm transformer layer on peak.torch: token ids -> embed_pe
    (embedding * sqrt(d) + the sinusoid) -> LayerNorm module -> attention
    with grouped K/V heads, RoPE from RotaryEmbedding, causal -> add_layer_norm
    -> MLP -> layer_norm -> logits -> softmax.  reference(): the same in
    PyTorch (F.embedding, F.layer_norm, transformers' RoPE formulas,
    F.scaled_dot_product_attention, torch.softmax)."""

    def __init__(self, vocab=64, d=64, heads=4, kv_heads=2, max_len=32):
        super().__init__()
        self.d, self.H, self.Hkv, self.hd = d, heads, kv_heads, d // heads
        self.emb = nn.Embedding(vocab, d)
        self.norm1, self.norm2 = pt.LayerNorm(d), pt.LayerNorm(d)
        self.q, self.kv = nn.Linear(d, d), nn.Linear(d, 2 * kv_heads * self.hd)
        self.o = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, vocab)
        self.rotary = pt.RotaryEmbedding({"rope_theta": 10000.0}, head_dim=self.hd,
                                         max_position_embeddings=max_len)
        self.register_buffer("pe", torch.from_numpy(peak.pe_table(max_len, d)))
        with torch.no_grad():
            for ln in (self.norm1, self.norm2):
                ln.weight.uniform_(0.5, 1.5)
                ln.bias.uniform_(-0.5, 0.5)

    def qkv(self, h):
        B, L, _ = h.shape
        q = self.q(h).view(B, L, self.H, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(B, L, 2, self.Hkv, self.hd).unbind(2)
        return q, k.transpose(1, 2), v.transpose(1, 2)

    def forward(self, ids, position_ids):
        B, L = ids.shape
        x = pt.embed_pe(ids, self.emb.weight, math.sqrt(self.d))
        q, k, v = self.qkv(self.norm1(x))
        q, k = pt.apply_rotary_pos_emb(q, k, *self.rotary(q, position_ids))
        a = pt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        a = self.o(a.transpose(1, 2).reshape(B, L, self.d))
        h, x = pt.add_layer_norm(a, x, self.norm2.weight, self.norm2.bias)
        x = x + self.ff(h)
        y = pt.layer_norm(x, (self.d,), self.norm1.weight, self.norm1.bias)
        return pt.softmax(self.head(y))

    def reference(self, ids, position_ids):
        B, L = ids.shape
        d = self.d
        x = self.emb(ids) * math.sqrt(d) + self.pe[:L]
        q, k, v = self.qkv(F.layer_norm(x, (d,), self.norm1.weight, self.norm1.bias))
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, self.hd, 2).float() / self.hd)
        f = (inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]
        q, k = q * cos + pt._rotate_half(q) * sin, k * cos + pt._rotate_half(k) * sin
        g = self.H // self.Hkv
        a = F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1),
                                           v.repeat_interleave(g, 1), is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, L, d))
        x = x + self.ff(F.layer_norm(x, (d,), self.norm2.weight, self.norm2.bias))
        y = F.layer_norm(x, (d,), self.norm1.weight, self.norm1.bias)
        return torch.softmax(self.head(y), -1)


OPS = ("scaled_dot_product_attention", "scaled_dot_product_attention_lse", "softmax",
       "layer_norm", "add_layer_norm", "embed_pe", "apply_rotary_pos_emb", "rotary_embedding")


@unittest.skipUnless(getattr(pt, "_OPS", None),
                     "torch < 2.4: no torch.library.custom_op (peak.torch's plain path only)")
class CustomOps(unittest.TestCase):
    """peak.torch's torch.library operators: each function goes through its
    own (the plain path with threads=), with the same bytes; the fakes
    (torch.library.opcheck); a model compiled whole (inductor, fullgraph)
    and exported."""

    def test_functions_use_their_ops(self):
        q, k, v = torch.randn(2, 8, 6, 16), torch.randn(2, 2, 9, 16), torch.randn(2, 2, 9, 8)
        x, r = torch.randn(3, 5, 32), torch.randn(3, 5, 32)
        w, b = torch.rand(32) + 0.5, torch.randn(32)
        ids, table = torch.randint(0, 50, (3, 7)), torch.randn(50, 32)
        rotary = pt.RotaryEmbedding({"rope_theta": 1e4, "rope_type": "longrope",
                                     "short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
                                     "original_max_position_embeddings": 8},
                                    head_dim=16, max_position_embeddings=32)
        pos = torch.arange(9).expand(2, 9)  # 9 > 8: the long factors
        cos, sin = rotary(q, pos[:, :6])
        mask = torch.rand(6, 9) > 0.3
        sinks = torch.randn(8)
        calls = [
            ("scaled_dot_product_attention", lambda **wh: (pt.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, softcap=20.0, alibi="causal", sinks=1.0, **wh),)),
            ("scaled_dot_product_attention_lse", lambda **wh: pt.scaled_dot_product_attention(
                q.half(), k, v, is_causal=True, sinks=sinks, return_lse=True, **wh)),
            ("softmax", lambda **wh: (pt.softmax(x, dtype=torch.float16, **wh),)),
            ("layer_norm", lambda **wh: (pt.layer_norm(x, (32,), w, b, **wh),)),
            ("add_layer_norm", lambda **wh: pt.add_layer_norm(x, r, w, b, 1e-6, **wh)),
            ("embed_pe", lambda **wh: (pt.embed_pe(ids, table, 2.0, padding_idx=1, **wh),)),
            ("pe_add", lambda **wh: (pt.PositionalEncoding(32, max_len=9, batch_first=False,
                                                           threads=wh.get("threads"))(x),)),
            ("apply_rotary_pos_emb", lambda **wh: pt.apply_rotary_pos_emb(q, k[:, :, :6], cos,
                                                                          sin, **wh)),
        ]
        n = torch.get_num_threads()
        for name, fn in calls:
            seen = []

            def spy(*a, _op=pt._OPS[name], **kw):
                seen.append(1)
                return _op(*a, **kw)

            with torch.no_grad(), mock.patch.dict(pt._OPS, {name: spy}):
                got = fn()
                self.assertEqual(len(seen), 1, name)
                want = fn(threads=n)  # the plain path
                self.assertEqual(len(seen), 1, name)
            for a, b_ in zip(got, want):
                self.assertTrue(torch.equal(bits(a), bits(b_)), name)
        seen, real = [], pt._OPS["rotary_embedding"]
        with mock.patch.dict(pt._OPS, {"rotary_embedding": lambda *a: seen.append(a) or
                                       real(*a)}):
            got = rotary(q, pos)
        self.assertEqual(len(seen), 1)
        rotary.threads = n
        for a, b_ in zip(got, rotary(q, pos)):
            self.assertTrue(torch.equal(a, b_))
        rotary.threads = None
        # longrope inside the operator: the long factors for 9 positions,
        # the short ones for 6
        short = rotary(q, pos[:, :6])[0]
        self.assertFalse(torch.equal(got[0][:, 1:6], short[:, 1:6]))
        rotary.threads = n
        self.assertTrue(torch.equal(short, rotary(q, pos[:, :6])[0]))

    def test_an_input_on_another_device_is_refused(self):
        """An operator called with one input on the meta device runs its
        fake, not peak: an error, never uninitialised memory; all on meta
        is shape inference and gives meta outputs."""
        q, x = torch.randn(1, 2, 3, 8), torch.randn(2, 8)
        meta = torch.zeros(1, 2, 3, 3, device="meta")
        for call in (lambda: torch.ops.peak.scaled_dot_product_attention(q, q, q, meta),
                     lambda: torch.ops.peak.layer_norm(x, torch.ones(8, device="meta")),
                     lambda: torch.ops.peak.add_layer_norm(x, x.to("meta"))):
            with self.assertRaises(ValueError):
                call()
        qm = q.to("meta")
        self.assertEqual(torch.ops.peak.scaled_dot_product_attention(qm, qm, qm).device.type,
                         "meta")

    def test_fakes(self):
        """torch.library.opcheck: schema, fake (shapes, dtypes, strides)
        and AOT dispatch of every operator."""
        q, k, v = torch.randn(2, 8, 5, 16), torch.randn(2, 2, 7, 16), torch.randn(2, 2, 7, 8)
        mask = torch.rand(5, 7) > 0.3
        x, w, b = torch.randn(3, 4, 32), torch.rand(32) + 0.5, torch.randn(32)
        rotary = pt.RotaryEmbedding({"rope_theta": 1e4}, head_dim=16)
        cos, sin = rotary(q, torch.arange(5).expand(2, 5))
        kq = k[:, :, :5]
        cases = [
            ("scaled_dot_product_attention", (q, k, v, mask, False, None, 2.0, "causal", None,
                                              torch.randn(8))),
            ("scaled_dot_product_attention_lse", (q.half(), k, v, None, True)),
            ("softmax", (torch.randn(2, 3, 5, 7), torch.float16, 0.5, mask, True)),
            ("layer_norm", (x.half(), w, b, 1e-5)),
            ("add_layer_norm", (x, x.flip(0), w.half(), None, 1e-6)),
            ("embed_pe", (torch.randint(0, 20, (3, 6)), torch.randn(20, 32), 2.0)),
            ("pe_add", (x, torch.randn(9, 32), True)),
            ("pe_add", (x.transpose(0, 1), torch.randn(9, 32), False)),
            ("apply_rotary_pos_emb", (q, kq, cos, sin, None, 1)),
            ("apply_rotary_pos_emb", (q.transpose(1, 2), kq.transpose(1, 2), cos, sin, None, 2)),
            ("rotary_embedding", (torch.arange(6)[None], 16, rotary._json)),
        ]
        for name, args in cases:
            with self.subTest(op=name):
                torch.library.opcheck(getattr(torch.ops.peak, name), args)

    def test_compile_and_export(self):
        """TinyBlock through torch.compile(fullgraph=True) (inductor; a graph
        break would raise) under no_grad, then with torch.inference_mode()
        (aot_eager: no second C++ build), against PyTorch's eager layer;
        torch.export.export's graph holds the peak operators."""
        torch.manual_seed(0)
        model = TinyBlock().eval()
        ids, pos = torch.randint(0, 64, (2, 12)), torch.arange(12).expand(2, 12)
        tol = dict(atol=1e-5, rtol=1e-4)
        try:
            with torch.no_grad():
                want = model.reference(ids, pos)
                torch.testing.assert_close(model(ids, pos), want, **tol)
                got = torch.compile(model, fullgraph=True)(ids, pos)
            torch.testing.assert_close(got, want, **tol)
            with torch.inference_mode():
                got = torch.compile(model, backend="aot_eager", fullgraph=True)(ids, pos)
            torch.testing.assert_close(got, want, **tol)
            with torch.no_grad():
                ep = torch.export.export(model, (ids, pos))
                targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
                for name in ("embed_pe", "layer_norm", "rotary_embedding",
                             "apply_rotary_pos_emb", "scaled_dot_product_attention",
                             "add_layer_norm", "softmax"):
                    self.assertIn(f"peak.{name}.default", targets)
                torch.testing.assert_close(ep.module()(ids, pos), want, **tol)
        finally:
            torch._dynamo.reset()

    def test_positional_encoding_compiles(self):
        """PositionalEncoding (peak::pe_add) between two Linear layers, both
        layouts: compiled whole (aot_eager, fullgraph) and exported, the
        same bytes as eager x + pe."""
        torch.manual_seed(0)
        for batch_first, shape in ((True, (2, 20, 32)), (False, (20, 2, 32))):
            model = nn.Sequential(nn.Linear(32, 32),
                                  pt.PositionalEncoding(32, max_len=50, batch_first=batch_first),
                                  nn.Linear(32, 32)).eval()
            x = torch.randn(shape)
            try:
                with torch.no_grad():
                    h = model[0](x)
                    pe = model[1].pe[0, :20]
                    want = model[2](h + (pe if batch_first else pe.unsqueeze(1)))
                    self.assertTrue(torch.equal(model(x), want))
                    got = torch.compile(model, backend="aot_eager", fullgraph=True)(x)
                    self.assertTrue(torch.equal(got, want))
                    ep = torch.export.export(model, (x,))
                    self.assertIn("peak.pe_add.default", {str(n.target) for n in ep.graph.nodes})
                    self.assertTrue(torch.equal(ep.module()(x), want))
            finally:
                torch._dynamo.reset()



if __name__ == "__main__":
    unittest.main()
