"""peak.torch against PyTorch's own modules (torch.nn, torch.softmax).

Run: python3 python/tests/run.py torch (meson test: python-torch); skipped
when the interpreter cannot import torch (Debian: python3-torch).
"""
import math
import unittest
from unittest import mock

import numpy as np
import torch
from torch import nn

import peak
import peak.torch as pt

torch.manual_seed(0)


def _pools_supported():
    try:
        peak.ThreadPool(1).close()
        return True
    except peak.Unsupported:
        return False


POOLS = _pools_supported()


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

        def modules(**where):
            ln = pt.LayerNorm(512, **where).eval()
            pe = pt.PositionalEncoding(512, max_len=200, **where)
            with torch.no_grad():
                return ln(x), pe(x), pe.pe

        return [
            ("scaled_dot_product_attention", lambda **wh: (
                *pt.scaled_dot_product_attention(q, k, v, return_lse=True, **wh),
                pt.scaled_dot_product_attention(q, k, v, attn_mask=mask, **wh))),
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


if __name__ == "__main__":
    unittest.main()
