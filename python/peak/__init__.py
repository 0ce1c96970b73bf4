"""peak: Python bindings for the peak C library (ctypes over libpeak.so).

NumPy in, NumPy out: every function takes float32 ``numpy.ndarray`` objects,
checks their shapes, dtypes and memory layout before calling C, and turns a
C error status into an exception (:class:`PeakError` and its subclasses).
Arrays are passed by pointer and strides, never copied, except where a
docstring says so.  PyTorch users: see :mod:`peak.torch`.

Finding the library, in this order:

0. ``libpeak.so.4`` inside this package's directory, where ``pip install .``
   (pyproject.toml, meson-python) puts the copy it builds: an installed
   wheel loads its own library, whatever the environment says.
1. ``$PEAK_LIBRARY``: the path of ``libpeak.so.4`` (or any file name).
2. When this package is used from a source checkout (``python/peak``):
   the checkout's ``build/`` directory, if it holds a built library.
3. The dynamic loader's search: ``LD_LIBRARY_PATH``, then the system's
   library path (``meson install`` puts it in ``/usr/local/lib/<triplet>``;
   run ``ldconfig`` once after installing).

Threads: every kernel function takes ``threads=`` or ``pool=`` (not both).
``threads=None`` (the default) runs the call on the calling thread alone;
``threads=n`` runs it on a pool of n workers (the calling thread counts as
one) that this module creates on first use, keeps for later calls with the
same n, and destroys at exit; ``pool=`` takes a :class:`ThreadPool` you
create and close yourself.  The output is the same, byte for byte, at any
number of workers (peak.h, peak_threadpool).

Thread safety: every kernel call releases the GIL (ctypes does) and is
reentrant; call them from as many threads as you like, on one pool or on
several (calls that share a pool take turns on it).  :func:`isa_force` and
:func:`isa_reset` are process-wide and should not race kernel calls.  A
pool's threads do not survive ``os.fork()``: in a forked child, pools
created before the fork raise RuntimeError and ``threads=`` makes new ones.

Shapes follow peak.h: sizes in elements, the innermost axis contiguous.
Axis conventions here:

- sequences are ``[batch, seq, d_model]`` (batch first, like the usual
  PyTorch PositionalEncoding module) or ``[seq, d_model]``;
- attention takes ``[batch, heads, len, head_dim]`` (``layout="bhld"``,
  PyTorch's ``scaled_dot_product_attention``) or ``[batch, len, heads,
  head_dim]`` (``layout="blhd"``, the projections' natural output);
- masks are indexed ``[batch, heads, q_row, key]`` and broadcast NumPy-style;
- rotary embedding (rope_apply) takes ``[batch, len, heads, head_dim]``
  (``layout="blhd"``, its default: peak.h's order) or ``[batch, heads, len,
  head_dim]`` (``layout="bhld"``).
"""

import atexit
import ctypes
import dataclasses
import math
import numbers
import operator
import os
import threading
import weakref
from contextlib import contextmanager

import numpy as np

__version__ = "0.5.0"
_SOVERSION = "4"

__all__ = [
    "PeakError", "InvalidArgument", "OutOfRange", "Unsupported", "WorkspaceTooSmall",
    "NoMemory", "version", "library_path", "isa_active", "isa_supported", "isa_force",
    "isa_reset", "isa_reason", "isa_names", "use_isa", "pe_table", "pe_add", "embed_pe",
    "softmax", "attention", "attention_merge", "alibi_slopes", "add_layernorm", "exp",
    "RopeParams", "rope_cache", "rope_apply", "MAX_POSITION", "ROPE_MAX_DIM", "ALIBI_MAX_HEADS",
    "ThreadPool", "convert", "cpu_features",
]

MAX_POSITION = 1 << 32
ROPE_MAX_DIM = 512  # PEAK_ROPE_MAX_DIM: the largest rotary_dim
ALIBI_MAX_HEADS = 1 << 20  # the largest head count alibi_slopes() takes


# ---- errors -------------------------------------------------------------------

class PeakError(RuntimeError):
    """A peak function returned an error status.

    ``status`` is the C ``peak_status`` value, ``name`` its enumerator
    (``"PEAK_ERR_INVALID_ARG"``, ...).  Argument checks done in Python before
    the call raise plain ``TypeError`` / ``ValueError`` instead."""

    name = "PEAK_ERR"

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class InvalidArgument(PeakError, ValueError):
    """PEAK_ERR_INVALID_ARG: a bad shape, stride, alias or parameter value."""
    name = "PEAK_ERR_INVALID_ARG"


class OutOfRange(PeakError, ValueError):
    """PEAK_ERR_OUT_OF_RANGE: a token id, position, key length or size out of range."""
    name = "PEAK_ERR_OUT_OF_RANGE"


class Unsupported(PeakError):
    """PEAK_ERR_UNSUPPORTED: the tier is not available on this CPU, OS or build."""
    name = "PEAK_ERR_UNSUPPORTED"


class WorkspaceTooSmall(PeakError):
    """PEAK_ERR_WORKSPACE (the binding sizes workspaces itself: a bug if seen)."""
    name = "PEAK_ERR_WORKSPACE"


class NoMemory(PeakError, MemoryError):
    """PEAK_ERR_NO_MEMORY: the library could not allocate scratch memory."""
    name = "PEAK_ERR_NO_MEMORY"


_ERRORS = {1: InvalidArgument, 2: OutOfRange, 3: Unsupported, 4: WorkspaceTooSmall, 5: NoMemory}


# ---- the library ----------------------------------------------------------------

def _candidates():
    found = []
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "libpeak.so." + _SOVERSION)  # pip install (-Dwheel=true)
    if os.path.exists(bundled):
        found.append(bundled)
    env = os.environ.get("PEAK_LIBRARY")
    if env:
        return found + [env]
    root = os.path.dirname(os.path.dirname(here))
    if os.path.isfile(os.path.join(root, "include", "peak.h")):  # a source checkout
        lib = os.path.join(root, "build", "libpeak.so." + _SOVERSION)
        if os.path.exists(lib):
            found.append(lib)
    found.append("libpeak.so." + _SOVERSION)  # LD_LIBRARY_PATH, ld.so.cache
    return found


def _load():
    errors = []
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            errors.append(f"  {name}: {e}")
            continue
        if not hasattr(lib, "peak_version"):
            errors.append(f"  {name}: loads, but is not peak (no peak_version)")
            continue
        return lib, name
    raise ImportError(
        "peak: cannot load libpeak.so." + _SOVERSION + "; set PEAK_LIBRARY to its path, "
        "or install it (meson install; ldconfig), or pip install the package from a "
        "checkout (it then carries its own).  Tried:\n" + "\n".join(errors))


_lib, _lib_name = _load()

_c_float_p = ctypes.POINTER(ctypes.c_float)
_c_int32_p = ctypes.POINTER(ctypes.c_int32)
_c_int64_p = ctypes.POINTER(ctypes.c_int64)
_c_uint8_p = ctypes.POINTER(ctypes.c_uint8)
_stride3 = ctypes.c_ssize_t * 3


class _PeParams(ctypes.Structure):
    _fields_ = [("layout", ctypes.c_int), ("mode", ctypes.c_int), ("base", ctypes.c_double)]


class _EmbedDesc(ctypes.Structure):
    _fields_ = [("table", ctypes.c_void_p), ("vocab", ctypes.c_size_t),
                ("ld_table", ctypes.c_ssize_t), ("d_model", ctypes.c_size_t),
                ("scale", ctypes.c_float), ("pe", _c_float_p), ("pe_rows", ctypes.c_size_t),
                ("pe_params", _PeParams), ("positions", _c_int64_p), ("pos0", ctypes.c_size_t),
                ("seq_len", ctypes.c_size_t), ("padding_idx", ctypes.c_int32),
                ("table_type", ctypes.c_int), ("out_type", ctypes.c_int)]


class _Mask(ctypes.Structure):
    _fields_ = [("causal", ctypes.c_int), ("align", ctypes.c_int),
                ("q_offset", ctypes.c_size_t), ("window", ctypes.c_size_t),
                ("key_len", _c_int32_p), ("keep", _c_uint8_p), ("keep_stride", _stride3),
                ("bias", _c_float_p), ("bias_stride", _stride3)]


class _Logits(ctypes.Structure):
    _fields_ = [("softcap", ctypes.c_float), ("alibi", ctypes.c_int),
                ("alibi_slopes", _c_float_p), ("alibi_slopes_stride", ctypes.c_ssize_t),
                ("sinks", _c_float_p), ("sinks_stride", ctypes.c_ssize_t)]


class _SoftmaxDesc(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_size_t), ("heads", ctypes.c_size_t),
                ("q_len", ctypes.c_size_t), ("k_len", ctypes.c_size_t),
                ("x_stride", _stride3), ("y_stride", _stride3), ("scale", ctypes.c_float),
                ("mask", _Mask), ("logits", _Logits), ("x_type", ctypes.c_int),
                ("y_type", ctypes.c_int)]


class _AttentionDesc(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_size_t), ("heads", ctypes.c_size_t),
                ("kv_heads", ctypes.c_size_t), ("q_len", ctypes.c_size_t),
                ("kv_len", ctypes.c_size_t), ("head_dim", ctypes.c_size_t),
                ("v_head_dim", ctypes.c_size_t), ("scale", ctypes.c_float),
                ("q_stride", _stride3), ("k_stride", _stride3), ("v_stride", _stride3),
                ("o_stride", _stride3), ("mask", _Mask), ("lse", _c_float_p),
                ("lse_stride", _stride3),
                ("rope", ctypes.c_void_p),  # const peak_attention_rope *: NULL, none
                ("logits", _Logits), ("q_type", ctypes.c_int), ("k_type", ctypes.c_int),
                ("v_type", ctypes.c_int), ("o_type", ctypes.c_int)]


class _MergeDesc(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_size_t), ("heads", ctypes.c_size_t),
                ("q_len", ctypes.c_size_t), ("v_head_dim", ctypes.c_size_t),
                ("o_stride", _stride3), ("lse_stride", _stride3),
                ("part_o_stride", _stride3), ("part_lse_stride", _stride3)]


class _RopeParams(ctypes.Structure):
    _fields_ = [("rotary_dim", ctypes.c_size_t), ("base", ctypes.c_double),
                ("mode", ctypes.c_int), ("scaling", ctypes.c_int), ("factor", ctypes.c_double),
                ("ntk_alpha", ctypes.c_double), ("original_max_position", ctypes.c_size_t),
                ("seq_len", ctypes.c_size_t), ("beta_fast", ctypes.c_double),
                ("beta_slow", ctypes.c_double), ("yarn_truncate", ctypes.c_int),
                ("mscale", ctypes.c_double), ("mscale_all_dim", ctypes.c_double),
                ("attention_factor", ctypes.c_double), ("low_freq_factor", ctypes.c_double),
                ("high_freq_factor", ctypes.c_double), ("longrope_factors", _c_float_p)]


class _RopeDesc(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_size_t), ("seq_len", ctypes.c_size_t),
                ("heads", ctypes.c_size_t), ("head_dim", ctypes.c_size_t),
                ("x_stride", _stride3), ("y_stride", _stride3), ("pairing", ctypes.c_int),
                ("params", _RopeParams), ("cache", _c_float_p), ("cache_rows", ctypes.c_size_t),
                ("pos0", ctypes.c_size_t), ("positions", _c_int64_p),
                ("positions32", _c_int32_p), ("positions_stride", ctypes.c_ssize_t)]


def _proto(name, restype, *argtypes):
    fn = getattr(_lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


_I, _Z, _S, _P = ctypes.c_int, ctypes.c_size_t, ctypes.c_ssize_t, ctypes.c_void_p
_version = _proto("peak_version", ctypes.c_char_p)


def _version_tuple(v):
    try:
        return tuple(int(x) for x in v.split(".")[:2])
    except ValueError:
        return (-1, -1)


# The same major version, and at least this package's minor one (the SONAME
# in the file name already rules out an ABI break; PEAK_LIBRARY may not).
_lib_version = _version().decode()
_want = _version_tuple(__version__)
_have = _version_tuple(_lib_version)
if _have[0] != _want[0] or _have[1] < _want[1] or not hasattr(_lib, "peak_threadpool_create"):
    raise ImportError(f"peak: the Python package is {__version__} (libpeak.so.{_SOVERSION}) but "
                      f"{_lib_name} is {_lib_version}")
# peak_alibi_slopes came with the descriptors' logits field: a 0.3 build
# without it has shorter descriptors than the ones below.
if not hasattr(_lib, "peak_alibi_slopes"):
    raise ImportError(f"peak: {_lib_name} ({_lib_version}) predates the logit options "
                      "(no peak_alibi_slopes); rebuild it from this checkout")
del _want, _have

_status_string = _proto("peak_status_string", ctypes.c_char_p, _I)
_isa_active = _proto("peak_isa_active", _I)
_isa_supported = _proto("peak_isa_supported", _I, _I)
_isa_force = _proto("peak_isa_force", _I, _I)
_isa_reset = _proto("peak_isa_reset", None)
_isa_name = _proto("peak_isa_name", ctypes.c_char_p, _I)
_isa_reason = _proto("peak_isa_reason", ctypes.c_char_p)
# Every kernel function takes the pool (const peak_threadpool *, NULL: the
# calling thread alone) as its last argument; the workspace size in the middle.
_pool_create = _proto("peak_threadpool_create", _I, _Z, ctypes.POINTER(_P))
_pool_destroy = _proto("peak_threadpool_destroy", None, _P)
_pool_workers = _proto("peak_threadpool_workers", _Z, _P)
_pe_table = _proto("peak_pe_table", _I, _P, _I, _Z, _Z, _Z, ctypes.POINTER(_PeParams), _P)
_pe_add = _proto("peak_pe_add", _I, _P, _S, _S, _Z, _Z, _Z, _Z, _P, _Z,
                 ctypes.POINTER(_PeParams), _P)
_embed_pe = _proto("peak_embed_pe", _I, _P, _S, _P, _Z, ctypes.POINTER(_EmbedDesc), _P)
_softmax = _proto("peak_softmax", _I, _P, _P, ctypes.POINTER(_SoftmaxDesc), _P)
_exp = _proto("peak_exp", _I, _P, _P, _Z, _P)
_attention_ws = _proto("peak_attention_workspace_size", _I, ctypes.POINTER(_AttentionDesc),
                       _P, ctypes.POINTER(ctypes.c_size_t))
_attention = _proto("peak_attention", _I, _P, _P, _P, _P, ctypes.POINTER(_AttentionDesc), _P, _Z,
                    _P)
_alibi_slopes = _proto("peak_alibi_slopes", _I, _P, _Z)
_attention_merge = _proto("peak_attention_merge", _I, _P, _P, ctypes.POINTER(_P),
                          ctypes.POINTER(_P), _Z, ctypes.POINTER(_MergeDesc), _P)
_rope_cache = _proto("peak_rope_cache", _I, _P, _I, _Z, _Z, ctypes.POINTER(_RopeParams), _P)
_rope_apply = _proto("peak_rope_apply", _I, _P, _P, ctypes.POINTER(_RopeDesc), _P)
_convert = _proto("peak_convert", _I, _P, _I, _P, _I, _Z, _P)
_cpu_features = _proto("peak_cpu_features", ctypes.c_uint)
_cpu_feature_name = _proto("peak_cpu_feature_name", ctypes.c_char_p, ctypes.c_uint)
class _LayerNormTypes(ctypes.Structure):
    _fields_ = [("y", ctypes.c_int), ("sum", ctypes.c_int), ("x", ctypes.c_int),
                ("r", ctypes.c_int)]


_add_layernorm = _proto("peak_add_layernorm", _I, _P, _S, _P, _S, _P, _S, _P, _S, _P, _P,
                        _Z, _Z, ctypes.c_float, ctypes.POINTER(_LayerNormTypes), _P)


def _check(status, what):
    if status != 0:
        cls = _ERRORS.get(status, PeakError)
        raise cls(status, f"{what}: {_status_string(status).decode()} ({cls.name})")


# ---- version and tiers -----------------------------------------------------------

_ISA_NAMES = ("scalar", "avx2", "avx512", "neon")


def version():
    """The loaded library's version string, e.g. "0.5.0" (peak_version())."""
    return _version().decode()


def library_path():
    """The path of the loaded libpeak (from /proc/self/maps on Linux, else
    the name it was loaded by)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and "/libpeak.so" in fields[5]:
                    return fields[5].strip()
    except OSError:
        pass
    return _lib_name


def isa_names():
    """Every tier name peak knows, usable here or not."""
    return list(_ISA_NAMES)


def _isa_index(name):
    try:
        return _ISA_NAMES.index(str(name).lower())
    except ValueError:
        raise ValueError(f"unknown tier {name!r}; one of {', '.join(_ISA_NAMES)}") from None


def isa_active():
    """The tier kernels run on now ("scalar", "avx2", "avx512" or "neon")."""
    return _ISA_NAMES[_isa_active()]


def isa_supported(name):
    """True if the tier is compiled into the library and usable on this CPU/OS."""
    return bool(_isa_supported(_isa_index(name)))


def isa_force(name):
    """Run every later call on tier `name` (process-wide).  Raises Unsupported
    if the tier is not usable here."""
    _check(_isa_force(_isa_index(name)), f"isa_force({name!r})")


def isa_reset():
    """Back to the automatic choice (which PEAK_ISA still caps)."""
    _isa_reset()


def cpu_features():
    """The CPU features beyond a tier's baseline that peak detects and this
    CPU and OS offer (peak_cpu_features), by name: "f16c", "avx512_bf16",
    "avx512_fp16", "arm_fp16", "arm_bf16"."""
    bits = _cpu_features()
    return [_cpu_feature_name(1 << k).decode() for k in range(32) if bits >> k & 1]


def isa_reason():
    """One line: why the automatic choice is what it is."""
    return _isa_reason().decode()


@contextmanager
def use_isa(name):
    """``with peak.use_isa("scalar"): ...`` runs the block on that tier, then
    restores the automatic choice.  Process-wide, like isa_force()."""
    isa_force(name)
    try:
        yield
    finally:
        isa_reset()


# ---- thread pools -------------------------------------------------------------------

class _Handle:
    """One peak_threadpool from peak_threadpool_create() and the calls
    running on it: destroyed only once closed and no call holds it (C's
    destroy must not race a call), never in a forked child (whose pool has
    no threads: the pointer is leaked there, on purpose)."""

    __slots__ = ("ptr", "workers", "lock", "busy", "closed", "pid", "__weakref__")

    def __init__(self, threads):
        ptr = _P()
        _check(_pool_create(threads, ctypes.byref(ptr)), "peak_threadpool_create")
        self.ptr = ptr.value
        self.workers = int(_pool_workers(self.ptr))
        self.lock = threading.Lock()
        self.busy = 0
        self.closed = False
        self.pid = os.getpid()
        _handles.add(self)

    def enter(self):
        with self.lock:
            if self.closed:
                raise ValueError("peak.ThreadPool: the pool is closed")
            if self.pid != os.getpid():
                raise RuntimeError("peak.ThreadPool: the pool was created in another process "
                                   "(before a fork) and has no threads here; create a new one")
            self.busy += 1
        return self.ptr

    def leave(self):
        with self.lock:
            self.busy -= 1
            last = self.closed and self.busy == 0
        if last:
            self._destroy()

    def close(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
            last = self.busy == 0
        if last:
            self._destroy()

    def _destroy(self):
        ptr, self.ptr = self.ptr, None
        if ptr and self.pid == os.getpid():
            _pool_destroy(ptr)


_handles = weakref.WeakSet()


class ThreadPool:
    """A pool of `threads` workers for peak calls (peak_threadpool_create):
    the calling thread counts as one, so threads - 1 threads are started;
    0 means one worker per online CPU.

    Pass it as ``pool=`` to any kernel function.  Several Python threads may
    use one pool at once (their calls take turns on it).  ``close()`` (or
    leaving a ``with ThreadPool(n) as pool:`` block) stops its threads; a
    call still running on it finishes first, later calls raise ValueError.
    A pool that is never closed is destroyed when it is garbage-collected,
    or at exit.  Pickling or copying gives a pool of the same size."""

    def __init__(self, threads=0):
        threads = _cint("threads", threads)
        self._handle = _Handle(threads)
        self._finalizer = weakref.finalize(self, _Handle.close, self._handle)

    @property
    def threads(self):
        """The number of workers (peak_threadpool_workers), the caller included."""
        return self._handle.workers

    @property
    def closed(self):
        return self._handle.closed

    def close(self):
        """Stops the pool's threads (after any call running on it); idempotent."""
        self._finalizer()

    def __enter__(self):
        if self._handle.closed:
            raise ValueError("peak.ThreadPool: the pool is closed")
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._handle.closed else f"threads={self._handle.workers}"
        return f"<peak.ThreadPool {state}>"

    def __reduce__(self):
        return (ThreadPool, (self._handle.workers,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


_pools = {}              # threads -> _Handle, for threads=n
_pools_lock = threading.Lock()


def _shared_pool(n):
    """The module's pool of n workers, created on first use; None (the
    calling thread alone, the same bytes) in a library built without
    pthreadpool, where ThreadPool() raises Unsupported."""
    h = _pools.get(n, False)
    if h is False or (h is not None and h.pid != os.getpid()):
        with _pools_lock:
            h = _pools.get(n, False)
            if h is False or (h is not None and h.pid != os.getpid()):
                try:
                    h = _Handle(n)
                except Unsupported:
                    h = None
                _pools[n] = h
    return h


@atexit.register
def _close_shared_pools():
    with _pools_lock:
        handles = list(_pools.values())
        _pools.clear()
    for h in handles:
        if h is not None:
            h.close()


def _after_fork_in_child():
    # Locks another thread held at the fork would never be released here;
    # the pools' threads are gone (their handles refuse calls, see enter()).
    global _pools_lock
    _pools_lock = threading.Lock()
    _pools.clear()
    for h in list(_handles):
        h.lock = threading.Lock()
        h.busy = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Run:
    """``with _Run(threads, pool) as p:`` gives the const peak_threadpool *
    to pass (None: the calling thread alone), holding the pool for the
    call.  Arguments are checked on construction."""

    __slots__ = ("handle",)

    def __init__(self, threads, pool):
        self.handle = None
        if pool is not None:
            if threads is not None:
                raise ValueError("give threads= or pool=, not both")
            if not isinstance(pool, ThreadPool):
                raise TypeError(f"pool: expected a peak.ThreadPool, got {type(pool).__name__}")
            self.handle = pool._handle
        elif threads is not None:
            n = _cint("threads", threads)
            if n != 1:  # 1 worker: the calling thread, no pool needed
                self.handle = _shared_pool(n)

    def __enter__(self):
        return None if self.handle is None else self.handle.enter()

    def __exit__(self, *exc):
        if self.handle is not None:
            self.handle.leave()


def _workers(threads=None, pool=None):
    """The most workers a call with these arguments runs on (peak_threadpool_workers)."""
    r = _Run(threads, pool)
    with r as p:
        return int(_pool_workers(p))


# ---- argument checks ----------------------------------------------------------------

# peak_dtype codes.
_F32, _BF16, _F16 = 0, 1, 2
_FLT_MAX = float(np.finfo(np.float32).max)

def _array(name, a, dtype, ndims, writable=False):
    """Checks an ndarray (no conversion) and returns it."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
    if a.dtype != dtype:
        raise TypeError(f"{name}: dtype is {a.dtype}, expected {np.dtype(dtype)}")
    if a.ndim not in ndims:
        want = " or ".join(str(n) for n in ndims)
        raise ValueError(f"{name}: expected {want} dimensions, got shape {a.shape}")
    if not a.flags.aligned:
        raise ValueError(f"{name}: not aligned to its dtype")
    if writable and not a.flags.writeable:
        raise ValueError(f"{name}: read-only array")
    if a.size == 0:
        raise ValueError(f"{name}: empty array, shape {a.shape}")
    item = a.itemsize
    for ax, (n, s) in enumerate(zip(a.shape, a.strides)):
        if n > 1 and (s < 0 or s % item):
            raise ValueError(f"{name}: axis {ax} has stride {s} bytes; peak needs non-negative "
                             f"strides that are multiples of {item} (use np.ascontiguousarray)")
    if a.shape[-1] > 1 and a.strides[-1] != item:
        raise ValueError(f"{name}: the last axis must be contiguous (stride {item} bytes, got "
                         f"{a.strides[-1]}); use np.ascontiguousarray")
    return a


def _f32(name, a, ndims, writable=False):
    return _array(name, a, np.float32, ndims, writable)


def _typed(name, a, ndims, writable=False):
    """An ndarray of float32, float16 or bfloat16 (ml_dtypes), checked as
    _array does, and its peak_dtype code."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
    code, dt = _dtype_code(a.dtype, name)
    return _array(name, a, dt, ndims, writable), code


def _es(a, axis):
    """Element stride of an axis (0 for a length-1 axis: never stepped)."""
    return a.strides[axis] // a.itemsize if a.shape[axis] > 1 else 0


def _ptr(a, ctype=None):
    p = ctypes.c_void_p(a.ctypes.data)
    return ctypes.cast(p, ctypes.POINTER(ctype)) if ctype is not None else p


def _overlaps(a, b):
    """True if a and b share an element (exact for ordinary strided arrays;
    conservative, by address ranges, when NumPy finds it too hard)."""
    try:
        return np.shares_memory(a, b, max_work=100000)
    except np.TooHardError:
        return np.may_share_memory(a, b)


def _no_overlap(_out_name, _out, **inputs):
    for name, a in inputs.items():
        if a is not None and _overlaps(_out, a):
            raise ValueError(f"{_out_name} overlaps {name}")


def _shape_is(name, a, shape):
    if a.shape != tuple(shape):
        raise ValueError(f"{name}: shape {a.shape}, expected {tuple(shape)}")


_LAYOUTS = {"interleaved": 0, "split": 1, "split_paper": 2}
_MODES = {"exact": 0, "torch_f32": 1}


def _pe_params(layout, mode, base):
    if layout not in _LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {', '.join(_LAYOUTS)}")
    if mode not in _MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(_MODES)}")
    return _PeParams(_LAYOUTS[layout], _MODES[mode], float(base))


_C_INTS = {"size_t": ctypes.c_size_t, "int32_t": ctypes.c_int32}


def _cint(name, v, ctype="size_t"):
    """v as a Python int that fits the C integer type `ctype` (a _C_INTS key),
    checked before ctypes would wrap it: TypeError unless v is an integer
    (floats and bools are not), ValueError if negative for an unsigned
    type, OutOfRange if too large (or small) for it."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name}: an integer expected, got {type(v).__name__}")
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"{name}: an integer expected, got {type(v).__name__}") from None
    bits = 8 * ctypes.sizeof(_C_INTS[ctype])
    signed = _C_INTS[ctype](-1).value < 0
    if v < 0 and not signed:
        raise ValueError(f"{name} must be >= 0, got {v}")
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= v <= hi:
        raise OutOfRange(2, f"{name}: {v} does not fit {ctype}")
    return v


def _ints(name, a, dtype, what):
    """An array-like of integers as a contiguous `dtype` array (copied if
    needed): TypeError unless every value is an integer, OutOfRange for a
    value `dtype` cannot hold (never wrapped)."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        # Python ints beyond int64 turn a list into an object (or float64) array
        arr = np.asarray(a, dtype=object)
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                   for v in arr.flat):
            raise TypeError(f"{name}: integer {what}s expected, got dtype {np.asarray(a).dtype}")
    if arr.dtype != dtype:
        info = np.iinfo(dtype)
        lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
        if lo < info.min or hi > info.max:
            bad = hi if hi > info.max else lo
            raise OutOfRange(2, f"{name}: {what} {bad} does not fit {np.dtype(dtype)}")
        arr = arr.astype(dtype)
    return np.ascontiguousarray(arr)


def _check_eps(eps):
    """LayerNorm's eps as peak takes it (a finite float32, not negative),
    else InvalidArgument naming it (C's status text would not)."""
    if not 0.0 <= float(eps) <= _FLT_MAX:  # NaN fails too
        raise InvalidArgument(1, f"peak_add_layernorm: eps {eps!r} must be a finite float32, not "
                              "negative (PEAK_ERR_INVALID_ARG)")


def _set_scale(desc, scale, default):
    """desc.scale = scale (float32); None is C's 0, 'the default'.  A given
    scale that is 0 in float32 would be read as that marker: ValueError."""
    desc.scale = 0.0 if scale is None else float(scale)
    if not math.isfinite(desc.scale):  # named here, not by C (float32: 1e39 is inf)
        raise InvalidArgument(1, f"scale {scale!r} must be finite (PEAK_ERR_INVALID_ARG)")
    if scale is not None and desc.scale == 0.0:
        raise ValueError(f"scale {scale!r} is 0 in float32, peak's 'default' marker; pass "
                         f"None for {default}")


# ---- positional encoding ------------------------------------------------------------

def _typed_table(fn, out, dtype, shape):
    """The output array of a table call and its peak_dtype: `out` checked
    (C-contiguous, writable, `shape`, of `dtype` if given), or a new array
    of `dtype` (None: float32)."""
    if out is None:
        code, dt = _dtype_code(np.float32 if dtype is None else dtype, "dtype")
        if 0 in shape:
            raise ValueError(f"{fn}: sizes must be > 0")
        return np.empty(shape, dt), code
    arr, code = _typed("out", out, (2,), writable=True)
    if dtype is not None and _dtype_code(dtype, "dtype")[1] != arr.dtype:
        raise TypeError(f"{fn}: out is {arr.dtype}, dtype {np.dtype(dtype)}")
    _shape_is("out", arr, shape)
    if not arr.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    return arr, code


def pe_table(n_pos, d_model, pos0=0, *, layout="interleaved", mode="exact", base=10000.0,
             dtype=None, out=None, threads=None, pool=None):
    """The sinusoid table for positions pos0 .. pos0 + n_pos - 1 (peak_pe_table).

    Returns ``[n_pos, d_model]`` of ``dtype`` (float32, float16, or bfloat16:
    ``ml_dtypes.bfloat16`` or the name "bfloat16"; None: float32, or out's
    type), or fills `out` (C-contiguous, that shape).  layout:
    "interleaved" (the paper: sin in even columns, cos in odd), "split"
    (tensor2tensor/fairseq [sin | cos]) or "split_paper"; mode: "exact"
    (within 2^-23 of the real value) or "torch_f32" (the float32 rounding of
    PyTorch's usual module).  A 16-bit table is the float32 table rounded
    once to nearest even (``convert(pe_table(...), dtype)``'s bits).
    threads, pool: where the call runs (see the module docstring; default:
    this thread alone)."""
    run = _Run(threads, pool)
    n_pos, d_model, pos0 = _cint("n_pos", n_pos), _cint("d_model", d_model), _cint("pos0", pos0)
    params = _pe_params(layout, mode, base)
    out, code = _typed_table("pe_table", out, dtype, (n_pos, d_model))
    with run as p:
        _check(_pe_table(_ptr(out), code, n_pos, d_model, pos0, ctypes.byref(params), p),
               "peak_pe_table")
    return out


def pe_add(x, pos0=0, *, pe=None, layout="interleaved", mode="exact", base=10000.0,
           threads=None, pool=None):
    """In place: ``x[b, s, :] += PE[pos0 + s, :]`` (peak_pe_add), the PyTorch
    module's forward().  x: float32 ``[batch, seq, d_model]`` or ``[seq,
    d_model]``.  pe: a table from pe_table(), C-contiguous ``[rows,
    d_model]`` (rows >= pos0 + seq), or None to compute PE on the fly (then
    layout/mode/base apply).  threads, pool: where the call runs (see the
    module docstring; default: this thread alone).  Returns x."""
    run = _Run(threads, pool)
    _f32("x", x, (2, 3), writable=True)
    x3 = x if x.ndim == 3 else x[np.newaxis]
    batch, seq, d = x3.shape
    pe_ptr, pe_rows = None, 0
    if pe is not None:
        _f32("pe", pe, (2,))
        if not pe.flags.c_contiguous or pe.shape[1] != d:
            raise ValueError(f"pe: expected a C-contiguous [rows, {d}] table, got shape "
                             f"{pe.shape}")
        _no_overlap("x", x, pe=pe)
        pe_ptr, pe_rows = _ptr(pe), pe.shape[0]
    params = _pe_params(layout, mode, base)
    pos0 = _cint("pos0", pos0)
    with run as p:
        _check(_pe_add(_ptr(x3), _es(x3, 0), _es(x3, 1) if seq > 1 else d, batch, seq, d,
                       pos0, pe_ptr, pe_rows, ctypes.byref(params), p), "peak_pe_add")
    return x


def embed_pe(ids, table, *, scale=1.0, pe=None, positions=None, pos0=0, padding_idx=None,
             layout="interleaved", mode="exact", base=10000.0, out=None, threads=None,
             pool=None):
    """``out[..., :] = table[ids[...], :] * scale + PE(pos, :)`` (peak_embed_pe).

    ids: integer array ``[batch, seq]`` (each row a sequence: token s at
    position pos0 + s) or ``[n]`` (one sequence); any integer dtype (copied to
    int32 if needed).  table: ``[vocab, d_model]``, last axis contiguous,
    float32, float16 or bfloat16 (ml_dtypes; a 16-bit table or out takes
    d_model <= 8192).  scale: sqrt(d_model) in the paper.  pe: a C-contiguous
    table or None (on the fly).  positions: optional integer array shaped
    like ids (explicit positions; copied to int64 if needed, TypeError for
    floats).  pos0, padding_idx: ints (padding_idx: fairseq's numbering, see
    peak.h).  Integers too large for their C type raise OutOfRange.
    Returns ``ids.shape + (d_model,)`` in the table's type (or fills `out`,
    of any of the three types, whose rows must be evenly spaced; a 16-bit
    out holds the float32 result rounded once).  threads, pool: where the call runs (see the
    module docstring; default: this thread alone)."""
    run = _Run(threads, pool)
    ids = _ints("ids", ids, np.int32, "token id")
    if ids.ndim not in (1, 2) or ids.size == 0:
        raise ValueError(f"ids: expected a non-empty [n] or [batch, seq] array, got {ids.shape}")
    _, table_type = _typed("table", table, (2,))
    vocab, d = table.shape
    shape = ids.shape + (d,)
    if out is None:
        out = np.empty(shape, table.dtype)
    _, out_type = _typed("out", out, (2, 3), writable=True)
    _shape_is("out", out, shape)
    out2 = out.view()
    try:
        out2.shape = (ids.size, d)
    except AttributeError:
        raise ValueError("out: its rows are not evenly spaced in memory") from None
    _no_overlap("out", out, table=table, pe=pe)
    desc = _EmbedDesc()
    desc.table = _ptr(table)
    desc.table_type, desc.out_type = table_type, out_type
    desc.vocab, desc.ld_table, desc.d_model = vocab, _es(table, 0) if vocab > 1 else d, d
    desc.scale = float(scale)
    if pe is not None:
        _f32("pe", pe, (2,))
        if not pe.flags.c_contiguous or pe.shape[1] != d:
            raise ValueError(f"pe: expected a C-contiguous [rows, {d}] table, got {pe.shape}")
        desc.pe, desc.pe_rows = _ptr(pe, ctypes.c_float), pe.shape[0]
    desc.pe_params = _pe_params(layout, mode, base)
    pos_arr = None
    if positions is not None:
        pos_arr = _ints("positions", positions, np.int64, "position")
        _shape_is("positions", pos_arr, ids.shape)
        desc.positions = _ptr(pos_arr, ctypes.c_int64)
    desc.pos0 = _cint("pos0", pos0)
    desc.seq_len = ids.shape[1] if ids.ndim == 2 else 0
    desc.padding_idx = -1 if padding_idx is None else _cint("padding_idx", padding_idx, "int32_t")
    with run as p:
        _check(_embed_pe(_ptr(out2), _es(out2, 0) if ids.size > 1 else d, _ptr(ids), ids.size,
                         ctypes.byref(desc), p), "peak_embed_pe")
    return out


# ---- rotary position embedding ------------------------------------------------------

_ROPE_MODES = {"exact": 0, "hf": 1}
_ROPE_SCALINGS = {"none": 0, "linear": 1, "ntk": 2, "dynamic": 3, "yarn": 4, "llama3": 5,
                  "longrope": 6}
_ROPE_PAIRINGS = {"half_split": 0, "interleaved": 1}


def _real(name, v):
    """v as a Python float: TypeError for what is not a real number (str,
    bool, None)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name}: a real number expected, got {type(v).__name__}")
    return float(v)


@dataclasses.dataclass(frozen=True)
class RopeParams:
    """The rotary frequencies and their scaling (peak_rope_params, less
    rotary_dim, which rope_cache() and rope_apply() take themselves).

    Every field has peak's default (PEAK_ROPE_PARAMS_DEFAULT); a scheme
    reads only its own fields, the C library checks their values
    (InvalidArgument).  The names of transformers' ``rope_parameters`` are
    in brackets.

    - base [rope_theta]: > 1.
    - mode: "exact" (double-precision formulas, every value within 2^-23 of
      the real one for positions below 2^24) or "hf" (the float32 program
      of Hugging Face transformers' LlamaRotaryEmbedding, within 2 ULP of
      its cos/sin; peak.h, peak_rope_mode).
    - scaling [rope_type]: None or "none" [default], "linear", "ntk"
      (static NTK-aware, ntk_alpha), "dynamic", "yarn", "llama3",
      "longrope".
    - factor: linear, dynamic, yarn, llama3: >= 1; longrope: only for the
      default attention factor (transformers: max_position_embeddings /
      original_max_position_embeddings).
    - ntk_alpha: ntk: >= 1.
    - original_max_position [original_max_position_embeddings; for dynamic
      the config's max_position_embeddings]: dynamic, yarn, llama3,
      longrope: >= 2.
    - seq_len: dynamic: the current length, max(position) + 1 (0: no
      longer than original_max_position).  Nothing is kept between calls.
    - beta_fast, beta_slow, truncate: yarn (32, 1, True as transformers;
      truncate=False keeps the ramp's ends fractional, as gpt-oss).
    - mscale, mscale_all_dim: yarn; None (or 0, as transformers) = absent.
    - attention_factor: multiplies every cos and sin; None: the scheme's
      own (yarn's mscale ratio or 0.1 ln(factor) + 1, longrope's
      sqrt(1 + ln factor / ln original_max_position), else 1).  0 is
      peak's "default" marker: a ValueError here.
    - low_freq_factor, high_freq_factor: llama3 (1 and 4 in Llama 3.1).
    - longrope_factors [short_factor or long_factor]: longrope: rotary_dim
      / 2 positive numbers, rounded to float32 as transformers does; the
      set that fits the length being served, chosen by the caller.

    ``dataclasses.replace(p, factor=8.0)`` gives a variant.  Every function
    that takes ``params=`` also takes a dict of these fields, and the
    fields themselves as keywords (which override params)."""

    base: float = 10000.0
    mode: str = "exact"
    scaling: str = "none"
    factor: float = 1.0
    ntk_alpha: float = 1.0
    original_max_position: int = 0
    seq_len: int = 0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
    mscale: float = None
    mscale_all_dim: float = None
    attention_factor: float = None
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    longrope_factors: tuple = None

    def __post_init__(self):
        put = object.__setattr__  # frozen: normalise the fields once, here
        if self.mode not in _ROPE_MODES:
            raise ValueError(f"mode {self.mode!r}: one of {', '.join(_ROPE_MODES)}")
        scaling = "none" if self.scaling is None else self.scaling
        if scaling not in _ROPE_SCALINGS:
            raise ValueError(f"scaling {self.scaling!r}: None or one of "
                             f"{', '.join(_ROPE_SCALINGS)}")
        put(self, "scaling", scaling)
        for name in ("base", "factor", "ntk_alpha", "beta_fast", "beta_slow", "low_freq_factor",
                     "high_freq_factor"):
            put(self, name, _real(name, getattr(self, name)))
        for name in ("mscale", "mscale_all_dim", "attention_factor"):
            if getattr(self, name) is not None:
                put(self, name, _real(name, getattr(self, name)))
        if self.attention_factor == 0.0:
            raise ValueError("attention_factor 0 is peak's 'the scheme's default' marker; pass "
                             "None for it")
        for name in ("original_max_position", "seq_len"):
            put(self, name, _cint(name, getattr(self, name)))
        if not isinstance(self.truncate, (bool, np.bool_)):
            raise TypeError(f"truncate: True or False expected, got {type(self.truncate).__name__}")
        put(self, "truncate", bool(self.truncate))
        if self.longrope_factors is not None:
            f = np.asarray(self.longrope_factors)
            if f.ndim != 1 or f.dtype.kind not in "fiu":
                raise TypeError(f"longrope_factors: a sequence of numbers expected, got "
                                f"{type(self.longrope_factors).__name__} of dtype {f.dtype}, "
                                f"shape {f.shape}")
            put(self, "longrope_factors", tuple(float(v) for v in f))


_ROPE_FIELDS = tuple(f.name for f in dataclasses.fields(RopeParams))


def _rope_params(where, params, rope):
    """The RopeParams of a call: params (a RopeParams, a dict of its fields
    or None) with the keyword arguments `rope` over it."""
    for k in rope:
        if k not in _ROPE_FIELDS:
            raise TypeError(f"{where}() got an unexpected keyword argument {k!r} (rope "
                            f"parameters: {', '.join(_ROPE_FIELDS)})")
    if params is None:
        return RopeParams(**rope)
    if isinstance(params, RopeParams):
        return dataclasses.replace(params, **rope) if rope else params
    if isinstance(params, dict):
        for k in params:
            if k not in _ROPE_FIELDS:
                raise TypeError(f"params: unknown rope parameter {k!r} (one of "
                                f"{', '.join(_ROPE_FIELDS)})")
        return RopeParams(**{**params, **rope})
    raise TypeError(f"params: expected a peak.RopeParams or a dict of its fields, got "
                    f"{type(params).__name__}")


def _c_rope_params(p, rotary_dim, keep_alive):
    """The peak_rope_params of p; the longrope factors' float32 copy, which
    must outlive the call, is appended to keep_alive."""
    c = _RopeParams()
    c.rotary_dim = rotary_dim
    c.base, c.mode, c.scaling = p.base, _ROPE_MODES[p.mode], _ROPE_SCALINGS[p.scaling]
    c.factor, c.ntk_alpha = p.factor, p.ntk_alpha
    c.original_max_position, c.seq_len = p.original_max_position, p.seq_len
    c.beta_fast, c.beta_slow, c.yarn_truncate = p.beta_fast, p.beta_slow, int(p.truncate)
    c.mscale = p.mscale or 0.0
    c.mscale_all_dim = p.mscale_all_dim or 0.0
    c.attention_factor = p.attention_factor or 0.0
    c.low_freq_factor, c.high_freq_factor = p.low_freq_factor, p.high_freq_factor
    if p.scaling == "longrope":
        # C reads rotary_dim / 2 of them: a shorter array must not get there
        if p.longrope_factors is None:
            raise ValueError(f"longrope_factors: scaling 'longrope' needs rotary_dim / 2 = "
                             f"{rotary_dim // 2} factors")
        with np.errstate(over="ignore"):  # beyond float32: inf, which C rejects
            f = np.array(p.longrope_factors, np.float32)
        if f.shape != (rotary_dim // 2,):
            raise ValueError(f"longrope_factors: {f.size} factors, expected rotary_dim / 2 = "
                             f"{rotary_dim // 2}")
        keep_alive.append(f)
        c.longrope_factors = _ptr(f, ctypes.c_float)
    return c


def _rope_dim(fn, rotary_dim, head_dim=None):
    """The InvalidArgument the C call would raise for this rotary_dim, with
    the limit named (the status alone does not say which argument)."""
    why = None
    if rotary_dim < 2 or rotary_dim % 2 or rotary_dim > ROPE_MAX_DIM:
        why = f"rotary_dim {rotary_dim} must be even, 2 .. ROPE_MAX_DIM ({ROPE_MAX_DIM})"
    elif head_dim is not None and rotary_dim > head_dim:
        why = f"rotary_dim {rotary_dim} exceeds head_dim {head_dim}"
    if why:
        raise InvalidArgument(1, f"{fn}: {why} (PEAK_ERR_INVALID_ARG)")


def rope_cache(n_pos, rotary_dim, pos0=0, *, params=None, dtype=None, out=None, threads=None,
               pool=None, **rope):
    """The rotary cos/sin table of positions pos0 .. pos0 + n_pos - 1
    (peak_rope_cache), vLLM's cos_sin_cache layout.

    Returns ``[n_pos, rotary_dim]`` of ``dtype`` (float32, float16, or
    bfloat16: ``ml_dtypes.bfloat16`` or the name "bfloat16"; None: float32,
    or out's type), or fills `out` (C-contiguous, that shape); a 16-bit
    cache is the float32 one rounded once to nearest even (rope_apply and
    attention take float32 caches only).  Row t holds the n = rotary_dim /
    2 values A cos(p w_i), then the n values A sin(p w_i), p = pos0 + t, for the scaled
    frequencies w_i and the attention factor A.  rotary_dim: even, 2 ..
    ROPE_MAX_DIM.  The frequencies: params (a :class:`RopeParams` or a dict
    of its fields) and/or its fields as keywords, e.g. ``rope_cache(4096,
    128, base=5e5, scaling="llama3", factor=8.0, original_max_position=8192,
    mode="hf")``.  A value depends only on (position, column, parameters):
    any pos0 / n_pos split gives the same bits.  Positions up to
    MAX_POSITION are accepted (OutOfRange beyond).  threads, pool: where
    the call runs (see the module docstring; default: this thread alone)."""
    run = _Run(threads, pool)
    n_pos, rotary_dim = _cint("n_pos", n_pos), _cint("rotary_dim", rotary_dim)
    pos0 = _cint("pos0", pos0)
    p = _rope_params("rope_cache", params, rope)
    alive = []
    cp = _c_rope_params(p, rotary_dim, alive)
    if out is None:
        if n_pos == 0 or rotary_dim == 0:
            raise ValueError("n_pos and rotary_dim must be > 0")
        _rope_dim("rope_cache", rotary_dim)
        if n_pos > MAX_POSITION or pos0 > MAX_POSITION - n_pos:  # before allocating for it
            raise OutOfRange(2, f"peak_rope_cache: positions {pos0} + {n_pos} beyond "
                                f"MAX_POSITION (PEAK_ERR_OUT_OF_RANGE)")
    out, code = _typed_table("rope_cache", out, dtype, (n_pos, rotary_dim))
    with run as pl:
        _check(_rope_cache(_ptr(out), code, n_pos, pos0, ctypes.byref(cp), pl),
               "peak_rope_cache")
    return out


def _rope_positions(positions, B, L):
    """(array, is_int32, positions_stride) for peak_rope_desc: int32 arrays
    as they are (made C-contiguous), anything else as int64."""
    if isinstance(positions, np.ndarray) and positions.dtype == np.int32:
        pa, is32 = np.ascontiguousarray(positions), True
    else:
        pa, is32 = _ints("positions", positions, np.int64, "position"), False
    if pa.shape == (L,) or pa.shape == (1, L):
        return pa, is32, 0  # one row for every sequence
    if pa.shape == (B, L):
        return pa, is32, L
    raise ValueError(f"positions: shape {pa.shape}, expected [{B}, {L}], [1, {L}] or [{L}] "
                     "(batch, seq_len)")


def rope_apply(x, positions=None, *, pos0=0, rotary_dim=None, pairing="half_split",
               layout="blhd", cache=None, params=None, out=None, threads=None, pool=None,
               **rope):
    """Rotates every head vector of x by its token's position (peak_rope_apply).

    x: float32 ``[B, L, H, D]`` (layout "blhd", the default: the
    projections' natural output and peak.h's order) or ``[B, H, L, D]``
    (layout "bhld", transformers' query_states after transpose(1, 2)); any
    strides with a contiguous last axis (no copies).  Token l of sequence b
    is at position ``positions[b, l]`` (an integer array ``[B, L]``, or
    ``[L]`` / ``[1, L]`` for every sequence; int32 arrays are read as they
    are, any other integer type as int64; a negative position raises
    OutOfRange) or, without positions, at ``pos0 + l``.  The first
    rotary_dim (default D; even, <= D) dimensions rotate, the rest pass
    through.  pairing: "half_split" (i with i + rotary_dim / 2:
    transformers' rotate_half, LLaMA, GPT-NeoX, Qwen) or "interleaved" (2i
    with 2i + 1: GPT-J, rotate_every_two).  cos/sin: from cache, a
    C-contiguous ``[rows, rotary_dim]`` table of rope_cache() for
    positions 0 .. rows - 1 (OutOfRange for a position at or beyond rows),
    or computed on the fly from params / the :class:`RopeParams` keywords as
    rope_cache() takes them (the same bits as through a table).  Each output
    is two float products and one add, as transformers' ``q * cos +
    rotate_half(q) * sin``.  out: None (a new array, x's shape), x itself
    (in place), or an array of x's shape not overlapping x.  threads, pool:
    where the call runs (see the module docstring; default: this thread
    alone).  Returns out."""
    run = _Run(threads, pool)
    if layout not in ("blhd", "bhld"):
        raise ValueError(f"layout {layout!r}: 'blhd' ([B, L, H, D]) or 'bhld' ([B, H, L, D])")
    if pairing not in _ROPE_PAIRINGS:
        raise ValueError(f"pairing {pairing!r}: one of {', '.join(_ROPE_PAIRINGS)}")
    _f32("x", x, (4,))
    ax = (0, 1, 2) if layout == "blhd" else (0, 2, 1)  # axes of (b, l, h)
    B, L, H, D = x.shape[ax[0]], x.shape[ax[1]], x.shape[ax[2]], x.shape[3]
    pos0 = _cint("pos0", pos0)
    alive = []
    desc = _RopeDesc()
    if cache is not None:
        if params is not None or rope:
            raise ValueError("cache= holds the cos/sin already; give it or rope parameters "
                             "(params=, base=, ...), not both")
        _f32("cache", cache, (2,))
        rotary_dim = cache.shape[1] if rotary_dim is None else _cint("rotary_dim", rotary_dim)
        _rope_dim("rope_apply", rotary_dim, D)
        if not cache.flags.c_contiguous or cache.shape[1] != rotary_dim:
            raise ValueError(f"cache: expected a C-contiguous [rows, {rotary_dim}] table from "
                             f"rope_cache(), got shape {cache.shape}")
        desc.params = _c_rope_params(RopeParams(), rotary_dim, alive)
        desc.cache, desc.cache_rows = _ptr(cache, ctypes.c_float), cache.shape[0]
    else:
        rotary_dim = D if rotary_dim is None else _cint("rotary_dim", rotary_dim)
        _rope_dim("rope_apply", rotary_dim, D)
        desc.params = _c_rope_params(_rope_params("rope_apply", params, rope), rotary_dim, alive)
    pa = None
    if positions is not None:
        if pos0 != 0:
            raise ValueError("give positions or pos0, not both")
        pa, is32, desc.positions_stride = _rope_positions(positions, B, L)
        if is32:
            desc.positions32 = _ptr(pa, ctypes.c_int32)
        else:
            desc.positions = _ptr(pa, ctypes.c_int64)
    if out is None:
        out = np.empty(x.shape, np.float32)
    else:
        _f32("out", out, (4,), writable=True)
        _shape_is("out", out, x.shape)
        if not (out.ctypes.data == x.ctypes.data and out.strides == x.strides):  # else in place
            _no_overlap("out", out, x=x)
    _no_overlap("out", out, cache=cache, positions=pa)
    desc.batch, desc.seq_len, desc.heads, desc.head_dim = B, L, H, D
    desc.x_stride = _stride3(*(_es(x, a) for a in ax))
    desc.y_stride = _stride3(*(_es(out, a) for a in ax))
    desc.pairing = _ROPE_PAIRINGS[pairing]
    desc.pos0 = pos0
    with run as pl:
        _check(_rope_apply(_ptr(out), _ptr(x), ctypes.byref(desc), pl), "peak_rope_apply")
    return out


# ---- masks ---------------------------------------------------------------------------

def _mask(mask, shape, *, causal, align, q_offset, window, key_len, keep, bias, keep_alive):
    """Fills a _Mask for scores of `shape` [B, H, Lq, Lk]; arrays that must
    outlive the call are appended to keep_alive."""
    if align not in ("top_left", "bottom_right"):
        raise ValueError(f"align {align!r}: 'top_left' (PyTorch is_causal) or 'bottom_right'")
    mask.causal = 1 if causal else 0
    mask.align = 0 if align == "top_left" else 1
    mask.q_offset = _cint("q_offset", q_offset)
    mask.window = 0 if window is None else _cint("window", window)
    B = shape[0]
    if key_len is not None:
        kl = _ints("key_len", key_len, np.int32, "length").reshape(-1)
        if kl.shape != (B,):
            raise ValueError(f"key_len: expected {B} lengths (one per batch entry), got {kl.shape}")
        keep_alive.append(kl)
        mask.key_len = _ptr(kl, ctypes.c_int32)
    for name, a, dtype, field in (("keep", keep, None, "keep"), ("bias", bias, np.float32, "bias")):
        if a is None:
            continue
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name}: expected a numpy.ndarray, got {type(a).__name__}")
        if name == "keep":
            if a.dtype not in (np.bool_, np.uint8):
                raise TypeError(f"keep: dtype {a.dtype}, expected bool or uint8 (True = visible)")
            a = a.view(np.uint8)
        elif a.dtype != np.float32:
            raise TypeError(f"bias: dtype {a.dtype}, expected float32 (additive, -inf = masked)")
        try:
            b = np.broadcast_to(a, shape)
        except ValueError:
            raise ValueError(f"{name}: shape {a.shape} does not broadcast to {shape}") from None
        if any(s < 0 or s % b.itemsize for s in b.strides) or (
                shape[3] > 1 and b.strides[3] != b.itemsize):
            b = np.ascontiguousarray(b)  # a copy, so that keys are contiguous
        keep_alive.append(b)
        setattr(mask, field, _ptr(b, ctypes.c_uint8 if name == "keep" else ctypes.c_float))
        setattr(mask, field + "_stride", _stride3(*(_es(b, ax) for ax in range(3))))


# ---- logit options -------------------------------------------------------------------

_ALIBI_FORMS = {"causal": 1, "symmetric": 2}  # peak_alibi


def alibi_slopes(heads):
    """The ALiBi slopes of a model with `heads` attention heads
    (peak_alibi_slopes): float32 ``[heads]``, slope[h] = 2^(-8 (h + 1) /
    heads) for a power of two; otherwise, with p the largest power of two
    below heads, the p slopes of p heads, then 2^(-4 h' / p) for h' = 1, 3,
    5, ... (BLOOM's rule).  Each is the exact value rounded once to float.
    What softmax() and attention() use when alibi_slopes is None.
    heads: 1 to ALIBI_MAX_HEADS (2^20); 0 is InvalidArgument, more
    OutOfRange."""
    heads = _cint("heads", heads)
    # the library checks heads before writing: a stand-in buffer when it errs
    out = np.empty(heads if 0 < heads <= ALIBI_MAX_HEADS else 1, np.float32)
    _check(_alibi_slopes(_ptr(out), heads), "peak_alibi_slopes")
    return out


def _per_head(name, a, heads, scalar_ok):
    """(float32 array, element stride) of a per-head vector: an array-like
    of `heads` reals, or (scalar_ok) one real for every head (stride 0),
    contiguous (copied if it is not a contiguous float32 array already).
    Its values are the library's to check (finite; slopes >= 0):
    InvalidArgument."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu":  # bool, complex, str, object
        raise TypeError(f"{name}: real numbers expected, got dtype {arr.dtype}")
    one = scalar_ok and arr.ndim == 0
    if not one and arr.shape != (heads,):
        want = f"({heads},), one per query head" + (", or a scalar" if scalar_ok else "")
        raise ValueError(f"{name}: shape {arr.shape}, expected {want}")
    with np.errstate(over="ignore"):  # beyond float32: inf, which peak rejects
        return np.ascontiguousarray(arr.reshape(-1), dtype=np.float32), 0 if one else 1


def _logits(logits, heads, *, softcap, alibi, alibi_slopes, sinks):
    """Fills a _Logits for a call of `heads` query heads.  Returns the
    arrays it points at by name: the caller keeps them alive through the
    call and checks that its output does not overlap them."""
    arrays = {}
    if softcap is not None:
        logits.softcap = _real("softcap", softcap)
        if logits.softcap == 0.0 and softcap != 0:
            raise ValueError(f"softcap {softcap!r} is 0 in float32, peak's 'off'; pass None "
                             "for no soft-capping")
    if alibi is not None:
        if not isinstance(alibi, str) or alibi not in _ALIBI_FORMS:
            raise ValueError(f"alibi {alibi!r}: 'causal' (distance qpos - j), 'symmetric' "
                             "(|qpos - j|) or None")
        logits.alibi = _ALIBI_FORMS[alibi]
        if alibi_slopes is not None:
            a, logits.alibi_slopes_stride = _per_head("alibi_slopes", alibi_slopes, heads, False)
            logits.alibi_slopes = _ptr(a, ctypes.c_float)
            arrays["alibi_slopes"] = a
    elif alibi_slopes is not None:
        raise ValueError("alibi_slopes given without alibi= ('causal' or 'symmetric')")
    if sinks is not None:
        a, logits.sinks_stride = _per_head("sinks", sinks, heads, True)
        logits.sinks = _ptr(a, ctypes.c_float)
        arrays["sinks"] = a
    return arrays


# ---- softmax -------------------------------------------------------------------------

def softmax(x, *, scale=None, causal=False, align="top_left", q_offset=0, window=0,
            key_len=None, keep=None, bias=None, softcap=None, alibi=None, alibi_slopes=None,
            sinks=None, out=None, threads=None, pool=None):
    """Masked softmax over the last axis (peak_softmax).

    x: ``[batch, heads, q_len, k_len]`` (fewer axes are read as leading
    1s), float32, float16 or bfloat16 (ml_dtypes).  ``y = softmax(x * scale + bias)`` over the visible keys;
    masked keys get 0, a row with no visible key is all zeros.  scale: None
    means 1; one that is 0 in float32 (0.0, 1e-50) is a ValueError, 0 being
    peak's "default" marker.  Masks: causal (query i sees keys j <= i +
    q_offset; align "bottom_right" adds k_len - q_len), window, key_len
    (``[batch]`` ints; OutOfRange outside [0, k_len]), keep (bool/uint8,
    True = visible) and bias (float32, added; -inf masks), both
    broadcasting to x's 4-D shape.  q_offset, window: ints (OutOfRange
    beyond size_t, ValueError if negative).

    Logit options (peak_logits; all off by default), in this order on each
    score: scale, then softcap, then ALiBi, then bias and the masks, then
    the sink; each step in float32, rounded once (peak.h):
      softcap: None or 0 (off), or a positive float: s = softcap *
        tanh(s / softcap), before every mask (a masked key stays masked;
        +-inf scores become +-softcap).
      alibi: None, "causal" (distance qpos - j: BLOOM, MPT, Falcon) or
        "symmetric" (|qpos - j|): s -= slope[h] * distance, with qpos = i +
        q_offset (+ k_len - q_len with align "bottom_right") whether or not
        the mask is causal.  alibi_slopes: None (alibi_slopes(heads)) or
        ``[heads]`` reals (finite, >= 0).
      sinks: None, ``[heads]`` reals or one real for every head (finite),
        in the scores' units: y_j = e^s_j / (sum_k e^s_k + e^sink[h]); the
        sink has no output, so a row sums to less than 1 (a row with no
        visible key is still zeros).
    Per-head arrays are converted to float32 (copied unless float32 and
    contiguous already); their values are checked by peak (InvalidArgument).

    out: None (an array of x's shape and type), or an array of x's shape
    of any of the three types (a 16-bit out holds the float32 probabilities
    rounded once); ``out=x`` works in place.  threads, pool: where the call
    runs (see the module docstring; default: this thread alone)."""
    run = _Run(threads, pool)
    _, xt = _typed("x", x, (1, 2, 3, 4))
    x4 = x.reshape((1,) * (4 - x.ndim) + x.shape)
    if out is None:
        out = np.empty(x.shape, x.dtype)
    _, yt = _typed("out", out, (x.ndim,), writable=True)
    _shape_is("out", out, x.shape)
    if out is not x and not (out.ctypes.data == x.ctypes.data and out.strides == x.strides and
                             out.dtype == x.dtype):
        _no_overlap("out", out, x=x)
    y4 = out.reshape((1,) * (4 - out.ndim) + out.shape)
    desc = _SoftmaxDesc()
    desc.batch, desc.heads, desc.q_len, desc.k_len = x4.shape
    desc.x_stride = _stride3(*(_es(x4, ax) for ax in range(3)))
    desc.y_stride = _stride3(*(_es(y4, ax) for ax in range(3)))  # in place: equal to x's
    desc.x_type, desc.y_type = xt, yt
    _set_scale(desc, scale, "1")
    alive = []
    _mask(desc.mask, x4.shape, causal=causal, align=align, q_offset=q_offset, window=window,
          key_len=key_len, keep=keep, bias=bias, keep_alive=alive)
    per_head = _logits(desc.logits, x4.shape[1], softcap=softcap, alibi=alibi,
                       alibi_slopes=alibi_slopes, sinks=sinks)
    _no_overlap("out", out, **per_head)
    with run as p:
        _check(_softmax(_ptr(y4), _ptr(x4), ctypes.byref(desc), p), "peak_softmax")
    return out


# ---- attention -----------------------------------------------------------------------

_tls = threading.local()


def _workspace(nbytes):
    """A 64-byte aligned scratch buffer per thread, grown as needed."""
    buf = getattr(_tls, "ws", None)
    if buf is None or buf[1] < nbytes:
        raw = np.empty(nbytes + 64, np.uint8)
        off = (-raw.ctypes.data) % 64
        buf = (raw, nbytes, raw.ctypes.data + off)
        _tls.ws = buf
    return ctypes.c_void_p(buf[2]), buf[1]


def attention(q, k, v, *, layout="bhld", scale=None, causal=False, align="top_left",
              q_offset=0, window=0, key_len=None, keep=None, bias=None, softcap=None,
              alibi=None, alibi_slopes=None, sinks=None, out=None, return_lse=False,
              threads=None, pool=None):
    """Scaled dot-product attention ``softmax(q k^T * scale + mask) v`` (peak_attention).

    layout "bhld": q ``[B, H, Lq, D]``, k ``[B, Hkv, Lk, D]``, v ``[B, Hkv, Lk,
    Dv]``, out ``[B, H, Lq, Dv]`` (PyTorch's scaled_dot_product_attention);
    layout "blhd": ``[B, L, H, D]`` for all four.  Hkv must divide H
    (grouped-query / multi-query attention).  Any strides with a contiguous
    last axis work (no copies).  Types: q, k, v and out each float32,
    float16 or bfloat16 (ml_dtypes), independently (out: q's type when
    None); arithmetic in float32, a 16-bit out rounded once (peak.h).  scale: None means 1/sqrt(D); one that is 0
    in float32 is a ValueError, as in softmax().  Masks as in
    softmax(), indexed ``[B, H, Lq, Lk]``.

    Logit options as in softmax() (order: scale, softcap, ALiBi, bias and
    masks, sink), per query head h (``[H]`` arrays; a grouped K/V head
    serves several, each with its own slope and sink), computed in double
    on the scalar tier, within the accuracy bound below on the others
    (|ALiBi| counts with |bias| there); no bias tensor is materialised.
    ALiBi's qpos is i + q_offset (+ Lk - Lq bottom-right): with a KV
    cache, q_offset = the cached length (or align "bottom_right") gives the
    model's positions.

    Returns out, or (out, lse) with lse float32 ``[B, H, Lq]`` when
    return_lse: the natural-log log-sum-exp of the row's scores after
    every option above, what attention_merge() needs to combine attentions
    over parts of the keys.  With ALiBi it is that of the distance form
    (s - slope * (qpos - j)); implementations that add slope * j instead
    (BLOOM's, ggml's) get the same out and an lse larger by slope * qpos.
    With sinks it includes the sink's term, log(sum_j e^s_j + e^sink); a
    row with no visible key has out 0 and lse -inf, or lse = sink with a
    sink.  Splitting the keys for attention_merge(): give the sinks to one
    part only (the merge then counts the sink once).  Accuracy (peak.h):
    out within ~1e-5 * max|V| of the exact attention for scores of modest
    spread, lse within 4e-6 * (1 + |lse|).
    threads, pool: where the call runs (see the module docstring; default:
    this thread alone)."""
    run = _Run(threads, pool)
    if layout not in ("bhld", "blhd"):
        raise ValueError(f"layout {layout!r}: 'bhld' ([B, H, L, D]) or 'blhd' ([B, L, H, D])")
    _, qt = _typed("q", q, (4,))
    _, kt = _typed("k", k, (4,))
    _, vt = _typed("v", v, (4,))
    # axis numbers of (b, l, h) in the caller's layout
    ax = (0, 2, 1) if layout == "bhld" else (0, 1, 2)
    B, Lq, H, D = q.shape[ax[0]], q.shape[ax[1]], q.shape[ax[2]], q.shape[3]
    Bk, Lk, Hkv, Dk = k.shape[ax[0]], k.shape[ax[1]], k.shape[ax[2]], k.shape[3]
    if (Bk, Dk) != (B, D):
        raise ValueError(f"k: shape {k.shape} does not match q {q.shape} (batch, head_dim)")
    if (v.shape[ax[0]], v.shape[ax[1]], v.shape[ax[2]]) != (B, Lk, Hkv):
        raise ValueError(f"v: shape {v.shape} does not match k {k.shape}")
    if H % Hkv:
        raise ValueError(f"k/v heads ({Hkv}) must divide q heads ({H})")
    Dv = v.shape[3]
    oshape = (B, H, Lq, Dv) if layout == "bhld" else (B, Lq, H, Dv)
    if out is None:
        out = np.empty(oshape, q.dtype)
    _, ot = _typed("out", out, (4,), writable=True)
    _shape_is("out", out, oshape)
    _no_overlap("out", out, q=q, k=k, v=v)
    desc = _AttentionDesc()
    desc.q_type, desc.k_type, desc.v_type, desc.o_type = qt, kt, vt, ot
    desc.batch, desc.heads, desc.kv_heads = B, H, Hkv
    desc.q_len, desc.kv_len, desc.head_dim, desc.v_head_dim = Lq, Lk, D, Dv
    _set_scale(desc, scale, "1/sqrt(D)")
    for field, a in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", out)):
        setattr(desc, field, _stride3(*(_es(a, i) for i in ax)))
    alive = []
    _mask(desc.mask, (B, H, Lq, Lk), causal=causal, align=align, q_offset=q_offset,
          window=window, key_len=key_len, keep=keep, bias=bias, keep_alive=alive)
    per_head = _logits(desc.logits, H, softcap=softcap, alibi=alibi, alibi_slopes=alibi_slopes,
                       sinks=sinks)
    _no_overlap("out", out, **per_head)
    lse = None
    if return_lse:
        lse = np.empty((B, H, Lq), np.float32)
        desc.lse = _ptr(lse, ctypes.c_float)
        desc.lse_stride = _stride3(H * Lq, Lq, 1)
    need = ctypes.c_size_t()
    with run as p:
        _check(_attention_ws(ctypes.byref(desc), p, ctypes.byref(need)),
               "peak_attention_workspace_size")
        ws, ws_size = _workspace(need.value)
        _check(_attention(_ptr(out), _ptr(q), _ptr(k), _ptr(v), ctypes.byref(desc), ws, ws_size,
                          p), "peak_attention")
    return (out, lse) if return_lse else out


def _same_layout(a, b):
    return a.ctypes.data == b.ctypes.data and a.shape == b.shape and all(
        _es(a, i) == _es(b, i) for i in range(a.ndim))


def attention_merge(parts, *, layout="bhld", out=None, lse_out=None, return_lse=False,
                    threads=None, pool=None):
    """Merges attentions of the same queries over disjoint sets of keys
    (peak_attention_merge): the result of one attention() over all of
    those keys, within attention()'s own bounds (peak.h).

    parts: a sequence of ``(o, lse)`` pairs as ``attention(...,
    return_lse=True)`` returns them, o float32 ``[B, H, Lq, Dv]`` (layout
    "bhld") or ``[B, Lq, H, Dv]`` ("blhd"), lse float32 ``[B, H, Lq]``.  They
    are merged in the order given, and the order is part of the result's
    bytes: keep it fixed (rank order, say) to get the same bytes everywhere.
    A part whose lse row is -inf (it saw none of its keys) adds nothing; a
    row that no part saw is zeros with lse -inf.  peak reads every part
    with one set of strides: parts laid out differently from the first are
    copied (C-contiguous).  out: None (a new array) or an array of o's shape;
    ``out=parts[0][0]`` merges in place (a running result), as does
    ``lse_out=parts[0][1]``.  Returns out, or (out, lse) when return_lse or
    lse_out is given.  threads, pool: where the call runs (see the module
    docstring; default: this thread alone)."""
    run = _Run(threads, pool)
    if layout not in ("bhld", "blhd"):
        raise ValueError(f"layout {layout!r}: 'bhld' ([B, H, L, D]) or 'blhd' ([B, L, H, D])")
    bad = TypeError("parts: expected a sequence of (o, lse) pairs (tuples or lists)")
    if isinstance(parts, np.ndarray) or not hasattr(parts, "__iter__"):
        raise bad
    parts = list(parts)
    if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in parts):
        raise bad
    if not parts:
        raise ValueError("parts: at least one (o, lse) pair needed")
    os_ = [_f32(f"parts[{i}] o", p[0], (4,)) for i, p in enumerate(parts)]
    lses = [_f32(f"parts[{i}] lse", p[1], (3,)) for i, p in enumerate(parts)]
    ax = (0, 2, 1) if layout == "bhld" else (0, 1, 2)  # (b, i, h) in the caller's layout
    oshape = os_[0].shape
    B, Lq, H, Dv = oshape[ax[0]], oshape[ax[1]], oshape[ax[2]], oshape[3]
    for i, (o, lse) in enumerate(zip(os_, lses)):
        _shape_is(f"parts[{i}] o", o, oshape)
        _shape_is(f"parts[{i}] lse", lse, (B, H, Lq))
    # one set of strides for every part (the C call's part_*_stride)
    for group in (os_, lses):
        if any(any(_es(a, d) != _es(group[0], d) for d in range(a.ndim)) for a in group):
            group[:] = [np.ascontiguousarray(a) for a in group]
    if out is None:
        out = np.empty(oshape, np.float32)
    else:
        _f32("out", out, (4,), writable=True)
        _shape_is("out", out, oshape)
    lse = lse_out
    if lse is None and return_lse:
        lse = np.empty((B, H, Lq), np.float32)
    elif lse is not None:
        _f32("lse_out", lse, (3,), writable=True)
        _shape_is("lse_out", lse, (B, H, Lq))
    # in place on the first part is allowed; any other overlap is not
    for oname, o in (("out", out), ("lse_out", lse)):
        if o is None:
            continue
        for i, (po, pl) in enumerate(zip(os_, lses)):
            for what, a in (("o", po), ("lse", pl)):
                if _overlaps(o, a) and not (i == 0 and _same_layout(o, a)):
                    raise ValueError(f"{oname} overlaps parts[{i}] {what} (only out = "
                                     "parts[0][0] and lse_out = parts[0][1] are allowed)")
    if lse is not None:
        _no_overlap("lse_out", lse, out=out)
    desc = _MergeDesc()
    desc.batch, desc.heads, desc.q_len, desc.v_head_dim = B, H, Lq, Dv
    desc.o_stride = _stride3(*(_es(out, i) for i in ax))
    desc.part_o_stride = _stride3(*(_es(os_[0], i) for i in ax))
    desc.part_lse_stride = _stride3(*(_es(lses[0], i) for i in range(3)))
    if lse is not None:
        desc.lse_stride = _stride3(*(_es(lse, i) for i in range(3)))
    n = len(parts)
    o_ptrs = (_P * n)(*(a.ctypes.data for a in os_))
    lse_ptrs = (_P * n)(*(a.ctypes.data for a in lses))
    with run as p:
        _check(_attention_merge(_ptr(out), None if lse is None else _ptr(lse), o_ptrs, lse_ptrs,
                                n, ctypes.byref(desc), p), "peak_attention_merge")
    return (out, lse) if (return_lse or lse_out is not None) else out


# ---- residual + LayerNorm ---------------------------------------------------------------

def _rows(name, a, d, writable=False):
    """A 2-D [rows, d] view of a without copying, or ValueError."""
    r = a.view()
    try:
        r.shape = (-1, d)
    except AttributeError:
        raise ValueError(f"{name}: its rows are not evenly spaced in memory (shape {a.shape}, "
                         f"strides {a.strides}); use np.ascontiguousarray") from None
    return r


def add_layernorm(x, residual=None, weight=None, bias=None, eps=1e-5, *, out=None,
                  sum_out=None, threads=None, pool=None):
    """``LayerNorm(x + residual) * weight + bias`` over the last axis
    (peak_add_layernorm), biased variance as torch.nn.LayerNorm.

    x, residual: ``[..., d_model]`` of one shape (residual None: plain
    LayerNorm), each float32, float16 or bfloat16 (ml_dtypes).  weight,
    bias: float32 ``[d_model]`` or None (1 and 0).  out: None (an array of
    x's shape and type), or an array of x's shape of any of the three types
    (``out=x`` or ``out=residual``: in place, same type); 16-bit outputs
    are the float32 results rounded once (peak.h); a call with a 16-bit
    array takes d_model <= 16384.  sum_out: optional array of x's shape that receives x + residual
    (pre-norm chains; may be x or residual).  threads, pool: where the
    call runs (see the module docstring; default: this thread alone).
    Returns out."""
    _check_eps(eps)
    run = _Run(threads, pool)
    types = _LayerNormTypes(_F32, _F32, _F32, _F32)
    _, types.x = _typed("x", x, (1, 2, 3, 4, 5))
    d = x.shape[-1]
    x2 = _rows("x", x, d)
    r2 = None
    if residual is not None:
        _, types.r = _typed("residual", residual, (x.ndim,))
        _shape_is("residual", residual, x.shape)
        r2 = _rows("residual", residual, d)
    for name, a in (("weight", weight), ("bias", bias)):
        if a is not None:
            _f32(name, a, (1,))
            _shape_is(name, a, (d,))
    if out is None:
        out = np.empty(x.shape, x.dtype)
    _, types.y = _typed("out", out, (x.ndim,), writable=True)
    _shape_is("out", out, x.shape)
    y2 = _rows("out", out, d, True)
    s2 = None
    if sum_out is not None:
        _, types.sum = _typed("sum_out", sum_out, (x.ndim,), writable=True)
        _shape_is("sum_out", sum_out, x.shape)
        s2 = _rows("sum_out", sum_out, d, True)
    # In place is allowed (out or sum_out being x or residual, same layout);
    # any other overlap is not.
    for oname, o in (("out", out), ("sum_out", sum_out)):
        if o is None:
            continue
        for iname, a in (("x", x), ("residual", residual)):
            if a is not None and _overlaps(o, a) and not (
                    o.ctypes.data == a.ctypes.data and o.strides == a.strides and
                    o.dtype == a.dtype):
                raise ValueError(f"{oname} overlaps {iname} (only {oname} = {iname}, "
                                 "the same array, is allowed)")
        _no_overlap(oname, o, weight=weight, bias=bias)
    if sum_out is not None:
        _no_overlap("sum_out", sum_out, out=out)
    rows = x2.shape[0]

    def ld(a):
        return _es(a, 0) if a is not None and rows > 1 else d

    with run as p:
        _check(_add_layernorm(_ptr(y2), ld(y2), None if s2 is None else _ptr(s2), ld(s2),
                              _ptr(x2), ld(x2), None if r2 is None else _ptr(r2), ld(r2),
                              None if weight is None else _ptr(weight),
                              None if bias is None else _ptr(bias), rows, d, float(eps),
                              ctypes.byref(types), p),
               "peak_add_layernorm")
    return out


# ---- exp ---------------------------------------------------------------------------------

def exp(x, out=None, *, threads=None, pool=None):
    """``e**x`` elementwise (peak_exp): <= 1 ULP, the same bits on every tier.
    x: float32, any shape (copied if not C-contiguous); out: None, x itself
    (in place) or a C-contiguous float32 array of x's shape.
    threads, pool: where the call runs (see the module docstring; default:
    this thread alone)."""
    run = _Run(threads, pool)
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        raise TypeError("x: expected a float32 numpy.ndarray")
    if x.size == 0:
        raise ValueError("x: empty array")
    src = np.ascontiguousarray(x)
    if out is None:
        out = np.empty(x.shape, np.float32)
    else:
        if not isinstance(out, np.ndarray) or out.dtype != np.float32:
            raise TypeError("out: expected a float32 numpy.ndarray")
        _shape_is("out", out, x.shape)
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError("out: must be C-contiguous and writable")
        if out.ctypes.data != src.ctypes.data:
            _no_overlap("out", out, x=src)
    with run as p:
        _check(_exp(_ptr(out), _ptr(src), x.size, p), "peak_exp")
    return out


# ---- element types -------------------------------------------------------------


def _bfloat16():
    """ml_dtypes' bfloat16 numpy type, or None where ml_dtypes is absent."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes.bfloat16


def _dtype_code(dt, what):
    """peak_dtype of a numpy dtype (or a name: "float32", "float16",
    "bfloat16")."""
    if isinstance(dt, str) and dt == "bfloat16":
        bf16 = _bfloat16()
        if bf16 is None:
            raise TypeError(f"{what}: bfloat16 arrays need ml_dtypes (pip install ml_dtypes)")
        dt = bf16
    try:
        dt = np.dtype(dt)
    except TypeError:
        raise TypeError(f"{what}: not a numpy dtype: {dt!r}") from None
    if dt == np.float32:
        return _F32, dt
    if dt == np.float16:
        return _F16, dt
    if dt.name == "bfloat16":
        return _BF16, dt
    raise TypeError(f"{what}: expected float32, float16 or bfloat16 (ml_dtypes), got {dt}")


def convert(x, dtype, out=None, *, threads=None, pool=None):
    """x converted to ``dtype`` (peak_convert): float32, float16 and bfloat16
    (``ml_dtypes.bfloat16``, or the name "bfloat16" where ml_dtypes is
    installed) in any direction.  Widening is exact; narrowing rounds to
    nearest even; NaN stays NaN (quiet, sign kept); subnormals are kept.
    The same bits on every tier.

    x: a numpy array of one of those types, any shape (copied if not
    C-contiguous); out: None or a C-contiguous writable array of x's shape
    and ``dtype`` (x itself when dtype is x's).  threads, pool: see the
    module docstring."""
    run = _Run(threads, pool)
    if not isinstance(x, np.ndarray):
        raise TypeError("x: expected a numpy.ndarray")
    xt, _ = _dtype_code(x.dtype, "x")
    yt, ydt = _dtype_code(dtype, "dtype")
    if x.size == 0:
        raise ValueError("x: empty array")
    src = np.ascontiguousarray(x)
    if out is None:
        out = np.empty(x.shape, ydt)
    else:
        if not isinstance(out, np.ndarray) or out.dtype != ydt:
            raise TypeError(f"out: expected a numpy.ndarray of {ydt}")
        _shape_is("out", out, x.shape)
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError("out: must be C-contiguous and writable")
        if not (out.ctypes.data == src.ctypes.data and xt == yt):
            _no_overlap("out", out, x=src)
    with run as p:
        _check(_convert(out.ctypes.data, yt, src.ctypes.data, xt, x.size, p), "peak_convert")
    return out
