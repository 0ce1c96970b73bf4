"""peak for PyTorch models: drop-in modules and functions (inference only).

    import peak.torch as pt
    model.pos_encoder = pt.PositionalEncoding(512, max_len=5000)   # drop-in for PyTorch's PositionalEncoding
    model.norm = pt.LayerNorm.from_module(model.norm)               # same weights
    out = pt.scaled_dot_product_attention(q, k, v, is_causal=True) # [B, H, L, D]
    p = pt.softmax(scores)                                          # torch.softmax(scores, -1)
    rotary = pt.RotaryEmbedding(llama_config)                       # as LlamaRotaryEmbedding
    q, k = pt.apply_rotary_pos_emb(q, k, *rotary(q, position_ids)) # its rotation, bit for bit

Tensors must be on the CPU and float32 (scaled_dot_product_attention,
softmax, the LayerNorms and embed_pe's weight also take float16 and
bfloat16); they are handed to peak without a copy (``tensor.numpy()``
shares memory), and results come back as tensors sharing peak's output
arrays.  peak computes forward passes only: with autograd recording (an
input that requires grad, outside ``torch.no_grad()`` /
``torch.inference_mode()``) these functions raise instead of returning a
result that cannot be differentiated; the modules and apply_rotary_pos_emb
fall back to PyTorch's own code in that case, so a model still trains.

torch.compile and torch.export (torch >= 2.4): the functions run peak
through ``torch.library`` custom operators of the namespace "peak", each
with a fake (meta) implementation that gives its outputs' shapes and
dtypes, so that ``torch.compile`` (inductor included, ``fullgraph=True``)
and ``torch.export`` trace a model through them without a graph break, the
operators appearing in the graph as ``torch.ops.peak.*``:

    peak::scaled_dot_product_attention, peak::scaled_dot_product_attention_lse
                           scaled_dot_product_attention (the second with return_lse=True)
    peak::softmax          softmax
    peak::layer_norm, peak::add_layer_norm
                           layer_norm, add_layer_norm, LayerNorm.forward
    peak::embed_pe         embed_pe
    peak::pe_add           PositionalEncoding.forward
    peak::apply_rotary_pos_emb
                           apply_rotary_pos_emb (float32 CPU tensors of the shapes it takes)
    peak::rotary_embedding RotaryEmbedding.forward (every rope_type but "dynamic")

They compute forward passes only (no autograd formula; call them under
``torch.no_grad()`` or ``torch.inference_mode()``, as the functions
require) and never return a view of an input.  The "plain path" (peak
called from Python directly, as with torch < 2.4 such as Debian's 1.13,
where everything takes it) serves what an operator's schema cannot carry;
the results are the same, but torch.compile breaks its graph there:
  - ``threads=`` or ``pool=`` given (functions; the modules' attributes of
    those names not None): the operators run on ``torch.get_num_threads()``
    workers, read when they run;
  - alibi_slopes= or sinks= given as NumPy arrays or sequences (tensors
    and numbers go through the operators), or scale, softcap, eps, base
    and the like not Python numbers;
  - embed_pe with ids or positions that are not CPU tensors;
  - RotaryEmbedding of rope_type "dynamic" (it keeps state between calls)
    or with position_ids off the CPU;
  - attention_merge, which is not an operator (its parts are a sequence).
Where apply_rotary_pos_emb and the LayerNorm module fall back to PyTorch's
own code (types, devices or shapes peak does not take, autograd
recording), torch.compile traces that code as usual.

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

import dataclasses
import functools
import inspect
import json
import math
import numbers
import warnings
from typing import Optional

import numpy as np
import torch
from torch import nn

import peak as _peak

__all__ = ["scaled_dot_product_attention", "attention_merge", "softmax", "layer_norm",
           "add_layer_norm", "embed_pe",
           "PositionalEncoding", "LayerNorm", "apply_rotary_pos_emb", "RotaryEmbedding",
           "ThreadPool"]

ThreadPool = _peak.ThreadPool

# torch.library.custom_op and register_fake (torch >= 2.4): the functions
# below go through the operators registered at the end of this module.
_CUSTOM_OPS = hasattr(torch, "library") and hasattr(torch.library, "custom_op") and \
    hasattr(torch.library, "register_fake")
_OPS = {}  # name -> torch.ops.peak.<name>, filled at the end of the module

# ml_dtypes present: bfloat16 tensors can be handed to peak (asked once, not
# in code that torch.compile traces)
_BF16 = _peak._bfloat16() is not None


def _where(threads, pool):
    """threads=/pool= for a peak call: torch.get_num_threads() workers
    unless either is given."""
    if threads is None and pool is None:
        threads = torch.get_num_threads()
    return {"threads": threads, "pool": pool}


def _op(name, threads=None, pool=None):
    """The custom operator `name`, or None for the plain path (torch < 2.4,
    or threads / pool given: not in an operator's schema)."""
    if threads is not None or pool is not None:
        return None
    return _OPS.get(name)


def _real(v):
    """v is a Python number an operator's float argument takes (bool is not)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# torch's 16-bit types peak takes where a function says so (attention,
# softmax, LayerNorm, embed_pe's weight).
_HALF = (torch.float16, torch.bfloat16)
_FLOATS = (torch.float32,) + _HALF


def _check(name, t, half=False, widened=False):
    """The checks _np makes, without touching the data (torch.compile
    traces them): a CPU tensor of float32 (or with half also float16 and
    bfloat16, the latter where ml_dtypes is installed; with widened, both,
    which the caller widens to float32 itself), not recording autograd."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{name}: peak runs on the CPU; tensor is on {t.device}")
    if t.dtype != torch.float32 and not ((half or widened) and t.dtype in _HALF):
        want = "torch.float32, float16 or bfloat16" if half or widened else "torch.float32"
        raise TypeError(f"{name}: dtype {t.dtype}, expected {want}")
    if t.dtype == torch.bfloat16 and not _BF16 and not widened:
        raise TypeError(f"{name}: bfloat16 tensors need ml_dtypes (pip install ml_dtypes)")
    if t.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(f"{name} requires grad: peak computes forward passes only; call "
                           "under torch.no_grad() or torch.inference_mode()")


def _np(name, t, half=False):
    """t as a NumPy array sharing its memory: float32, or with half also
    float16 and bfloat16 (as ml_dtypes.bfloat16, which numpy needs for it)."""
    _check(name, t, half)
    if t.dim() > 0 and t.size(-1) > 1 and t.stride(-1) != 1:
        t = t.contiguous()  # peak needs the last axis contiguous
    if t.dtype == torch.bfloat16:
        return t.detach().view(torch.int16).numpy().view(_peak._bfloat16())
    return t.detach().numpy()


def _tensor(a):
    """A NumPy result as a tensor sharing its memory (bfloat16 too)."""
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _np_dtype(dt):
    """The NumPy dtype of a torch float32, float16 or bfloat16."""
    if dt == torch.bfloat16:
        return _peak._bfloat16()
    return np.float16 if dt == torch.float16 else np.float32


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


# ---- attention and softmax -------------------------------------------------------------

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=None, *, softcap=None,
                                 alibi=None, alibi_slopes=None, sinks=None, return_lse=False,
                                 threads=None, pool=None):
    """PyTorch 2's ``F.scaled_dot_product_attention`` on peak (the custom
    operator ``peak::scaled_dot_product_attention``, or
    ``peak::scaled_dot_product_attention_lse`` with return_lse).

    query ``[B, H, Lq, D]``, key ``[B, Hkv, Lk, D]``, value ``[B, Hkv, Lk,
    Dv]``; 3-D ``[H, L, D]`` inputs are read as B = 1.  Grouped-query
    attention needs no repeated K/V.  enable_gqa: None (the default,
    peak's rule): Hkv must divide H (ValueError otherwise); True: the same
    (RuntimeError otherwise, as torch); False: PyTorch's rule without GQA,
    Hkv must be H, or 1 (broadcast), RuntimeError otherwise, as torch.
    attn_mask: a bool tensor (True = take part, as in PyTorch) or a float
    tensor added to the scores, broadcasting to ``[B, H, Lq, Lk]``: float32
    read in place, float16 or bfloat16 widened (exactly) into a float32
    copy first.
    is_causal: top-left causal mask, as PyTorch.  scale: None means
    1/sqrt(D).  dropout_p must be 0 (ValueError otherwise: peak has no
    dropout).  A row with no visible key returns zeros (PyTorch 1.13
    returns NaN there), and so does every row when Lk is 0; empty query
    batches, heads or rows give an empty result.

    Logit options (keywords, beyond PyTorch's signature; peak.attention()
    says the details), applied in this order: scale, softcap, ALiBi,
    attn_mask / is_causal, sinks.  softcap: None or a positive float,
    ``softcap * tanh(s / softcap)`` (Gemma 2).  alibi: None, "causal"
    (bias -slope[h] * (i - j), BLOOM, MPT, Falcon) or "symmetric" (|i -
    j|), i the query row (is_causal's top-left numbering); alibi_slopes:
    None (peak.alibi_slopes(H)) or ``[H]`` values.  sinks: None, ``[H]``
    values or a float: one logit per head in every row's denominator,
    without a value (gpt-oss).  alibi_slopes and sinks may be tensors
    (CPU, any floating dtype, converted to float32) or numbers, which the
    custom operator takes, or NumPy arrays or sequences (the plain path).

    Types: query, key and value each float32, float16 or bfloat16 (the
    last needs ml_dtypes), read in place, and unlike PyTorch they may
    differ (a float32 query over a 16-bit cache); out has query's type,
    computed in float32 and rounded once (peak.h).

    Returns a new tensor ``[B, H, Lq, Dv]``, or ``(out, lse)`` when
    return_lse, lse ``[B, H, Lq]`` the log-sum-exp of each row's scores
    after every option (-inf for a row with no visible key, or the sink
    with sinks): what attention_merge() takes.  threads, pool: as the
    module docstring says (default torch.get_num_threads() workers; given,
    the plain path)."""
    if dropout_p:
        raise ValueError("dropout_p must be 0: peak has no dropout (inference only)")
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check(name, t, True)
    _check_heads(query, key, value, enable_gqa)
    if attn_mask is not None:
        _check_mask(attn_mask)
    squeeze = query.dim() == 3
    if squeeze:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    _sdpa_shape(query, key, value)
    op = _op("scaled_dot_product_attention_lse" if return_lse else
             "scaled_dot_product_attention", threads, pool)
    args = _op_logits(scale, softcap, alibi, alibi_slopes, sinks) if op is not None else None
    if args is not None:
        scale_f, softcap_f, slopes, sink_t = args
        res = op(query, key, value, attn_mask, bool(is_causal), scale_f, softcap_f, alibi,
                 slopes, sink_t)
        out, lse = res if return_lse else (res, None)
    else:
        out, lse = _sdpa_impl(query, key, value, attn_mask, is_causal, scale, softcap, alibi,
                              _per_head("alibi_slopes", alibi_slopes),
                              _per_head("sinks", sinks), return_lse, _where(threads, pool))
    if squeeze:
        out = out.squeeze(0)
        lse = None if lse is None else lse.squeeze(0)
    return (out, lse) if return_lse else out


def _check_heads(query, key, value, enable_gqa):
    """enable_gqa's rules (PyTorch's errors for True and False; None:
    peak's own, checked by peak.attention)."""
    if enable_gqa is None or query.dim() < 3 or key.dim() < 3:
        return
    H, Hkv = query.size(-3), key.size(-3)
    if enable_gqa:
        if Hkv == 0 or H % Hkv or value.dim() < 3 or value.size(-3) != Hkv:
            raise RuntimeError("Number of heads in key and value must divide the number of "
                               f"heads in query (query {H}, key {Hkv}, value "
                               f"{value.size(-3) if value.dim() >= 3 else '?'})")
    elif Hkv not in (H, 1):
        raise RuntimeError(f"key has {Hkv} heads, query {H}: with enable_gqa=False they must "
                           "be equal (or key's 1, broadcast), as in torch; pass "
                           "enable_gqa=True for grouped-query attention")


def _check_mask(m):
    if not isinstance(m, torch.Tensor):
        raise TypeError(f"attn_mask: expected a torch.Tensor, got {type(m).__name__}")
    if m.dtype != torch.bool:
        _check("attn_mask", m, widened=True)
    elif m.device.type != "cpu":
        raise ValueError(f"attn_mask: peak runs on the CPU; tensor is on {m.device}")


def _op_logits(scale, softcap, alibi, alibi_slopes, sinks):
    """The scale and logit options as attention's and softmax's operators
    take them, (scale, softcap, alibi_slopes, sinks), or None where one of
    them is something no schema holds (the plain path)."""
    slopes = _head_tensor("alibi_slopes", alibi_slopes, False)
    sink_t = _head_tensor("sinks", sinks, True)
    if not ((scale is None or _real(scale)) and (softcap is None or _real(softcap)) and
            (alibi is None or isinstance(alibi, str)) and slopes is not False and
            sink_t is not False):
        return None
    return (None if scale is None else float(scale),
            None if softcap is None else float(softcap), slopes, sink_t)


def _head_tensor(name, t, scalar_ok):
    """A per-head option as the operator takes it: None, or a float32
    tensor (a number: a 0-d one, for sinks); False when it is neither a
    tensor nor (scalar_ok) a number: the plain path."""
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        if t.device.type != "cpu":
            raise ValueError(f"{name}: peak runs on the CPU; tensor is on {t.device}")
        if not t.is_floating_point():
            raise TypeError(f"{name}: dtype {t.dtype}, expected a floating dtype")
        if t.requires_grad and torch.is_grad_enabled():
            raise RuntimeError(f"{name} requires grad: peak computes forward passes only; call "
                               "under torch.no_grad() or torch.inference_mode()")
        return t.detach().to(torch.float32)
    if scalar_ok and _real(t):
        return torch.tensor(float(t), dtype=torch.float32)
    return False


def _per_head(name, t):
    """A per-head vector for peak: a tensor as float32 NumPy (on the CPU;
    forward only, like the other inputs); anything else as given."""
    if not isinstance(t, torch.Tensor):
        return t
    return _head_tensor(name, t, False).numpy()


def _np_mask(m):
    _check_mask(m)
    if m.dtype == torch.bool:
        return m.detach().cpu().numpy()
    if m.dtype in _HALF:  # peak adds float32 biases: widened exactly, one copy
        return m.detach().to(torch.float32).numpy()
    return _np("attn_mask", m)


def _mask_args(attn_mask):
    """peak's keep= and bias= for an attn_mask tensor (or None)."""
    if attn_mask is None:
        return {"keep": None, "bias": None}
    m = _np_mask(attn_mask)
    return {"keep": m, "bias": None} if m.dtype == np.bool_ else {"keep": None, "bias": m}


def _sdpa_impl(query, key, value, attn_mask, is_causal, scale, softcap, alibi, alibi_slopes,
               sinks, return_lse, where):
    """peak.attention of 4-D tensors: (out, lse or None), new tensors."""
    if query.numel() == 0 or key.shape[2] == 0 or value.shape[3] == 0:
        return _sdpa_empty(query, key, value, scale, softcap, alibi, alibi_slopes, sinks,
                           return_lse)
    q, k, v = (_np("query", query, True), _np("key", key, True),
               _np("value", value, True))
    res = _peak.attention(q, k, v, layout="bhld", scale=scale, causal=is_causal,
                          softcap=softcap, alibi=alibi,
                          alibi_slopes=None if alibi_slopes is None else
                          _per_head("alibi_slopes", alibi_slopes),
                          sinks=None if sinks is None else _per_head("sinks", sinks),
                          return_lse=return_lse, **_mask_args(attn_mask), **where)
    out, lse = res if return_lse else (res, None)
    return _tensor(out), (None if lse is None else torch.from_numpy(lse))


def _finite_positive(name, v):
    """v a finite real > 0 (as peak checks it), else InvalidArgument naming v."""
    if not (_real(v) and math.isfinite(float(v)) and float(v) > 0):
        raise _peak.InvalidArgument(1, f"{name} {v!r} must be a finite number > 0 "
                                       "(PEAK_ERR_INVALID_ARG)")


def _sdpa_empty(query, key, value, scale, softcap, alibi, alibi_slopes, sinks, return_lse):
    """_sdpa_impl where there is nothing to compute: an empty query (as
    torch: an empty result) or no keys (every row sees nothing: zeros, and
    an lse of -inf, or the row's sink with sinks, as peak gives such rows).
    The arguments are checked as the call with work checks them."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check(name, t, True)
    B, H, Lq, Dv = _sdpa_shape(query, key, value)
    _peak._set_scale(_peak._AttentionDesc(), scale, "1/sqrt(D)")
    if softcap is not None and softcap != 0:  # 0: off, as peak reads it
        _finite_positive("softcap", softcap)
    head = _peak._logits(_peak._Logits(), H, softcap=softcap, alibi=alibi,
                         alibi_slopes=None if alibi_slopes is None else
                         _per_head("alibi_slopes", alibi_slopes),
                         sinks=None if sinks is None else _per_head("sinks", sinks))
    lse = None
    if return_lse:
        lse = torch.full((B, H, Lq), -float("inf"))
        if "sinks" in head:
            lse[:] = torch.from_numpy(np.broadcast_to(head["sinks"], (H,)).copy())[:, None]
    return torch.zeros((B, H, Lq, Dv), dtype=query.dtype), lse


def _sdpa_shape(query, key, value):
    """The output's shape ``[B, H, Lq, Dv]`` of 4-D query, key and value;
    peak.attention's ValueErrors for shapes that do not fit, raised here
    too (torch.compile meets them while tracing)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != 4:
            raise ValueError(f"{name}: expected [B, H, L, D] (or [H, L, D] for all three), "
                             f"got shape {tuple(t.shape)}")
    B, H, Lq, D = query.shape
    if (key.shape[0], key.shape[3]) != (B, D):
        raise ValueError(f"key: shape {tuple(key.shape)} does not match query "
                         f"{tuple(query.shape)} (batch, head_dim)")
    if tuple(value.shape[:3]) != tuple(key.shape[:3]):
        raise ValueError(f"value: shape {tuple(value.shape)} does not match key "
                         f"{tuple(key.shape)}")
    if (key.shape[1] == 0 and H) or (key.shape[1] and H % key.shape[1]):
        raise ValueError(f"k/v heads ({key.shape[1]}) must divide q heads ({H})")
    return (B, H, Lq, value.shape[3])


def softmax(input, dim=-1, *, dtype=None, scale=None, attn_mask=None, is_causal=False,
            softcap=None, alibi=None, alibi_slopes=None, sinks=None, threads=None, pool=None):
    """``torch.softmax(input, dim, dtype=dtype)`` on peak (peak.softmax; the
    custom operator ``peak::softmax``).

    input: float32, float16 or bfloat16 (the last needs ml_dtypes), read in
    place; the result has dtype's type (None: input's; float32, float16 or
    bfloat16), computed in float32 and rounded once.  dim: any axis (peak
    works over the last one: another is moved there and back).

    Beyond torch.softmax (keywords, peak.softmax says the details; they
    need the last dim and read input as ``[B, H, Lq, Lk]`` with fewer axes
    as leading 1s): scale (multiplies the scores first; None: 1),
    attn_mask (bool, True = take part, or float added, a 16-bit one
    widened into a float32 copy; broadcasting to input's shape), is_causal (top-left), softcap, alibi, alibi_slopes and
    sinks as scaled_dot_product_attention takes them.  Masked entries are
    0 and a row with nothing visible is all zeros.  threads, pool: as the
    module docstring says (given, the plain path)."""
    _check("input", input, True)
    if dtype is not None and dtype not in _FLOATS:
        raise TypeError(f"dtype {dtype}: torch.float32, float16 or bfloat16 expected")
    if dtype == torch.bfloat16 and not _BF16:
        raise TypeError("dtype: bfloat16 results need ml_dtypes (pip install ml_dtypes)")
    nd = input.dim()
    if not -max(nd, 1) <= dim < max(nd, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(nd, 1)}, {max(nd, 1) - 1}], but got {dim})")
    dim = dim % max(nd, 1)
    extras = attn_mask is not None or is_causal or softcap is not None or alibi is not None \
        or alibi_slopes is not None or sinks is not None
    if extras and (nd > 4 or dim != nd - 1):
        raise ValueError("softmax: attn_mask, is_causal, softcap, alibi and sinks need the last "
                         f"dim of an input of at most 4 dims, got dim {dim} of shape "
                         f"{tuple(input.shape)}")
    if attn_mask is not None:
        _check_mask(attn_mask)
    moved = nd > 1 and dim != nd - 1
    if moved:
        input = input.movedim(dim, -1)
    op = _op("softmax", threads, pool)
    out = None
    args = _op_logits(scale, softcap, alibi, alibi_slopes, sinks) if op is not None else None
    if args is not None:
        scale_f, softcap_f, slopes, sink_t = args
        out = op(input, dtype, scale_f, attn_mask, bool(is_causal), softcap_f, alibi, slopes,
                 sink_t)
    if out is None:
        out = _softmax_impl(input, dtype, scale, attn_mask, is_causal, softcap, alibi,
                            _per_head("alibi_slopes", alibi_slopes), _per_head("sinks", sinks),
                            _where(threads, pool))
    return out.movedim(-1, dim) if moved else out


def _softmax_impl(input, dtype, scale, attn_mask, is_causal, softcap, alibi, alibi_slopes,
                  sinks, where):
    """peak.softmax over input's last axis: a new tensor of input's shape."""
    shape, dtype = input.shape, input.dtype if dtype is None else dtype
    if input.numel() == 0:
        return torch.empty(shape, dtype=dtype)
    x = input
    if x.dim() == 0 or x.dim() > 4:  # peak takes 1 to 4 axes; the rows are what count
        x = x.reshape(-1, shape[-1] if x.dim() else 1)
    xs = _np("input", x, True)
    out = np.empty(xs.shape, _np_dtype(dtype))
    _peak.softmax(xs, scale=scale, causal=is_causal, softcap=softcap, alibi=alibi,
                  alibi_slopes=None if alibi_slopes is None else
                  _per_head("alibi_slopes", alibi_slopes),
                  sinks=None if sinks is None else _per_head("sinks", sinks), out=out,
                  **_mask_args(attn_mask), **where)
    return _tensor(out).reshape(shape)


def attention_merge(parts, *, return_lse=False, threads=None, pool=None):
    """Merges attentions of the same queries over disjoint sets of keys
    into the attention over all of them (peak.attention_merge,
    peak_attention_merge): the split-KV / context-parallel step.

    parts: a sequence of ``(out, lse)`` pairs as
    ``scaled_dot_product_attention(..., return_lse=True)`` returns them: out
    ``[B, H, Lq, Dv]``, lse ``[B, H, Lq]`` (or ``[H, Lq, Dv]`` and ``[H,
    Lq]``), merged in the order given, which is part of the result's bytes.
    A row that no part saw is zeros with lse -inf.  Returns a new tensor
    ``[B, H, Lq, Dv]``, or ``(out, lse)`` when return_lse.  Not a custom
    operator (the plain path).  threads, pool: as the module docstring says
    (default torch.get_num_threads() workers)."""
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
    t = _tensor(out)
    if squeeze:
        t = t.squeeze(0)
    if not return_lse:
        return t
    lt = torch.from_numpy(lse)
    return t, (lt.squeeze(0) if squeeze else lt)


# ---- embedding + positional encoding ---------------------------------------------------

def _ids_ok(t):
    return isinstance(t, torch.Tensor) and t.device.type == "cpu" and \
        not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool


def embed_pe(input, weight, scale=1.0, *, pe=None, positions=None, pos0=0, padding_idx=None,
             layout="interleaved", mode="exact", base=10000.0, threads=None, pool=None):
    """``F.embedding(input, weight) * scale + PE(pos)`` in one pass
    (peak_embed_pe; the custom operator ``peak::embed_pe``): input
    ``[batch, seq]`` or ``[n]`` token ids, weight ``[vocab, d_model]``
    float32, float16 or bfloat16, read in place; the result takes weight's
    type (float32 arithmetic, rounded once).  pe: a float32 ``[rows,
    d_model]`` tensor or None (the sinusoid on the fly); positions, pos0,
    padding_idx, layout, mode, base as peak.embed_pe.  input and positions
    as CPU integer tensors go through the operator, anything else (NumPy
    arrays, sequences, other devices) the plain path.  threads, pool: as the
    module docstring says."""
    _check("weight", weight, True)
    if pe is not None:
        _check("pe", pe)
    op = _op("embed_pe", threads, pool)
    if op is not None and _ids_ok(input) and (positions is None or _ids_ok(positions)) and \
            _real(scale) and _real(base) and isinstance(pos0, int) and \
            not isinstance(pos0, bool) and (padding_idx is None or (
                isinstance(padding_idx, int) and not isinstance(padding_idx, bool))) and \
            isinstance(layout, str) and isinstance(mode, str):
        if input.dim() not in (1, 2):
            raise ValueError(f"ids: expected an [n] or [batch, seq] tensor, got "
                             f"{tuple(input.shape)}")
        return op(input, weight, float(scale), pe, positions, pos0, padding_idx, layout, mode,
                  float(base))
    return _embed_pe_impl(input, weight, scale, pe, positions, pos0, padding_idx, layout, mode,
                          base, _where(threads, pool))


def _embed_pe_impl(input, weight, scale, pe, positions, pos0, padding_idx, layout, mode, base,
                   where):
    ids = input.detach().cpu().numpy() if isinstance(input, torch.Tensor) else input
    pos = positions.detach().cpu().numpy() if isinstance(positions, torch.Tensor) else positions
    if np.size(ids) == 0:  # no tokens: an empty result, as F.embedding
        _check("weight", weight, True)
        if np.asarray(ids).dtype.kind not in "iu":
            raise TypeError(f"input: dtype {np.asarray(ids).dtype}, expected integer ids")
        if np.ndim(ids) not in (1, 2):
            raise ValueError(f"ids: expected an [n] or [batch, seq] tensor, got "
                             f"{tuple(np.shape(ids))}")
        _peak._pe_params(layout, mode, base)
        _peak._cint("pos0", pos0)
        return torch.empty(tuple(np.shape(ids)) + (weight.shape[-1],), dtype=weight.dtype)
    out = _peak.embed_pe(ids, _np("weight", weight, half=True), scale=scale,
                         pe=None if pe is None else np.ascontiguousarray(_np("pe", pe)),
                         positions=pos, pos0=pos0, padding_idx=padding_idx, layout=layout,
                         mode=mode, base=base, **where)
    return _tensor(out)


# ---- LayerNorm -------------------------------------------------------------------------

def _check_affine(name, t):
    """weight or bias: None or a CPU float32 / 16-bit tensor (widened to
    float32 for peak)."""
    if t is None:
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{name}: peak runs on the CPU; tensor is on {t.device}")
    if t.dtype not in _FLOATS:
        raise TypeError(f"{name}: dtype {t.dtype}, expected torch.float32 (float16 and "
                        "bfloat16 are widened)")
    if t.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(f"{name} requires grad: peak computes forward passes only; call "
                           "under torch.no_grad() or torch.inference_mode()")


def _affine(name, t):
    """weight or bias as the float32 peak takes: a 16-bit module's
    parameters are widened (exact; d_model floats)."""
    if t is None:
        return None
    return _np(name, t.detach().float() if t.dtype in _HALF else t)


def add_layer_norm(x, residual, weight=None, bias=None, eps=1e-5, *, threads=None, pool=None):
    """``F.layer_norm(x + residual, (d,), weight, bias, eps)`` in one pass
    (the custom operator ``peak::add_layer_norm``; residual None:
    ``peak::layer_norm``).  Returns ``(normed, x + residual)``: the sum is
    what a pre-norm block carries on (None without a residual).  x and
    residual: float32, float16 or bfloat16, read in place; the results take
    x's type (computed in float32, rounded once); 16-bit weight and bias are
    widened.  threads, pool: as the module docstring says."""
    _check("x", x, True)
    if residual is not None:
        _check("residual", residual, True)
        if residual.shape != x.shape:
            raise ValueError(f"residual: shape {tuple(residual.shape)}, expected "
                             f"{tuple(x.shape)}")
    _check_affine("weight", weight)
    _check_affine("bias", bias)
    op = _op("layer_norm" if residual is None else "add_layer_norm", threads, pool)
    if op is not None and _real(eps):
        if residual is None:
            return op(x, weight, bias, float(eps)), None
        y, s = op(x, residual, weight, bias, float(eps))
        return y, s
    return _add_layer_norm_impl(x, residual, weight, bias, eps, _where(threads, pool))


def _add_layer_norm_impl(x, residual, weight, bias, eps, where):
    if x.numel() == 0 and x.dim() > 0 and x.shape[-1] > 0:  # no rows: empty, as torch
        _check("x", x, True)
        for name, t in (("weight", weight), ("bias", bias)):
            a = _affine(name, t)
            if a is not None and a.shape != (x.shape[-1],):
                raise ValueError(f"{name}: shape {a.shape}, expected ({x.shape[-1]},)")
        if not _real(eps):
            raise TypeError(f"eps: expected a real number, got {type(eps).__name__}")
        _peak._check_eps(eps)
        s = None if residual is None else torch.empty_like(x)
        return torch.empty_like(x), s
    xs = _np("x", x, half=True)
    rs = None if residual is None else _np("residual", residual, half=True)
    s = None if residual is None else np.empty(xs.shape, xs.dtype)
    y = _peak.add_layernorm(np.ascontiguousarray(xs),
                            None if rs is None else np.ascontiguousarray(rs),
                            _affine("weight", weight), _affine("bias", bias), eps, sum_out=s,
                            **where)
    return _tensor(y), (None if s is None else _tensor(s))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, *, threads=None,
               pool=None):
    """``F.layer_norm`` over the last axis (normalized_shape must be
    ``(x.shape[-1],)``; the custom operator ``peak::layer_norm``).  threads,
    pool: as the module docstring says."""
    if isinstance(normalized_shape, numbers.Integral):  # as F.layer_norm takes it
        normalized_shape = (int(normalized_shape),)
    if tuple(normalized_shape) != (x.shape[-1],):
        raise ValueError("peak normalises over the last axis only: normalized_shape must be "
                         f"({x.shape[-1]},), got {tuple(normalized_shape)}")
    return add_layer_norm(x, None, weight, bias, eps, threads=threads, pool=pool)[0]


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` whose forward runs on peak when no gradient is
    needed (same parameters, same state_dict; PyTorch's own code otherwise):
    the custom operator ``peak::layer_norm``.  ``LayerNorm.from_module(ln)``
    converts an existing module.  threads, pool (keywords, attributes of the
    same names): where peak runs, as the module docstring says (default
    torch.get_num_threads() workers; set, the plain path)."""

    def __init__(self, *args, threads=None, pool=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.threads, self.pool = threads, pool

    @classmethod
    def from_module(cls, ln, *, threads=None, pool=None):
        """A peak LayerNorm with ln's shape, eps, affine flags and
        parameters (their dtype too)."""
        bias = ln.bias is not None or not ln.elementwise_affine
        p = ln.weight if ln.weight is not None else ln.bias
        new = cls(ln.normalized_shape, eps=ln.eps, elementwise_affine=ln.elementwise_affine,
                  **({} if bias else {"bias": False}),
                  **({} if p is None else {"dtype": p.dtype}), threads=threads, pool=pool)
        new.load_state_dict(ln.state_dict())
        return new

    def forward(self, x):
        if (len(self.normalized_shape) != 1 or x.device.type != "cpu"
                or x.dtype not in _FLOATS
                or (x.dtype == torch.bfloat16 and not _BF16)
                or (x.dtype != torch.float32 and x.shape[-1] > 16384)  # peak's 16-bit limit
                or _needs_grad(x, self.weight, self.bias)):
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
        seq = x.size(1 if self.batch_first else 0)
        if x.dim() != 3 or seq > self.pe.size(1):
            raise ValueError(f"x: shape {tuple(x.shape)}: expected 3 dimensions and at most "
                             f"{self.pe.size(1)} positions (the table's)")
        op = _op("pe_add", self.threads, self.pool)
        if op is not None:
            return self.dropout(op(x, self.pe[0], self.batch_first))
        return self.dropout(_pe_add_impl(x, self.pe[0], self.batch_first,
                                         _where(self.threads, self.pool)))


def _pe_add_impl(x, pe, batch_first, where):
    """x + pe[:seq] (peak_pe_add) for x [batch, seq, d] (batch_first) or
    [seq, batch, d], pe [max_len, d]: a new tensor."""
    y = x.detach().clone(memory_format=torch.contiguous_format)  # out of place, like x + pe
    view = y if batch_first else y.transpose(0, 1)
    if view.numel():
        _peak.pe_add(view.numpy(), pe=_np("pe", pe), **where)
    return y


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


# ---- rotary position embedding (transformers drop-ins) --------------------------------

def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _same_bits(a, b):
    return torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


def _rope_table(cos, sin):
    """peak's cache rows ``[rows, D]`` (n cosines, then n sines) from
    transformers' ``[..., D]`` cos and sin, whose two halves are equal;
    None when they are not (bit for bit: -0.0 and NaN payloads count), as
    then peak's rotation would not reproduce transformers' products."""
    n = cos.shape[-1] // 2
    c, s = cos[..., :n], sin[..., :n]
    if not (_same_bits(c, cos[..., n:]) and _same_bits(s, sin[..., n:])):
        return None
    return torch.cat((c, s), dim=-1).reshape(-1, 2 * n).contiguous().numpy()


def _rotary_layout(q, k, cos, sin, position_ids, unsqueeze_dim):
    """The layout ("bhld" or "blhd") of peak.rope_apply for
    apply_rotary_pos_emb's arguments, or None when peak cannot take them:
    the checks on types, devices, shapes and strides, which read no data
    (torch.compile traces them).  _rotary_plan() makes the one that does."""
    tensors = (q, k, cos, sin)
    if not all(isinstance(t, torch.Tensor) for t in tensors) or _needs_grad(*tensors):
        return None
    if any(t.device.type != "cpu" or t.dtype != torch.float32 for t in tensors):
        return None
    if q.dim() != 4 or k.dim() != 4 or unsqueeze_dim not in (1, 2, -3, -2) or \
            q.numel() == 0 or k.numel() == 0:
        return None
    layout = "bhld" if unsqueeze_dim in (1, -3) else "blhd"
    ax_l = 2 if layout == "bhld" else 1
    B, L, D = q.shape[0], q.shape[ax_l], q.shape[3]
    if (k.shape[0], k.shape[ax_l], k.shape[3]) != (B, L, D) or D % 2 or D > _peak.ROPE_MAX_DIM:
        return None
    if q.stride(3) != 1 or k.stride(3) != 1 or cos.shape != sin.shape:
        return None
    if position_ids is not None and cos.dim() == 2:
        # transformers before 4.38: cos, sin are [max_len, D] tables
        # indexed by position_ids [B or 1, L]
        if not isinstance(position_ids, torch.Tensor) or position_ids.device.type != "cpu" or \
                position_ids.dtype not in (torch.int64, torch.int32) or \
                position_ids.dim() != 2 or position_ids.shape[0] not in (1, B) or \
                position_ids.shape[1] != L or cos.shape[1] != D or cos.shape[0] == 0:
            return None
        return layout
    if cos.dim() != 3 or cos.shape[0] not in (1, B) or cos.shape[1:] != (L, D):
        return None
    return layout


def _rotary_plan(q, cos, sin, position_ids, layout):
    """(table, positions) for peak.rope_apply of arguments _rotary_layout()
    accepted, or None when cos or sin's halves differ."""
    table = _rope_table(cos.detach(), sin.detach())
    if table is None:
        return None
    if position_ids is not None and cos.dim() == 2:
        return table, position_ids.detach().numpy()
    # row b * L + l of the table is token (b, l); a batch of 1 serves every b
    B, L = q.shape[0], q.shape[2 if layout == "bhld" else 1]
    positions = None if cos.shape[0] == 1 else np.arange(B * L, dtype=np.int64).reshape(B, L)
    return table, positions


def _rotary_torch(q, k, cos, sin, position_ids, unsqueeze_dim):
    """transformers' apply_rotary_pos_emb in PyTorch."""
    if position_ids is not None and isinstance(cos, torch.Tensor) and cos.dim() == 2:
        cos, sin = cos[position_ids], sin[position_ids]
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (_rotate_half(q) * sin), (k * cos) + (_rotate_half(k) * sin)


def _rotary_impl(q, k, cos, sin, position_ids, unsqueeze_dim, layout, where):
    """apply_rotary_pos_emb of arguments _rotary_layout() accepted: new
    tensors in q's and k's memory order (as torch's own result), by peak,
    or by the PyTorch expression when cos or sin's halves differ."""
    plan = _rotary_plan(q, cos, sin, position_ids, layout)
    outs = [torch.empty_like(q), torch.empty_like(k)]
    if plan is None:
        for out, r in zip(outs, _rotary_torch(q.detach(), k.detach(), cos.detach(),
                                              sin.detach(), position_ids, unsqueeze_dim)):
            out.copy_(r)
        return tuple(outs)
    table, positions = plan
    for t, out in zip((q, k), outs):
        _peak.rope_apply(t.detach().numpy(), positions, layout=layout, cache=table,
                         out=out.numpy(), **where)
    return tuple(outs)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, *, threads=None,
                         pool=None):
    """Drop-in for transformers' ``apply_rotary_pos_emb`` of LlamaAttention
    (and the models that copy it: Mistral, Qwen2, Gemma, ...) on peak:
    returns ``(q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) *
    sin)`` with cos, sin unsqueezed at unsqueeze_dim, bit for bit
    transformers' float32 result (peak rounds each product and the sum as
    those separate torch operations do).

    q ``[B, H, L, D]`` and k ``[B, Hkv, L, D]`` (unsqueeze_dim 1; 2: ``[B,
    L, H, D]``), any strides with a contiguous last axis; cos, sin ``[B or 1,
    L, D]`` as transformers' rotary modules (and :class:`RotaryEmbedding`)
    return them, whose two halves are equal: peak builds its cache rows
    from the first half, once for q and k.  position_ids: ignored, as
    transformers >= 4.38 does, unless cos and sin are 2-D ``[max_len, D]``
    tables (the older signature): then token (b, l) takes row
    ``position_ids[b, l]``.  Returns new tensors, in q's and k's memory
    order.  These tensors go through the custom operator
    ``peak::apply_rotary_pos_emb``.

    Falls back to the same PyTorch expression (same result, PyTorch's
    speed) for what peak cannot take: dtypes other than float32, tensors
    off the CPU, a last axis that is not contiguous, shapes other than the
    above, D odd or above peak.ROPE_MAX_DIM, and autograd recording (so
    training still works); cos or sin halves that differ too (inside the
    operator, the expression computed eagerly).  threads, pool: as the
    module docstring says (default torch.get_num_threads() workers)."""
    layout = _rotary_layout(q, k, cos, sin, position_ids, unsqueeze_dim)
    if layout is None:
        return _rotary_torch(q, k, cos, sin, position_ids, unsqueeze_dim)
    op = _op("apply_rotary_pos_emb", threads, pool)
    if op is not None:
        q2, k2 = op(q, k, cos, sin, position_ids if cos.dim() == 2 else None, unsqueeze_dim)
        return q2, k2
    return _rotary_impl(q, k, cos, sin, position_ids, unsqueeze_dim, layout,
                        _where(threads, pool))


_HF_SCALINGS = {"default": "none", "linear": "linear", "dynamic": "dynamic", "yarn": "yarn",
                "llama3": "llama3", "longrope": "longrope"}


def _config_rope(config, head_dim, max_position_embeddings, layer_type):
    """(rope_parameters dict, head_dim, max_position_embeddings) of a
    transformers config (rope_parameters in transformers 5; rope_scaling,
    rope_theta and partial_rotary_factor before) or of a plain dict."""
    if isinstance(config, dict):
        rp = dict(config)
        hd = rp.pop("head_dim", None) if head_dim is None else head_dim
        mp = rp.pop("max_position_embeddings", None) if max_position_embeddings is None \
            else max_position_embeddings
        orig = None
    else:
        rp = getattr(config, "rope_parameters", None)
        if rp is None:  # transformers 4
            rp = dict(getattr(config, "rope_scaling", None) or {})
            rp.setdefault("rope_theta", getattr(config, "rope_theta", 10000.0))
            prf = getattr(config, "partial_rotary_factor", None)
            if prf is not None:
                rp.setdefault("partial_rotary_factor", prf)
        rp = dict(rp)
        hd = head_dim
        if hd is None:
            hd = getattr(config, "head_dim", None) or \
                config.hidden_size // config.num_attention_heads
        mp = max_position_embeddings
        if mp is None:
            mp = getattr(config, "max_position_embeddings", None)
        orig = getattr(config, "original_max_position_embeddings", None)
    if layer_type is not None:
        rp = dict(rp[layer_type])
    elif "rope_theta" not in rp and rp and all(isinstance(v, dict) for v in rp.values()):
        raise ValueError(f"rope parameters per layer type ({', '.join(rp)}): pass layer_type=")
    if hd is None:
        raise ValueError("head_dim: not in the config; pass head_dim=")
    rope_type = rp.get("rope_type", rp.get("type", "default"))
    if rope_type in ("llama3", "yarn", "longrope") and "original_max_position_embeddings" not in rp:
        # transformers' standardize_rope_params
        rp["original_max_position_embeddings"] = orig if orig is not None else mp
    rp["rope_type"] = rope_type
    return rp, int(hd), mp


def _hf_dynamic_base(base, factor, seq_len, max_pos, dim):
    """The base LlamaRotaryEmbedding grows to for dynamic NTK: its seq_len
    is max(position_ids) + 1, a tensor, so transformers'
    ``base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim -
    2))`` runs on float32 tensors (each step rounded to float32; the power
    as std::pow(float, double)), not in doubles as peak's DYNAMIC scheme
    and transformers' init function with an int seq_len do; the two bases
    differ by an ULP at some lengths (131072 of max_pos 4096, factor 2, dim
    128), and at position 1e5 an ULP of inv_freq moves the angle by ~0.01
    rad."""
    f32 = np.float32
    t = f32(f32(factor) * f32(seq_len))
    t = f32(t / f32(max_pos))
    t = f32(t - f32(factor - 1))
    t = f32(math.pow(float(t), dim / (dim - 2)))
    return float(f32(f32(base) * t))


# The rope parameters each scheme cannot do without (a config lacking one is
# an error, named, not a KeyError).
_HF_REQUIRED = {"llama3": ("factor", "low_freq_factor", "high_freq_factor",
                           "original_max_position_embeddings"),
                "longrope": ("short_factor", "long_factor")}


class RotaryEmbedding(nn.Module):
    """Drop-in for transformers' LlamaRotaryEmbedding (and the rotary modules
    that copy it) on peak: ``forward(x, position_ids)`` returns ``(cos,
    sin)``, each ``position_ids.shape + (rotary_dim,)`` with two equal
    halves, the attention scaling included, in x's dtype and on x's device,
    for apply_rotary_pos_emb().  The values come from peak.rope_cache().

    config: a transformers config (``config.rope_parameters`` in
    transformers 5; ``rope_scaling`` + ``rope_theta`` +
    ``partial_rotary_factor`` in older ones), or a ``rope_parameters`` dict
    (then head_dim and max_position_embeddings as keywords or keys).
    rope_type: default, linear, dynamic, yarn, llama3 or longrope (others:
    ValueError).  rotary_dim = int(head_dim * partial_rotary_factor) (head_dim:
    ``config.head_dim`` or hidden_size / num_attention_heads; the default
    type honours partial_rotary_factor as Phi's and GPT-NeoX's modules do,
    where LlamaRotaryEmbedding's own ignores it).  layer_type: the key of
    rope parameters nested per layer type.  device: accepted for the
    signature of transformers 4 (peak computes on the CPU; the results go
    to x's device).

    mode "hf" (default): transformers' float32 arithmetic, cos/sin within 2
    ULP of LlamaRotaryEmbedding's (transformers 5.24 / torch 2.15 on an
    AVX2 CPU; peak.h, PEAK_ROPE_HF_F32); "exact": the formulas to 2^-23.

    Length-dependent schemes, chosen per call from seq_len = max(position_ids)
    + 1 and handed to peak explicitly:
      - dynamic: the state transformers keeps, and only that: its
        high-water mark max_seq_len_cached (the attribute of the same
        name).  seq_len above it grows it; seq_len below
        max_position_embeddings resets it; the base is scaled for it (mode
        "hf": as transformers' module computes it, in float32 tensors;
        "exact": peak's scheme "dynamic" with that seq_len).
      - longrope: the long factors when seq_len >
        original_max_position_embeddings, else the short ones (as
        transformers' module); nothing is kept.
    ``params(seq_len)`` gives the :class:`peak.RopeParams` a call of that
    length uses (not moving the dynamic state).  threads, pool (attributes
    of the same names): where peak runs, as the module docstring says."""

    def __init__(self, config, device=None, *, mode="hf", head_dim=None,
                 max_position_embeddings=None, layer_type=None, threads=None, pool=None):
        super().__init__()
        if mode not in ("hf", "exact"):
            raise ValueError(f"mode {mode!r}: 'hf' or 'exact'")
        rp, hd, max_pos = _config_rope(config, head_dim, max_position_embeddings, layer_type)
        rope_type = rp["rope_type"]
        if rope_type not in _HF_SCALINGS:
            raise ValueError(f"rope_type {rope_type!r}: peak has {', '.join(_HF_SCALINGS)}")
        self.rope_type, self.mode = rope_type, mode
        self.threads, self.pool = threads, pool
        self.rotary_dim = int(hd * rp.get("partial_rotary_factor", 1.0))
        self.max_seq_len_cached = self.original_max_seq_len = max_pos
        if "rope_theta" not in rp:
            raise ValueError("rope parameters without rope_theta")
        scaling = _HF_SCALINGS[rope_type]
        missing = [k for k in _HF_REQUIRED.get(scaling, ()) if rp.get(k) is None]
        if missing:  # transformers' own validation requires them too
            raise ValueError(f"rope_type {rope_type!r} needs {', '.join(missing)} in the "
                             f"config's rope parameters")
        kw = {"base": float(rp["rope_theta"]), "mode": mode, "scaling": scaling}
        orig = rp.get("original_max_position_embeddings")
        factor = rp.get("factor")
        if factor is None and scaling in ("yarn", "longrope") and max_pos and orig:
            factor = max_pos / orig  # transformers' default (DeepSeek-V3, Phi-3)
        if factor is not None:
            kw["factor"] = factor
        if scaling == "dynamic":
            if max_pos is None:
                raise ValueError("dynamic: max_position_embeddings needed")
            kw["original_max_position"] = max_pos  # transformers scales from it
        elif scaling in ("yarn", "llama3", "longrope"):
            kw["original_max_position"] = orig
        if scaling == "yarn":
            kw.update(beta_fast=rp.get("beta_fast") or 32.0, beta_slow=rp.get("beta_slow") or 1.0,
                      truncate=bool(rp.get("truncate", True)), mscale=rp.get("mscale"),
                      mscale_all_dim=rp.get("mscale_all_dim"))
        if scaling in ("yarn", "longrope"):
            kw["attention_factor"] = rp.get("attention_factor")
        if scaling == "llama3":
            kw.update(low_freq_factor=rp["low_freq_factor"],
                      high_freq_factor=rp["high_freq_factor"])
        if scaling == "longrope":
            kw["longrope_factors"] = rp["short_factor"]
            self._long = _peak.RopeParams(**dict(kw, longrope_factors=rp["long_factor"]))
        self._params = _peak.RopeParams(**kw)
        for p in (self._params, getattr(self, "_long", None)):
            if p is not None:  # peak's checks now rather than at the first forward()
                _peak.rope_cache(1, self.rotary_dim, params=p)
        # peak::rotary_embedding's arguments: the parameters as JSON
        self._json = _rope_json(self._params)
        self._long_json = _rope_json(self._long) if rope_type == "longrope" else None

    def extra_repr(self):
        return f"rope_type={self.rope_type!r}, rotary_dim={self.rotary_dim}, mode={self.mode!r}"

    def params(self, seq_len):
        """The peak.RopeParams of a forward() whose largest position is
        seq_len - 1, given the current dynamic state."""
        return self._params_for(seq_len, self.max_seq_len_cached)

    def _params_for(self, seq_len, cached):
        p = self._params
        if self.rope_type == "longrope":
            if seq_len > p.original_max_position:
                return self._long
            return p
        if self.rope_type == "dynamic" and cached > self.original_max_seq_len:
            if self.mode == "exact":
                return dataclasses.replace(p, seq_len=cached)
            base = _hf_dynamic_base(p.base, p.factor, cached, self.original_max_seq_len,
                                    self.rotary_dim)
            return dataclasses.replace(p, scaling="none", base=base)
        return p

    def forward(self, x, position_ids):
        if not isinstance(position_ids, torch.Tensor) or position_ids.is_floating_point() or \
                position_ids.is_complex() or position_ids.dtype == torch.bool:
            raise TypeError("position_ids: an integer tensor expected")
        if position_ids.numel() == 0:
            raise ValueError("position_ids: empty")
        op = _op("rotary_embedding", self.threads, self.pool)
        if op is not None and self.rope_type != "dynamic" and \
                position_ids.device.type == "cpu":
            cos, sin = op(position_ids, self.rotary_dim, self._json, self._long_json)
            return cos.to(device=x.device, dtype=x.dtype), sin.to(device=x.device, dtype=x.dtype)
        pos = position_ids.detach().cpu().to(torch.int64).numpy()
        if pos.min() < 0:  # before the dynamic state moves
            raise _peak.OutOfRange(2, f"position_ids: negative position {int(pos.min())}")
        seq_len = int(pos.max()) + 1
        cached = self.max_seq_len_cached
        if self.rope_type == "dynamic":
            # transformers' dynamic_frequency_update: growth, then reset
            if seq_len > cached:
                self.max_seq_len_cached = seq_len
            elif seq_len < self.original_max_seq_len < cached:
                self.max_seq_len_cached = self.original_max_seq_len
        params = self._params_for(seq_len, self.max_seq_len_cached)
        cos, sin = _rotary_cos_sin(pos, self.rotary_dim, params,
                                   _where(self.threads, self.pool))
        return cos.to(device=x.device, dtype=x.dtype), sin.to(device=x.device, dtype=x.dtype)


def _rope_json(p):
    """A peak.RopeParams as the JSON string peak::rotary_embedding takes."""
    return json.dumps(dataclasses.asdict(p), sort_keys=True)


@functools.lru_cache(maxsize=64)
def _rope_from_json(s):
    return _peak.RopeParams(**json.loads(s))


def _rope_rows(pos, rotary_dim, params, where):
    """peak's cache rows of the positions pos (int64 [N]): one
    rope_cache() call per run of consecutive distinct positions (a value
    depends only on its position, so the split changes no bit)."""
    uniq, inverse = np.unique(pos, return_inverse=True)
    rows = np.empty((uniq.size, rotary_dim), np.float32)
    breaks = np.flatnonzero(np.diff(uniq) != 1) + 1
    for a, b in zip(np.concatenate(([0], breaks)), np.concatenate((breaks, [uniq.size]))):
        _peak.rope_cache(int(b - a), rotary_dim, int(uniq[a]), params=params, out=rows[a:b],
                         **where)
    return rows[inverse.reshape(-1)]


def _rotary_cos_sin(pos, rotary_dim, params, where):
    """RotaryEmbedding's float32 (cos, sin) of the positions pos (int64,
    any shape): new tensors ``pos.shape + (rotary_dim,)``, two equal halves
    each."""
    rows = _rope_rows(pos.reshape(-1), rotary_dim, params, where)
    n = rotary_dim // 2
    table = torch.from_numpy(rows).reshape(pos.shape + (2 * n,))
    cos, sin = table[..., :n], table[..., n:]
    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)


def _rotary_embedding_impl(position_ids, rotary_dim, params, long_params, where):
    """RotaryEmbedding.forward's values for the schemes without state
    (every one but dynamic): params, or long_params (longrope's long
    factors) for a largest position at or beyond its
    original_max_position."""
    pos = position_ids.detach().cpu().to(torch.int64).numpy()
    if pos.min() < 0:
        raise _peak.OutOfRange(2, f"position_ids: negative position {int(pos.min())}")
    p = _rope_from_json(params)
    if long_params is not None and int(pos.max()) + 1 > p.original_max_position:
        p = _rope_from_json(long_params)
    return _rotary_cos_sin(pos, rotary_dim, p, where)


# ---- custom operators (torch >= 2.4) ---------------------------------------------------
#
# Each calls the plain path's function with torch.get_num_threads() workers
# (read when it runs) and returns new tensors (never views of its inputs);
# its fake gives the outputs' shapes, dtypes and strides, the same as the
# real ones: contiguous, but apply_rotary_pos_emb's in q's and k's memory
# order (torch.empty_like).  No autograd formula: the functions above
# refuse autograd recording before they get here.

def _register():
    Tensor = torch.Tensor
    # inputs exactly as the caller laid them out (rope's outputs follow
    # them): inductor's default for custom operators in recent torch, asked
    # for where custom_op takes tags
    kw = {}
    if hasattr(torch.Tag, "needs_exact_strides") and \
            "tags" in inspect.signature(torch.library.custom_op).parameters:
        kw["tags"] = (torch.Tag.needs_exact_strides,)

    def one_device(name, fake):
        """The fake, after a check that every tensor is on one device:
        torch runs the fake (not peak) when one input is on the meta device
        and the others on the CPU, and its outputs would be uninitialised
        CPU memory."""
        def checked(*args, **kwargs):
            devices = {t.device for t in (*args, *kwargs.values()) if isinstance(t, Tensor)}
            if len(devices) > 1:
                raise ValueError(f"peak::{name}: tensors on {sorted(map(str, devices))}; "
                                 "peak runs on the CPU, every tensor on one device")
            return fake(*args, **kwargs)
        return checked

    def define(name, fn, fake):
        op = torch.library.custom_op(f"peak::{name}", fn, mutates_args=(), **kw)
        op.register_fake(one_device(name, fake))
        return getattr(torch.ops.peak, name)

    def sdpa(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
             is_causal: bool = False, scale: Optional[float] = None,
             softcap: Optional[float] = None, alibi: Optional[str] = None,
             alibi_slopes: Optional[Tensor] = None, sinks: Optional[Tensor] = None) -> Tensor:
        return _sdpa_impl(query, key, value, attn_mask, is_causal, scale, softcap, alibi,
                          alibi_slopes, sinks, False, _where(None, None))[0]

    def sdpa_fake(query, key, value, attn_mask=None, is_causal=False, scale=None,
                  softcap=None, alibi=None, alibi_slopes=None, sinks=None):
        return query.new_empty(_sdpa_shape(query, key, value))

    def sdpa_lse(query: Tensor, key: Tensor, value: Tensor,
                 attn_mask: Optional[Tensor] = None, is_causal: bool = False,
                 scale: Optional[float] = None, softcap: Optional[float] = None,
                 alibi: Optional[str] = None, alibi_slopes: Optional[Tensor] = None,
                 sinks: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        return _sdpa_impl(query, key, value, attn_mask, is_causal, scale, softcap, alibi,
                          alibi_slopes, sinks, True, _where(None, None))

    def sdpa_lse_fake(query, key, value, attn_mask=None, is_causal=False, scale=None,
                      softcap=None, alibi=None, alibi_slopes=None, sinks=None):
        shape = _sdpa_shape(query, key, value)
        return query.new_empty(shape), query.new_empty(shape[:3], dtype=torch.float32)

    def softmax_op(input: Tensor, dtype: Optional[torch.dtype] = None,
                   scale: Optional[float] = None, attn_mask: Optional[Tensor] = None,
                   is_causal: bool = False, softcap: Optional[float] = None,
                   alibi: Optional[str] = None, alibi_slopes: Optional[Tensor] = None,
                   sinks: Optional[Tensor] = None) -> Tensor:
        return _softmax_impl(input, dtype, scale, attn_mask, is_causal, softcap, alibi,
                             alibi_slopes, sinks, _where(None, None))

    def softmax_fake(input, dtype=None, scale=None, attn_mask=None, is_causal=False,
                     softcap=None, alibi=None, alibi_slopes=None, sinks=None):
        return input.new_empty(input.shape, dtype=input.dtype if dtype is None else dtype)

    def ln(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
           eps: float = 1e-5) -> Tensor:
        return _add_layer_norm_impl(x, None, weight, bias, eps, _where(None, None))[0]

    def ln_fake(x, weight=None, bias=None, eps=1e-5):
        return x.new_empty(x.shape)

    def add_ln(x: Tensor, residual: Tensor, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> tuple[Tensor, Tensor]:
        return _add_layer_norm_impl(x, residual, weight, bias, eps, _where(None, None))

    def add_ln_fake(x, residual, weight=None, bias=None, eps=1e-5):
        return x.new_empty(x.shape), x.new_empty(x.shape)

    def embed(input: Tensor, weight: Tensor, scale: float = 1.0, pe: Optional[Tensor] = None,
              positions: Optional[Tensor] = None, pos0: int = 0,
              padding_idx: Optional[int] = None, layout: str = "interleaved",
              mode: str = "exact", base: float = 10000.0) -> Tensor:
        return _embed_pe_impl(input, weight, scale, pe, positions, pos0, padding_idx, layout,
                              mode, base, _where(None, None))

    def embed_fake(input, weight, scale=1.0, pe=None, positions=None, pos0=0, padding_idx=None,
                   layout="interleaved", mode="exact", base=10000.0):
        return weight.new_empty(tuple(input.shape) + (weight.shape[-1],))

    def rope(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor,
             position_ids: Optional[Tensor] = None,
             unsqueeze_dim: int = 1) -> tuple[Tensor, Tensor]:
        layout = _rotary_layout(q, k, cos, sin, position_ids, unsqueeze_dim)
        if layout is None:  # as the function would: the expression (in the fake's strides)
            outs = (torch.empty_like(q), torch.empty_like(k))
            for out, r in zip(outs, _rotary_torch(q, k, cos, sin, position_ids, unsqueeze_dim)):
                if r.shape != out.shape:
                    raise ValueError(f"apply_rotary_pos_emb: cos, sin {tuple(cos.shape)} do "
                                     f"not fit q {tuple(q.shape)}, k {tuple(k.shape)}")
                out.copy_(r)
            return outs
        return _rotary_impl(q, k, cos, sin, position_ids, unsqueeze_dim, layout,
                            _where(None, None))

    def rope_fake(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
        return torch.empty_like(q), torch.empty_like(k)

    def rotary(position_ids: Tensor, rotary_dim: int, params: str,
               long_params: Optional[str] = None) -> tuple[Tensor, Tensor]:
        return _rotary_embedding_impl(position_ids, rotary_dim, params, long_params,
                                      _where(None, None))

    def rotary_fake(position_ids, rotary_dim, params, long_params=None):
        shape = tuple(position_ids.shape) + (rotary_dim,)
        return (position_ids.new_empty(shape, dtype=torch.float32),
                position_ids.new_empty(shape, dtype=torch.float32))

    def pe_add(x: Tensor, pe: Tensor, batch_first: bool = True) -> Tensor:
        return _pe_add_impl(x, pe, batch_first, _where(None, None))

    def pe_add_fake(x, pe, batch_first=True):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    for name, fn, fake in (
            ("pe_add", pe_add, pe_add_fake),
            ("scaled_dot_product_attention", sdpa, sdpa_fake),
            ("scaled_dot_product_attention_lse", sdpa_lse, sdpa_lse_fake),
            ("softmax", softmax_op, softmax_fake),
            ("layer_norm", ln, ln_fake),
            ("add_layer_norm", add_ln, add_ln_fake),
            ("embed_pe", embed, embed_fake),
            ("apply_rotary_pos_emb", rope, rope_fake),
            ("rotary_embedding", rotary, rotary_fake)):
        try:
            _OPS[name] = define(name, fn, fake)
        except RuntimeError:
            # defined already (this module imported again, importlib.reload):
            # the first definition serves
            _OPS[name] = getattr(torch.ops.peak, name)


if _CUSTOM_OPS:
    try:
        _register()
    except Exception as e:  # a torch whose custom_op differs: the plain path, said once
        _OPS.clear()
        warnings.warn(f"peak.torch: custom operators not registered ({type(e).__name__}: {e}); "
                      "every function takes the plain path (torch.compile breaks the graph "
                      "there)", RuntimeWarning)
