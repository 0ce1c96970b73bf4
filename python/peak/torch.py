"""peak for PyTorch models: drop-in modules and functions (inference only).

    import peak.torch as pt
    model.pos_encoder = pt.PositionalEncoding(512, max_len=5000)   # drop-in for PyTorch's PositionalEncoding
    model.norm = pt.LayerNorm.from_module(model.norm)               # same weights
    out = pt.scaled_dot_product_attention(q, k, v, is_causal=True) # [B, H, L, D]

Tensors must be on the CPU and float32; they are handed to peak without a
copy (``tensor.numpy()`` shares memory), and results come back as tensors
sharing peak's output arrays.  peak computes forward passes only: with
autograd recording (an input that requires grad, outside ``torch.no_grad()``
/ ``torch.inference_mode()``) these functions raise instead of returning a
result that cannot be differentiated; the modules fall back to PyTorch's own
code in that case, so a model still trains.

Threads: every function (and module) takes ``threads=`` or ``pool=`` as
peak's NumPy API does, but ``threads=None`` here means
``torch.get_num_threads()`` workers, read at each call, so that peak uses as
many threads as PyTorch's own operators would (``torch.set_num_threads(1)``
makes it single-threaded too).  The workers are peak's own threads, not
PyTorch's intra-op pool: peak's call and PyTorch's operators run one after
the other, never at the same time.  The output is the same, byte for byte,
at any number of workers.

Thread safety: as the C library, kernel calls are reentrant.
"""

import math

import numpy as np
import torch
from torch import nn

import peak as _peak

__all__ = ["scaled_dot_product_attention", "attention_merge", "layer_norm", "add_layer_norm",
           "PositionalEncoding", "LayerNorm", "ThreadPool"]

ThreadPool = _peak.ThreadPool


def _where(threads, pool):
    """threads=/pool= for a peak call: torch.get_num_threads() workers
    unless either is given."""
    if threads is None and pool is None:
        threads = torch.get_num_threads()
    return {"threads": threads, "pool": pool}


def _np(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{name}: peak runs on the CPU; tensor is on {t.device}")
    if t.dtype != torch.float32:
        raise TypeError(f"{name}: dtype {t.dtype}, expected torch.float32")
    if t.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(f"{name} requires grad: peak computes forward passes only; call "
                           "under torch.no_grad() or torch.inference_mode()")
    if t.dim() > 0 and t.size(-1) > 1 and t.stride(-1) != 1:
        t = t.contiguous()  # peak needs the last axis contiguous
    return t.detach().numpy()


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, *, return_lse=False,
                                 threads=None, pool=None):
    """PyTorch 2's ``F.scaled_dot_product_attention`` on peak.

    query ``[B, H, Lq, D]``, key ``[B, Hkv, Lk, D]``, value ``[B, Hkv, Lk,
    Dv]`` (Hkv dividing H: grouped-query attention works without repeating
    K/V); 3-D ``[H, L, D]`` inputs are read as B = 1.  attn_mask: a bool
    tensor (True = take part, as in PyTorch) or a float tensor added to the
    scores, broadcasting to ``[B, H, Lq, Lk]``.  is_causal: top-left causal
    mask, as PyTorch.  scale: None means 1/sqrt(D).  A row with no visible
    key returns zeros (PyTorch returns NaN there).  Returns a new tensor
    ``[B, H, Lq, Dv]``, or ``(out, lse)`` when return_lse, lse ``[B, H,
    Lq]`` the log-sum-exp of each row's scaled scores (-inf for a row with
    no visible key): what attention_merge() takes.  threads, pool: as the
    module docstring says (default torch.get_num_threads() workers)."""
    if dropout_p:
        raise ValueError("dropout_p must be 0: peak has no dropout (inference only)")
    squeeze = query.dim() == 3
    if squeeze:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    q, k, v = _np("query", query), _np("key", key), _np("value", value)
    keep = bias = None
    if attn_mask is not None:
        m = _np_mask(attn_mask)
        if m.dtype == np.bool_:
            keep = m
        else:
            bias = m
    res = _peak.attention(q, k, v, layout="bhld", scale=scale, causal=is_causal,
                          keep=keep, bias=bias, return_lse=return_lse, **_where(threads, pool))
    out, lse = res if return_lse else (res, None)
    t = torch.from_numpy(out)
    if squeeze:
        t = t.squeeze(0)
    if not return_lse:
        return t
    lt = torch.from_numpy(lse)
    return t, (lt.squeeze(0) if squeeze else lt)


def attention_merge(parts, *, return_lse=False, threads=None, pool=None):
    """Merges attentions of the same queries over disjoint sets of keys
    into the attention over all of them (peak.attention_merge,
    peak_attention_merge): the split-KV / context-parallel step.

    parts: a sequence of ``(out, lse)`` pairs as
    ``scaled_dot_product_attention(..., return_lse=True)`` returns them: out
    ``[B, H, Lq, Dv]``, lse ``[B, H, Lq]`` (or ``[H, Lq, Dv]`` and ``[H,
    Lq]``), merged in the order given, which is part of the result's bytes.
    A row that no part saw is zeros with lse -inf.  Returns a new tensor
    ``[B, H, Lq, Dv]``, or ``(out, lse)`` when return_lse.  threads, pool:
    as the module docstring says (default torch.get_num_threads() workers)."""
    bad = TypeError("parts: expected a sequence of (out, lse) pairs (tuples or lists)")
    if isinstance(parts, torch.Tensor) or not hasattr(parts, "__iter__"):
        raise bad
    parts = list(parts)
    if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in parts):
        raise bad
    squeeze = bool(parts) and isinstance(parts[0][0], torch.Tensor) and parts[0][0].dim() == 3
    arrays = []
    for i, (o, lse) in enumerate(parts):
        if squeeze and isinstance(o, torch.Tensor) and isinstance(lse, torch.Tensor):
            o, lse = o.unsqueeze(0), lse.unsqueeze(0)
        arrays.append((_np(f"parts[{i}] out", o), _np(f"parts[{i}] lse", lse)))
    res = _peak.attention_merge(arrays, return_lse=return_lse, **_where(threads, pool))
    out, lse = res if return_lse else (res, None)
    t = torch.from_numpy(out)
    if squeeze:
        t = t.squeeze(0)
    if not return_lse:
        return t
    lt = torch.from_numpy(lse)
    return t, (lt.squeeze(0) if squeeze else lt)


def _np_mask(m):
    if not isinstance(m, torch.Tensor):
        raise TypeError(f"attn_mask: expected a torch.Tensor, got {type(m).__name__}")
    if m.dtype == torch.bool:
        return m.cpu().numpy()
    return _np("attn_mask", m)


def add_layer_norm(x, residual, weight=None, bias=None, eps=1e-5, *, threads=None, pool=None):
    """``F.layer_norm(x + residual, (d,), weight, bias, eps)`` in one pass.
    Returns ``(normed, x + residual)``: the sum is what a pre-norm block
    carries on.  threads, pool: as the module docstring says."""
    xs = _np("x", x)
    rs = None if residual is None else _np("residual", residual)
    w = None if weight is None else _np("weight", weight)
    b = None if bias is None else _np("bias", bias)
    s = None if residual is None else np.empty(xs.shape, np.float32)
    y = _peak.add_layernorm(np.ascontiguousarray(xs),
                            None if rs is None else np.ascontiguousarray(rs),
                            w, b, eps, sum_out=s, **_where(threads, pool))
    return torch.from_numpy(y), (None if s is None else torch.from_numpy(s))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, *, threads=None,
               pool=None):
    """``F.layer_norm`` over the last axis (normalized_shape must be
    ``(x.shape[-1],)``).  threads, pool: as the module docstring says."""
    if tuple(normalized_shape) != (x.shape[-1],):
        raise ValueError("peak normalises over the last axis only: normalized_shape must be "
                         f"({x.shape[-1]},), got {tuple(normalized_shape)}")
    return add_layer_norm(x, None, weight, bias, eps, threads=threads, pool=pool)[0]


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` whose forward runs on peak when no gradient is
    needed (same parameters, same state_dict; PyTorch's own code otherwise).
    ``LayerNorm.from_module(ln)`` converts an existing module.  threads,
    pool (keywords, attributes of the same names): where peak runs, as the
    module docstring says (default torch.get_num_threads() workers)."""

    def __init__(self, *args, threads=None, pool=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.threads, self.pool = threads, pool

    @classmethod
    def from_module(cls, ln, *, threads=None, pool=None):
        new = cls(ln.normalized_shape, eps=ln.eps, elementwise_affine=ln.elementwise_affine,
                  threads=threads, pool=pool)
        new.load_state_dict(ln.state_dict())
        return new

    def forward(self, x):
        if (len(self.normalized_shape) != 1 or x.device.type != "cpu"
                or x.dtype != torch.float32 or _needs_grad(x, self.weight, self.bias)):
            return super().forward(x)
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps,
                          threads=self.threads, pool=self.pool)


class PositionalEncoding(nn.Module):
    """Drop-in for the usual PyTorch PositionalEncoding module: ``x +
    PE[:seq_len]`` for x ``[batch, seq_len, d_model]``
    (``batch_first=False``: ``[seq_len, batch, d_model]``), then dropout.

    mode "exact" (default) is the paper's formula to 2^-23; "torch_f32"
    reproduces the float32 table the usual PyTorch module builds.  The
    table is a buffer ``pe`` of shape ``[1, max_len, d_model]`` (saved in
    the state_dict like that module's).  Forward adds it with peak_pe_add
    (out of place; the input is not modified).  threads, pool (attributes of
    the same names): where peak runs, as the module docstring says."""

    def __init__(self, d_model, dropout=0.0, max_len=5000, *, mode="exact",
                 layout="interleaved", base=10000.0, batch_first=True, threads=None, pool=None):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.batch_first = batch_first
        self.threads, self.pool = threads, pool
        table = _peak.pe_table(max_len, d_model, layout=layout, mode=mode, base=base,
                               **_where(threads, pool))
        self.register_buffer("pe", torch.from_numpy(table).unsqueeze(0))

    def forward(self, x):
        if _needs_grad(x) or x.device.type != "cpu" or x.dtype != torch.float32:
            pe = self.pe[0, :x.size(1 if self.batch_first else 0)]
            y = x + (pe if self.batch_first else pe.unsqueeze(1))
            return self.dropout(y)
        y = x.detach().clone()  # out of place, like x + pe
        view = y if self.batch_first else y.transpose(0, 1)
        if view.size(1) > self.pe.size(1):
            raise ValueError(f"sequence of {view.size(1)} positions, table has {self.pe.size(1)}")
        arr = view.numpy()
        _peak.pe_add(arr, pe=self.pe[0].numpy(), **_where(self.threads, self.pool))
        return self.dropout(y)


def _attention_reference(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """PyTorch's own math, for comparisons (torch 1.13 has no public
    scaled_dot_product_attention)."""
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    if k.size(-3) != q.size(-3):
        g = q.size(-3) // k.size(-3)
        k, v = k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3)
    s = q @ k.transpose(-2, -1) * scale
    if is_causal:
        lq, lk = q.size(-2), k.size(-2)
        s = s.masked_fill(~torch.ones(lq, lk, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask
    return torch.softmax(s, dim=-1) @ v
