/**
 * @file peak.h
 * @brief PE and Attention Kernels: the one public header.
 *
 * Hand-vectorised float32 CPU kernels for the Transformer's input and
 * attention path ("Attention Is All You Need", Vaswani et al. 2017, sec. 3.2
 * and 3.5), with a scalar reference for every kernel and AVX2 / AVX-512 / NEON
 * variants chosen at run time.
 *
 * @par Conventions (shared by every function below)
 * - Every function that can fail returns peak_status.  Arguments are
 *   validated before anything is written: a call that returns anything but
 *   PEAK_OK has changed no output byte.  A call with several faults returns
 *   the status of one of them; which one is not specified (the checks run
 *   in an order that may change), so test a status for "not PEAK_OK"
 *   before its kind.
 * - Outputs come first, then inputs, then a params/descriptor pointer.
 * - Sizes are size_t counts of elements.  Strides are ptrdiff_t counts of
 *   elements (not bytes), must be >= 0, and a 2-D operand's row stride is
 *   BLAS-style "ld".  The innermost dimension is always contiguous.  A stride
 *   of 0 broadcasts (inputs only, where said).
 * - Descriptor structs have a PEAK_..._DEFAULT initialiser; start from it and
 *   set the fields you need, so that fields added later keep their defaults.
 * - Tensors are row-major float32 and need no alignment beyond float's own
 *   (4 bytes); vector kernels use unaligned loads and masked tails.  A
 *   bfloat16 or float16 tensor (peak_dtype) needs 2-byte alignment, which
 *   is not checked: an odd address is undefined behaviour.
 * - Strided outputs must not overlap themselves: a layout in which two
 *   index tuples land on the same row is rejected (PEAK_ERR_INVALID_ARG).
 * - Kernels are reentrant and thread-safe.  The only global state is the
 *   dispatch table, initialised once on first use (thread-safe) and changed
 *   only by peak_isa_force().
 * - No kernel allocates heap memory; the one allocation in the library is
 *   peak_attention()'s workspace when the caller passes none.  Scratch
 *   lives on the stack instead: a call needs at most 80 KiB of it in an
 *   optimised build (tests/test-stack.c measures every tier on a painted
 *   thread stack; AVX2, measured on this release: peak_embed_pe with PE on
 *   the fly 55 KiB per token, 52 KiB for a batch of sequences; peak_pe_add
 *   on the fly 52 KiB; peak_pe_table 22 KiB, 51 KiB 16-bit;
 *   peak_rope_cache 21 KiB, 57 KiB 16-bit; peak_softmax 18 KiB;
 *   peak_attention under 9 KiB; peak_add_layernorm with 16-bit tensors
 *   68 KiB at d_model 16384 (a float32 row of it); the AVX-512 tier
 *   measured up to 71 KiB in 0.1).  A thread that calls peak, and every
 *   thread of a pool that runs peak's tasks, must leave that much free
 *   (musl's default thread stack is 128 KiB).
 *
 * @par Why descriptors
 * Softmax, attention and the embedding take descriptors instead of long
 * argument lists: attention takes 7 sizes, 12 strides and a mask; a struct
 * with a DEFAULT initialiser is the only form that stays readable at the
 * call site and lets us add fields without breaking callers (at the source
 * level: see the ABI policy on the main page).
 */
#ifndef PEAK_H
#define PEAK_H

#include <stddef.h>
#include <stdint.h>

/** @brief Marks the functions libpeak exports (default visibility; the rest
    of the library is hidden). */
#if defined(_WIN32)
#define PEAK_API
#elif defined(__GNUC__)
#define PEAK_API __attribute__((visibility("default")))
#else
#define PEAK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Major version of this header: a change means an incompatible API. */
#define PEAK_VERSION_MAJOR 0
/** @brief Minor version of this header: functions or fields added. */
#define PEAK_VERSION_MINOR 5
/** @brief Patch version of this header: fixes only. */
#define PEAK_VERSION_PATCH 0
/** @brief This header's version as a string; compare with peak_version(),
    the library's, to detect a header/library mismatch. */
#define PEAK_VERSION_STRING "0.5.0"
/** @brief This header's version as one number, MAJOR * 10000 + MINOR * 100
    + PATCH (0.1.0 is 100). */
#define PEAK_VERSION_NUMBER                                                      \
    (PEAK_VERSION_MAJOR * 10000 + PEAK_VERSION_MINOR * 100 + PEAK_VERSION_PATCH)
/** @brief Nonzero when this header is version major.minor.patch or later:
    `#if PEAK_VERSION_AT_LEAST(0, 2, 0)`. */
#define PEAK_VERSION_AT_LEAST(major, minor, patch)                               \
    (PEAK_VERSION_NUMBER >= (major) * 10000 + (minor) * 100 + (patch))

/* ------------------------------------------------------------------------ */
/* Status                                                                     */
/* ------------------------------------------------------------------------ */

/** @brief What every fallible function returns. */
typedef enum peak_status {
    PEAK_OK = 0,               /**< Success. */
    PEAK_ERR_INVALID_ARG = 1,  /**< NULL pointer, zero or inconsistent size,
                                    bad stride, bad enum value, NaN parameter. */
    PEAK_ERR_OUT_OF_RANGE = 2, /**< Token id or position outside its table,
                                    pos0 + n beyond PEAK_MAX_POSITION, sizes
                                    and strides whose extent in bytes would
                                    exceed PTRDIFF_MAX. */
    PEAK_ERR_UNSUPPORTED = 3,  /**< ISA not available on this CPU/OS/build, or
                                    an element type (peak_dtype) or size
                                    the call does not take. */
    PEAK_ERR_WORKSPACE = 4,    /**< Caller-provided workspace too small. */
    PEAK_ERR_NO_MEMORY = 5     /**< Convenience path could not allocate. */
} peak_status;

/* ------------------------------------------------------------------------ */
/* Element types                                                             */
/* ------------------------------------------------------------------------ */

/** @brief Element types of tensors.  Every call takes float32 unless its
    documentation names another type; 0 is float32, so a zeroed field
    keeps a descriptor's tensors float32. */
typedef enum peak_dtype {
    PEAK_F32 = 0,  /**< IEEE 754 binary32 (float). */
    PEAK_BF16 = 1, /**< bfloat16: binary32's sign, 8-bit exponent and top 7
                        fraction bits (the upper 16 bits of a float). */
    PEAK_F16 = 2   /**< IEEE 754 binary16 (float16, fp16). */
} peak_dtype;

/**
 * @brief A static English description of a status.
 * @param s  any value (need not be a peak_status enumerator).
 * @return "invalid argument", ...; never NULL: "unknown status" for values
 *         outside the enum.
 * @threadsafety Safe from any thread; the strings are static constants.
 */
PEAK_API const char *peak_status_string(peak_status s);

/* ------------------------------------------------------------------------ */
/* Instruction-set tiers and run-time dispatch                                */
/* ------------------------------------------------------------------------ */

/** @brief Instruction-set tiers.  Ordered: a higher x86 tier implies the
    lower ones. */
typedef enum peak_isa {
    PEAK_ISA_SCALAR = 0, /**< Plain C: the reference and the fallback. */
    PEAK_ISA_AVX2 = 1,   /**< x86-64 AVX2 + FMA, OS saves YMM state. */
    PEAK_ISA_AVX512 = 2, /**< AVX-512 F/BW/DQ/VL, OS saves ZMM/opmask state. */
    PEAK_ISA_NEON = 3    /**< AArch64 AdvSIMD. */
} peak_isa;

/**
 * @brief The tier every kernel call currently uses.
 *
 * The best tier the CPU, the OS and this build support, lowered by the
 * PEAK_ISA environment variable ("scalar", "avx2", "avx512", "neon", any
 * case; a cap, never a raise: an unsupported request falls to the best
 * supported tier below it, an unknown value, or one naming another
 * architecture's tier, is ignored; each prints one warning on stderr), or
 * the tier last set by peak_isa_force().  PEAK_ISA_DEBUG=1 prints the
 * decision on stderr when it is first made.
 * @return the active tier.
 * @threadsafety Safe from any thread.  The first call of the process (of
 *   any peak function) runs detection once, under pthread_once.
 */
PEAK_API peak_isa peak_isa_active(void);

/**
 * @brief Whether a tier is compiled into this library and usable on this
 *        CPU and OS.
 * @param isa  the tier to ask about.
 * @return 1 if usable, else 0 (also for values outside the enum).
 * @threadsafety Safe from any thread.
 */
PEAK_API int peak_isa_supported(peak_isa isa);

/**
 * @brief Process-wide: make every later call use `isa` (for tests and
 *        benchmarks).
 *
 * Unlike PEAK_ISA this can select any usable tier, above the cap too.
 * @param isa  the tier to use from now on.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_UNSUPPORTED (and nothing changes) when
 *   peak_isa_supported(isa) is 0; PEAK_ERR_INVALID_ARG for a value outside
 *   the enum.
 * @threadsafety The switch itself is an atomic store, but it is not meant to
 *   happen while other threads run kernels: a call that has already started
 *   finishes on the old tier, later ones use the new one.
 * @see peak_isa_reset()
 */
PEAK_API peak_status peak_isa_force(peak_isa isa);

/**
 * @brief Back to the automatic choice (detection, then the PEAK_ISA cap).
 * @threadsafety As peak_isa_force().
 */
PEAK_API void peak_isa_reset(void);

/**
 * @brief The name of a tier.
 * @param isa  any value.
 * @return "scalar", "avx2", "avx512", "neon"; "unknown" outside the enum.
 * @threadsafety Safe from any thread; static strings.
 */
PEAK_API const char *peak_isa_name(peak_isa isa);

/**
 * @brief One line saying why the automatic choice is what it is.
 *
 * E.g. "avx512: CPU has AVX-512 F/DQ/BW/VL and the OS saves opmask/ZMM
 * state", followed by what PEAK_ISA changed, if anything.
 * @return static storage, valid for the life of the process.
 * @threadsafety Safe from any thread (runs detection once if needed).
 */
PEAK_API const char *peak_isa_reason(void);

/** @brief CPU features beyond a tier's baseline that peak detects (bit
    flags; peak_cpu_features()).  Each counts only when the OS saves the
    registers it uses (XCR0 on x86), as the tiers do. */
typedef enum peak_cpu_feature {
    /** x86 F16C: float16 <-> float32 conversions on YMM (CPUID.1:ECX bit
        29, with YMM state). */
    PEAK_CPU_F16C = 1u << 0,
    /** x86 AVX512_BF16: VCVTNEPS2BF16 and VDPBF16PS (CPUID.(7,1):EAX bit 5,
        with AVX-512 F and ZMM state). */
    PEAK_CPU_AVX512_BF16 = 1u << 1,
    /** x86 AVX512_FP16: float16 arithmetic (CPUID.(7,0):EDX bit 23, with
        AVX-512 F and ZMM state). */
    PEAK_CPU_AVX512_FP16 = 1u << 2,
    /** AArch64 FP16 arithmetic, scalar and AdvSIMD (AT_HWCAP FPHP and
        ASIMDHP, bits 9 and 10); the float16 conversions themselves are
        baseline AArch64. */
    PEAK_CPU_ARM_FP16 = 1u << 3,
    /** AArch64 BF16 (AT_HWCAP2 bit 14: BFCVT, BFDOT, BFMMLA). */
    PEAK_CPU_ARM_BF16 = 1u << 4
} peak_cpu_feature;

/**
 * @brief The features of peak_cpu_feature this CPU and OS offer.
 *
 * Read with the tier, once per process; PEAK_ISA does not change them.
 * @return an OR of peak_cpu_feature flags (0 on other architectures).
 * @threadsafety Safe from any thread (runs detection once if needed).
 */
PEAK_API unsigned peak_cpu_features(void);

/**
 * @brief The name of one feature flag.
 * @param feature  one peak_cpu_feature value.
 * @return "f16c", "avx512_bf16", "avx512_fp16", "arm_fp16", "arm_bf16";
 *         "unknown" for anything else (several flags ORed included).
 * @threadsafety Safe from any thread; static strings.
 */
PEAK_API const char *peak_cpu_feature_name(peak_cpu_feature feature);

/**
 * @brief The library's version at run time.
 * @return "MAJOR.MINOR.PATCH", e.g. "0.1.0": the PEAK_VERSION_STRING the
 *         library was built with (a program's own PEAK_VERSION_STRING may
 *         differ if it was compiled against another header).
 * @threadsafety Safe from any thread; a static string.
 */
PEAK_API const char *peak_version(void);

/* ------------------------------------------------------------------------ */
/* Threads: the caller's pool                                                */
/* ------------------------------------------------------------------------ */

/**
 * @brief One task of a parallel run: `fn(arg, task)` for task < n_tasks.
 */
typedef void (*peak_task_fn)(void *arg, size_t task);

/**
 * @brief A thread pool peak may run a call's work on: the caller's own
 *        (PyTorch's, ONNX Runtime's, OpenMP, rayon, pthreadpool ...) behind
 *        two functions, as oneDNN's threadpool_iface and pthreadpool's
 *        parallelize_1d.
 *
 * Every kernel function takes `const peak_threadpool *pool` as its last
 * argument.  NULL runs the call on the calling thread alone, as peak 0.1
 * did.  There is no hidden global pool and no process-wide default: each
 * call says where it runs.
 *
 * Why an argument, not a descriptor field or a context object: exp, the PE
 * table and LayerNorm have no descriptor, so a field would reach only half
 * of the families; a context object would make every caller create and
 * keep one even to run on one thread, and would tie the pool to a call's
 * other state (the tier is process-wide).  An argument is the same in every
 * family, costs a NULL where threads are not wanted, and lets an engine
 * pass, per call, the pool of the thread or stream it is on.
 *
 * @par The same bytes at any thread count
 * A call's work is cut into items by its shapes alone (never by the number
 * of workers), each item is computed the same way on whichever worker runs
 * it, and partial results (split-KV decode) are merged in a fixed order.
 * So every output byte is the same with no pool, with a pool of 1, 2, 3, 7
 * or 64 workers, and whatever order the pool runs its tasks in, on a given
 * tier (tiers still differ from each other where their docs say so).
 *
 * @par Scheduling
 * peak asks `workers` when a call starts and runs at most that many
 * tasks (sizing the attention workspace by the same answer); each
 * task takes the call's items one at a time from a shared counter until
 * none is left, so a pool that runs fewer tasks at once (or all of them on
 * one thread, or in reverse order) only takes longer.  A call whose work is
 * below about 20 microseconds runs on the calling thread without touching
 * the pool.
 *
 * @par Nesting
 * A peak call made inside a task that peak is running (on any pool) runs
 * on that task's thread without using a pool: it completes, it does not
 * deadlock, and its bytes are those of any other call.  The pools below
 * also run inline a `run` entered from one of their own tasks, so a task
 * the caller runs through their `run` may call peak with the same pool.
 * A pool of the caller's own must allow that itself if its tasks call
 * peak with it.  Two pools whose tasks call peak with each other's pool
 * can deadlock in pthreadpool (each waits on the other's lock); a nested
 * call that runs inline still needs a workspace sized for the pool it was
 * given.  pthreadpool's parallelize is not reentrant: a task the
 * caller gives a pthreadpool directly (not through the adapter's `run`)
 * must not call peak with an adapter of that same pthreadpool.
 *
 * @par Stack
 * Each task runs kernels, so each of the pool's threads needs the stack
 * any thread calling peak needs (80 KiB: see the conventions at the top).
 * pthreadpool's threads get the system default (8 MiB on glibc).
 *
 * @threadsafety Several threads may make peak calls on one pool at once if
 *   the pool's `run` may be called from several threads at once (the pools
 *   below may: their calls take turns).
 */
typedef struct peak_threadpool {
    /** The most tasks the pool runs at the same time, the calling thread
        included; >= 1 (0 is taken as 1; NULL, or a NULL run, makes the pool
        one worker).  Called at the start of a peak call, maybe more than
        once.  peak_attention() sizes its workspace by the answer (one slot
        a worker, uncapped: answer the CPUs you have, not SIZE_MAX): a
        caller workspace sized for a smaller answer gets
        PEAK_ERR_WORKSPACE. */
    size_t (*workers)(void *ctx);
    /** Runs fn(arg, t) once for every t < n_tasks, on any of the pool's
        threads (the caller's included), in any order, and returns when all
        of them have returned.  n_tasks is at most workers(ctx). */
    void (*run)(void *ctx, peak_task_fn fn, void *arg, size_t n_tasks);
    /** The pool itself, passed back to both functions. */
    void *ctx;
} peak_threadpool;

struct pthreadpool;

/** @brief The most threads peak_threadpool_create() accepts. */
#define PEAK_THREADPOOL_MAX_THREADS ((size_t)1 << 16)

/**
 * @brief A peak_threadpool that runs on an existing pthreadpool_t (the pool
 *        of XNNPACK and PyTorch's mobile builds): workers is
 *        pthreadpool_get_threads_count(), run is pthreadpool_parallelize_1d.
 *
 * The caller keeps owning the pthreadpool; destroy it only after the last
 * peak call that uses it.  In a library built without pthreadpool the
 * adapter has no functions and every call on it runs on the calling
 * thread.  The returned struct holds no other state and
 * may be copied.
 * @param pthreadpool  a pthreadpool_t (NULL: pthreadpool runs every task on
 *                     the calling thread).
 * @return the adapter, by value.
 * @threadsafety Safe from any thread.
 */
PEAK_API peak_threadpool peak_threadpool_from_pthreadpool(struct pthreadpool *pthreadpool);

/**
 * @brief A ready-made pool of `threads` workers (the calling thread counts
 *        as one: threads - 1 threads are started), built on pthreadpool.
 * @param threads    workers; 0: the number of online CPUs.
 * @param[out] pool  receives the pool, to pass to kernel calls and to
 *                   peak_threadpool_destroy().
 * @return PEAK_OK, or an error (below).
 * More threads than CPUs only oversubscribe them: pthreadpool's idle
 * threads spin for a while after each call (a 5 ms attention call took
 * 250-500 ms on 64 threads of a 2-CPU machine).
 * @errors PEAK_ERR_INVALID_ARG for a NULL pool or threads above
 *   PEAK_THREADPOOL_MAX_THREADS; PEAK_ERR_NO_MEMORY when the pool's memory
 *   cannot be had (pthreadpool does not report a thread it fails to start:
 *   then the call may not return); PEAK_ERR_UNSUPPORTED
 *   when the library was built without pthreadpool (-Dpthreadpool=disabled,
 *   as the AArch64 cross build is: Debian 12 cannot install the arm64
 *   libpthreadpool-dev beside the host's).  *pool is NULL after an error.
 * @threadsafety Safe from any thread.  Calls that share the pool take
 *   turns running on it.
 */
PEAK_API peak_status peak_threadpool_create(size_t threads, peak_threadpool **pool);

/**
 * @brief Stops the threads of a pool made by peak_threadpool_create() and
 *        frees it.
 * @param pool  a pool from peak_threadpool_create(), or NULL (nothing
 *              happens).  Not a peak_threadpool of the caller's own or
 *              from peak_threadpool_from_pthreadpool().
 * @threadsafety Not while a call is running on the pool.
 */
PEAK_API void peak_threadpool_destroy(peak_threadpool *pool);

/**
 * @brief The number of workers a peak call on `pool` uses at most.
 * @param pool  any pool, or NULL.
 * @return 1 for NULL or a pool without a workers function, else
 *         pool->workers(pool->ctx) (0 is taken as 1).
 * @threadsafety Safe from any thread if pool->workers is.
 */
PEAK_API size_t peak_threadpool_workers(const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Sinusoidal positional encoding                                            */
/* ------------------------------------------------------------------------ */

/** @brief Positions are limited to [0, PEAK_MAX_POSITION): beyond 2^32 the
    angle pos * w can no longer be formed to the accuracy promised below. */
#define PEAK_MAX_POSITION ((size_t)1 << 32)

/** @brief Column layout of a sinusoid row. */
typedef enum peak_pe_layout {
    /** Vaswani et al. 2017 eq. (PE) and the PyTorch tutorial module:
        PE[p, 2i] = sin(p * w_i),  PE[p, 2i+1] = cos(p * w_i),
        w_i = base^(-2i / d_model),  i = 0 .. ceil(d_model/2) - 1.
        Odd d_model: the last column is the sine sin(p * w_{(d-1)/2}). */
    PEAK_PE_INTERLEAVED = 0,
    /** tensor2tensor get_timing_signal_1d, fairseq SinusoidalPositionalEmbedding,
        Marian: PE[p, i] = sin(p * w_i), PE[p, half + i] = cos(p * w_i),
        half = floor(d_model/2),  w_i = exp(-i * ln(base) / max(half - 1, 1)).
        Odd d_model: the last column is 0 (d_model == 1: the row is [0]). */
    PEAK_PE_SPLIT = 1,
    /** [sin | cos] with the paper's frequencies w_i = base^(-2i / d_model),
        i < half: the Hugging Face port of Marian (MarianSinusoidalPositional-
        Embedding).  Odd d_model: the last column is 0. */
    PEAK_PE_SPLIT_PAPER = 2
} peak_pe_layout;

/** @brief How the sinusoid entries are rounded. */
typedef enum peak_pe_mode {
    /** The angle p * w_i is formed in double precision and sin/cos evaluated
        to ~1e-16, so every entry is within 2^-23 absolute of the exact real
        value for every p < 2^20 and d_model <= 8192 (measured bound: see the
        tests; in practice the float rounding, <= 2^-25, dominates).  Entries
        depend only on (p, column, d_model, layout, base): a row is the same
        bit pattern whatever pos0 and n_pos produced it, on every tier. */
    PEAK_PE_EXACT = 0,
    /** The float32 formula of the usual PyTorch `PositionalEncoding`
        module (div_term = exp(arange(0, d, 2) * (-ln(base) / d))),
        reproduced: w_i = expf(j * c) with j the float column exponent and
        c = (float)(-ln(base) / denom) (PyTorch takes exp from SLEEF: expf
        u10), angle = (float)p * w_i rounded to float, then sin/cos of that
        float angle.  Within 2 ULP of
        torch 1.13's table (measured: 1 ULP); off from the exact value by up to
        2.5e-4 at p=5000 and 4.7e-3 at p=96079 (measured, d_model 512: the
        float rounding of the angle). */
    PEAK_PE_TORCH_F32 = 1
} peak_pe_mode;

/** @brief Parameters of the sinusoid; start from PEAK_PE_PARAMS_DEFAULT. */
typedef struct peak_pe_params {
    peak_pe_layout layout; /**< Column layout. */
    peak_pe_mode mode;     /**< Rounding mode. */
    double base;           /**< > 0 and finite; 10000 in the paper. */
} peak_pe_params;

/** @brief Interleaved layout, exact mode, base 10000 (the paper). */
#define PEAK_PE_PARAMS_DEFAULT {PEAK_PE_INTERLEAVED, PEAK_PE_EXACT, 10000.0}

/**
 * @brief The sinusoid table for positions pos0 .. pos0 + n_pos - 1.
 *
 * Every tier returns the same bits (see the mode).
 *
 * Types: out is float32, bfloat16 or float16 (out_type).  A 16-bit entry
 * is the float32 entry of the same call rounded once to nearest even
 * (peak_convert's rounding), so the tiers agree there too.  In
 * PEAK_PE_EXACT mode it is within half an ULP of its type plus 2^-24 of
 * the exact value, for the positions and widths of the float32 bound (the
 * float32 entry is a ~1e-16 double rounded once, and entries are at most 1
 * in magnitude, so that rounding is at most 2^-24); in PEAK_PE_TORCH_F32
 * mode it is the float32 entry (PyTorch's, as above) rounded once, as
 * `pe.to(dtype)` rounds the module's table.  Rows of a 16-bit table are
 * computed a few at a time in float32 on the stack and rounded from there;
 * rows of more than 8192 columns a window of columns at a time, without
 * the table's shared sincos (slower).
 * @param[out] out  [n_pos, d_model] elements of out_type, row-major,
 *                  contiguous (row stride d_model elements), aligned to the
 *                  element's size.
 * @param out_type  out's element type: PEAK_F32, PEAK_BF16 or PEAK_F16.
 * @param n_pos     number of rows (positions).
 * @param d_model   number of columns (the model width).
 * @param pos0      position of the first row.
 * @param params    layout, mode and base; NULL means PEAK_PE_PARAMS_DEFAULT.
 * @param pool     the caller's thread pool, or NULL (this thread only):
 *                  see peak_threadpool.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_INVALID_ARG if out is NULL, n_pos or d_model is 0, or
 *   params holds an unknown layout/mode or a base that is not > 0 and finite;
 *   PEAK_ERR_UNSUPPORTED for an out_type outside peak_dtype (checked after
 *   the invalid arguments, before the ranges);
 *   PEAK_ERR_OUT_OF_RANGE if pos0 + n_pos > PEAK_MAX_POSITION or
 *   n_pos * d_model elements of out_type, in bytes, exceed PTRDIFF_MAX.
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe.
 * @source Vaswani et al. 2017, sec. 3.5; layouts as documented at
 *   peak_pe_layout; rounding: IEEE 754-2019 sec. 4.3.1 (roundTiesToEven).
 */
PEAK_API peak_status peak_pe_table(void *out, peak_dtype out_type, size_t n_pos, size_t d_model,
                                   size_t pos0, const peak_pe_params *params,
                                   const peak_threadpool *pool);

/**
 * @brief In-place positional add, the PyTorch module's forward():
 *        x[b, s, :] += PE(pos0 + s, :) for b < batch, s < seq_len.
 *
 * pe == NULL: PE(p, :) is computed on the fly, bit-identical to
 * peak_pe_table(..., params) row p.  pe != NULL: PE(p, :) is the table row
 * pe + (p * d_model), the table holding pe_rows rows [pe_rows, d_model]
 * (rows for positions 0 .. pe_rows - 1; params is then ignored).
 * x may not overlap pe (checked: their extents must not meet).
 * @param[in,out] x      row (b, s) at x + b * batch_stride + s * ld_x,
 *                       d_model contiguous floats.
 * @param batch_stride   elements between batch entries (>= d_model when
 *                       batch > 1).
 * @param ld_x           elements between positions (>= d_model).
 * @param batch          number of sequences.
 * @param seq_len        positions per sequence.
 * @param d_model        floats per row.
 * @param pos0           position of row s = 0.
 * @param pe             [pe_rows, d_model] contiguous table, or NULL.
 * @param pe_rows        rows in pe (ignored when pe is NULL).
 * @param params         for the on-the-fly PE; NULL means
 *                       PEAK_PE_PARAMS_DEFAULT.
 * @param pool     the caller's thread pool, or NULL (this thread only):
 *                  see peak_threadpool.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_INVALID_ARG for a NULL x, a zero size, ld_x < d_model,
 *   batch > 1 with batch_stride < d_model, x == pe, or bad params (on the
 *   fly); PEAK_ERR_OUT_OF_RANGE if pos0 + seq_len > pe_rows (table) or
 *   > PEAK_MAX_POSITION (on the fly), or if x's extent (the last element
 *   of row (batch-1, seq_len-1)) or the table's, in bytes, exceeds
 *   PTRDIFF_MAX.
 * @threadsafety Reentrant: concurrent calls with distinct x are safe.
 * @source Vaswani et al. 2017, sec. 3.5 (the sum of embedding and PE).
 */
PEAK_API peak_status peak_pe_add(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                                 size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                                 size_t pe_rows, const peak_pe_params *params,
                                 const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Rotary position embedding (RoPE)                                           */
/* ------------------------------------------------------------------------ */

/** @brief Largest rotary_dim: 2 * 256 frequencies. */
#define PEAK_ROPE_MAX_DIM ((size_t)512)

/** @brief Positions below this get the EXACT mode's 2^-23 bound; positions
    up to PEAK_MAX_POSITION are accepted, with an angle error that grows as
    p * 2^-48 beyond it. */
#define PEAK_ROPE_EXACT_POSITIONS ((size_t)1 << 24)

/** @brief How the cos/sin values are rounded. */
typedef enum peak_rope_mode {
    /** Frequencies, scaling and the phase p * w_i in double precision, cos
        and sin to ~1e-16, the attention factor applied in double, one
        rounding to float at the end: every value is within 2^-23 A
        absolute of the exact value (the scheme's formula in real
        arithmetic; A = max(1, attention factor)) for every p <
        PEAK_ROPE_EXACT_POSITIONS, rotary_dim <= PEAK_ROPE_MAX_DIM and base
        <= 1e8, where every scaled frequency w_i is at most 1 (every
        scheme's is, but LongRoPE's with factors below 1; tests/test-rope.c
        checks it against a long-double oracle).  Larger frequencies grow
        the phase's error with p w_i (a LongRoPE factor of 1e-3 at p =
        2^24 - 1: 4.5 * 2^-23).  A value depends only on (p, i, params): the same bits
        whatever pos0 and n_pos produced it, on every tier. */
    PEAK_ROPE_EXACT = 0,
    /** Hugging Face transformers' float32 computation, for models trained
        with it: the scheme's inv_freq as torch computes it in float32
        (torch.pow on the AVX2 CPU kernel: SLEEF's powf u10 on whole vectors,
        libm powf on the tail), the phase (float)p * inv_freq rounded to
        float, cos/sin of that float angle, times (float)attention_factor in
        float.  Within 2 ULP of transformers 5.24 / torch 2.15
        (LlamaRotaryEmbedding.forward; tests/data/rope-hf-cache.txt, made by
        scripts/rope-reference.py).  Off from the exact value by up to
        ~6.5e-5 at p = 1e5 and ~2.9e-4 at p = 1e6 (the float angle). */
    PEAK_ROPE_HF_F32 = 1
} peak_rope_mode;

/** @brief The frequency scaling scheme (transformers' rope_type). */
typedef enum peak_rope_scaling {
    /** inv_freq_i = base^(-2i / rotary_dim) (Su et al. 2021, RoFormer). */
    PEAK_ROPE_NONE = 0,
    /** Position interpolation (Chen et al. 2023): inv_freq / factor. */
    PEAK_ROPE_LINEAR = 1,
    /** NTK-aware: base * ntk_alpha^(r / (r - 2)), r = rotary_dim. */
    PEAK_ROPE_NTK = 2,
    /** Dynamic NTK: base * (factor * L / L0 - (factor - 1))^(r / (r - 2))
        with L = max(seq_len, L0), L0 = original_max_position (transformers'
        config.max_position_embeddings).  The caller passes the current
        length; nothing is kept between calls.  HF_F32 forms this base in
        double, as transformers' ROPE_INIT_FUNCTIONS["dynamic"] does for an
        integer seq_len; its LlamaRotaryEmbedding, growing during a forward,
        passes a tensor and forms the base in float32, which differs by an
        ULP at some lengths (131072 and 123457 with factor 2 over 4096):
        to match the module, pass that float base with PEAK_ROPE_NONE, as
        the Python binding's peak.torch.RotaryEmbedding does. */
    PEAK_ROPE_DYNAMIC = 3,
    /** YaRN (Peng et al. 2023): a linear ramp between the interpolated
        (inv_freq / factor) and the original frequencies over the dimensions
        of beta_slow .. beta_fast rotations in original_max_position, and
        the attention factor (see peak_rope_params::attention_factor). */
    PEAK_ROPE_YARN = 4,
    /** Llama 3.1: wavelengths above original_max_position / low_freq_factor
        divided by factor, below original_max_position / high_freq_factor
        kept, a smooth interpolation between. */
    PEAK_ROPE_LLAMA3 = 5,
    /** LongRoPE (Phi-3): inv_freq_i / longrope_factors[i], with the
        factor set (short or long) chosen by the caller. */
    PEAK_ROPE_LONGROPE = 6
} peak_rope_scaling;

/** @brief The rotary frequencies and their scaling; start from
    PEAK_ROPE_PARAMS_DEFAULT.  Fields a scheme does not use are ignored. */
typedef struct peak_rope_params {
    size_t rotary_dim;   /**< Rotated dimensions: even, 2 .. PEAK_ROPE_MAX_DIM. */
    double base;         /**< rope_theta: > 1 and finite. */
    peak_rope_mode mode; /**< Rounding mode. */
    peak_rope_scaling scaling; /**< Scaling scheme. */
    double factor;       /**< LINEAR, DYNAMIC, YARN, LLAMA3: >= 1 and finite.
                              LONGROPE: only for the default attention
                              factor (transformers: max_position_embeddings
                              / original_max_position_embeddings), > 0. */
    double ntk_alpha;    /**< NTK: >= 1 and finite. */
    size_t original_max_position; /**< DYNAMIC, YARN, LLAMA3, LONGROPE: the
                              pretraining context length, > 1 (>= 2). */
    size_t seq_len;      /**< DYNAMIC: the current sequence length (0: at
                              most original_max_position: no change). */
    double beta_fast;    /**< YARN: > 0, finite; 0: 32.  Below beta_slow the
                              ramp runs the other way, as in transformers. */
    double beta_slow;    /**< YARN: > 0, finite; 0: 1. */
    int yarn_truncate;   /**< YARN: nonzero (the default) rounds the ramp's
                              ends to whole dimensions (floor, ceil), as
                              transformers' `truncate`; 0 keeps them
                              fractional (gpt-oss). */
    double mscale;       /**< YARN: 0 = absent; any finite value; used only
                              with mscale_all_dim (alone it changes
                              nothing, as in transformers). */
    double mscale_all_dim; /**< YARN: 0 = absent; any finite value. */
    double attention_factor; /**< Multiplies every cos and sin.  0: the
                              scheme's default: 1, except YARN:
                              m(factor, mscale) / m(factor, mscale_all_dim)
                              when both are given (so exactly 1 when they
                              are equal, as transformers and vLLM's
                              DeepSeek-YaRN; DeepSeek-V3 then scales the
                              softmax by m(factor, mscale_all_dim)^2 itself),
                              else m(factor, 1), with m(s, k) = 0.1 k ln s +
                              1 (1 for s <= 1); LONGROPE: sqrt(1 + ln factor
                              / ln original_max_position), 1 for factor <= 1.
                              Else > 0 and at most FLT_MAX (a float);
                              the scheme's own must be so too. */
    double low_freq_factor;  /**< LLAMA3: > 0, finite (1 in Llama 3.1). */
    double high_freq_factor; /**< LLAMA3: > low_freq_factor, finite (4). */
    const float *longrope_factors; /**< LONGROPE: [rotary_dim / 2] factors,
                              each > 0 and finite: the short set or the long
                              one, chosen by the caller (by the length it
                              serves, never by an allocation size). */
} peak_rope_params;

/** @brief rotary_dim 0 (set it), base 10000, EXACT, no scaling, YaRN's
    beta 32 / 1 with truncation. */
#define PEAK_ROPE_PARAMS_DEFAULT                                                 \
    {0, 10000.0, PEAK_ROPE_EXACT, PEAK_ROPE_NONE, 1.0, 1.0, 0, 0, 32.0, 1.0, 1,   \
     0.0, 0.0, 0.0, 1.0, 4.0, NULL}

/**
 * @brief The cos/sin cache of positions pos0 .. pos0 + n_pos - 1, in the
 *        layout vLLM calls cos_sin_cache.
 *
 * Row t (position p = pos0 + t) holds n = rotary_dim / 2 cosines then n
 * sines: cache[t, i] = A cos(p w_i), cache[t, n + i] = A sin(p w_i), for
 * the scaled frequencies w_i and attention factor A of params.  Every tier
 * returns the same bits (see the mode).
 *
 * Types: cache is float32, bfloat16 or float16 (cache_type).  A 16-bit
 * value is the float32 value of the same call rounded once to nearest even
 * (peak_convert's rounding: float16 gives inf, with the sign, from 65520
 * on, which only an attention factor that large reaches), so the tiers
 * agree there too.  In PEAK_ROPE_EXACT mode it is within half an ULP of its
 * type plus 2^-24 A of the exact value (A = max(1, attention factor)),
 * where the float32 bound holds (the float32 value is a ~1e-16 A double
 * rounded once, at most 2^-24 A away); in PEAK_ROPE_HF_F32 mode it is the
 * float32 value (transformers', as above) rounded once, as `cos.to(dtype)`
 * rounds transformers' float32 cos and sin.  Rows of a 16-bit cache are
 * computed a few at a time in float32 on the stack and rounded from there.
 * peak_rope_apply() and peak_attention() read float32 caches only.
 * @param[out] cache  [n_pos, rotary_dim] elements of cache_type, row-major,
 *                    contiguous, aligned to the element's size.
 * @param cache_type  cache's element type: PEAK_F32, PEAK_BF16 or PEAK_F16.
 * @param n_pos       number of rows.
 * @param pos0        position of the first row.
 * @param params      frequencies and scaling (not NULL; rotary_dim set).
 * @param pool        the caller's thread pool, or NULL (this thread only):
 *                    see peak_threadpool.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_INVALID_ARG for a NULL cache or params, n_pos 0, an odd
 *   rotary_dim or one outside 2 .. PEAK_ROPE_MAX_DIM, an unknown mode or
 *   scaling, or a parameter the scheme uses that is not finite or outside
 *   its range (see peak_rope_params), NTK or DYNAMIC with rotary_dim 2,
 *   a scaled base (NTK, DYNAMIC) or a scheme's attention factor that is
 *   not finite and positive, a NULL longrope_factors for LONGROPE, a cache
 *   that overlaps longrope_factors;
 *   PEAK_ERR_UNSUPPORTED for a cache_type outside peak_dtype (checked after
 *   the NULL pointers and the params, before the ranges and the overlap);
 *   PEAK_ERR_OUT_OF_RANGE if pos0 + n_pos > PEAK_MAX_POSITION or the
 *   cache's size in bytes (n_pos * rotary_dim elements of cache_type)
 *   exceeds PTRDIFF_MAX.
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe.
 * @source Su et al. 2021 (RoFormer), eq. 34; the scalings as transformers'
 *   modeling_rope_utils.py (ROPE_INIT_FUNCTIONS); rounding: IEEE 754-2019
 *   sec. 4.3.1 (roundTiesToEven).
 */
PEAK_API peak_status peak_rope_cache(void *cache, peak_dtype cache_type, size_t n_pos,
                                     size_t pos0, const peak_rope_params *params,
                                     const peak_threadpool *pool);

/** @brief Which dimensions rotate together. */
typedef enum peak_rope_pairing {
    /** GPT-NeoX, LLaMA, Mistral, Qwen, Gemma (transformers' rotate_half):
        dimensions (i, i + rotary_dim / 2) by angle p w_i. */
    PEAK_ROPE_HALF_SPLIT = 0,
    /** GPT-J, ChatGLM, RoFormer (rotate_every_two): dimensions (2i, 2i + 1)
        by angle p w_i. */
    PEAK_ROPE_INTERLEAVED = 1
} peak_rope_pairing;

/** @brief What peak_rope_apply() rotates; start from PEAK_ROPE_DESC_DEFAULT. */
typedef struct peak_rope_desc {
    size_t batch;       /**< B. */
    size_t seq_len;     /**< L: tokens per sequence. */
    size_t heads;       /**< H. */
    size_t head_dim;    /**< D: >= rotary_dim; dimensions rotary_dim .. D-1
                             pass through unchanged (partial rotary: GPT-J,
                             Phi, ChatGLM). */
    /** Strides of x for the [b, l, h] indices; the last (d) is contiguous.
        [B, L, H, D] packed: {L*H*D, H*D, D}; [B, H, L, D] packed:
        {H*L*D, D, L*D}.  An x stride may be 0 (the same row for every
        index: a broadcast), out of place. */
    ptrdiff_t x_stride[3];
    ptrdiff_t y_stride[3]; /**< Strides of y for [b, l, h], as x_stride,
                                but y's rows must not overlap. */
    peak_rope_pairing pairing; /**< Which dimensions pair. */
    peak_rope_params params;   /**< rotary_dim always; the rest only on the
                                    fly (cache NULL). */
    const float *cache;   /**< [cache_rows, rotary_dim] rows of
                               peak_rope_cache() for positions 0 ..
                               cache_rows - 1 (pos0 0, row index =
                               position, made with the params wanted: a
                               cache cannot be checked against them), or
                               NULL: cos/sin on the fly from params, the
                               same bits as from such a cache. */
    size_t cache_rows;    /**< Rows of cache. */
    size_t pos0;          /**< Token l of every sequence is at position
                               pos0 + l (no positions array). */
    const int64_t *positions;   /**< Or [B, L] positions, each >= 0 (batched
                                     decode with different past lengths,
                                     left padding); NULL: pos0 + l. */
    const int32_t *positions32; /**< The same as int32 (llama.cpp); at most
                                     one of the two is set. */
    ptrdiff_t positions_stride; /**< Elements between the batch entries of
                                     positions; 0: one row for all. */
} peak_rope_desc;

/** @brief Zero sizes and strides (set them), half-split pairing,
    PEAK_ROPE_PARAMS_DEFAULT (set rotary_dim), no cache, positions
    0 .. L-1. */
#define PEAK_ROPE_DESC_DEFAULT                                                   \
    {0, 0, 0, 0, {0, 0, 0}, {0, 0, 0}, PEAK_ROPE_HALF_SPLIT, PEAK_ROPE_PARAMS_DEFAULT, \
     NULL, 0, 0, NULL, NULL, 0}

/**
 * @brief Rotates each head vector of x by its token's position:
 *        y[b, l, h, :] = RoPE(x[b, l, h, :], p(b, l)).
 *
 * With n = rotary_dim / 2, c = cache[p, i] and s = cache[p, n + i] (the
 * attention factor included), half-split: y[i] = x[i] c - x[i + n] s,
 * y[i + n] = x[i + n] c + x[i] s; interleaved: y[2i] = x[2i] c -
 * x[2i + 1] s, y[2i + 1] = x[2i + 1] c + x[2i] s; y[j] = x[j] for j >=
 * rotary_dim.  Each output is two float products rounded separately and
 * one add (never fused), as transformers' (q * cos) + (rotate_half(q) *
 * sin): the same bits on every tier, and from the same cos/sin, the bits
 * of transformers' apply_rotary_pos_emb.  p(b, l) = positions[b *
 * positions_stride + l] if given, else pos0 + l.
 * @param[out] y  [B, L, H, D] at y_stride; may be x itself (in place,
 *                with y_stride equal to x_stride), or a separate buffer
 *                (a KV-cache slot, say), which must not overlap x, the
 *                cache or the positions.
 * @param x       [B, L, H, D] at x_stride.
 * @param desc    shapes, strides, pairing, cos/sin source and positions.
 * @param pool    the caller's thread pool, or NULL (this thread only):
 *                see peak_threadpool.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_INVALID_ARG for NULL y, x or desc, a zero size, a
 *   head_dim below rotary_dim, a negative stride, a y whose rows overlap
 *   each other or x (unless in place), a y that meets the cache, the
 *   positions or (on the fly, LONGROPE) longrope_factors, both positions
 *   arrays set, the params errors of peak_rope_cache() (on the fly) or a
 *   bad rotary_dim,
 *   an unknown pairing; PEAK_ERR_OUT_OF_RANGE for a negative position, one
 *   at or beyond cache_rows (cache) or PEAK_MAX_POSITION (on the fly), or
 *   an extent in bytes beyond PTRDIFF_MAX.
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe.
 * @source Su et al. 2021 (RoFormer), eq. 34; pairings as GPT-NeoX and
 *   GPT-J.
 */
PEAK_API peak_status peak_rope_apply(float *y, const float *x, const peak_rope_desc *desc,
                                     const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Fused embedding gather + scale + positional encoding                       */
/* ------------------------------------------------------------------------ */

/** @brief What peak_embed_pe() gathers and adds; start from
    PEAK_EMBED_DESC_DEFAULT. */
typedef struct peak_embed_desc {
    const void *table;      /**< E: [vocab, d_model] of table_type, row
                                 stride ld_table (elements). */
    size_t vocab;           /**< Rows of E. */
    ptrdiff_t ld_table;     /**< >= d_model. */
    size_t d_model;         /**< Elements per row. */
    float scale;            /**< Multiplies E; sqrt(d_model) in the paper 3.4. */
    const float *pe;        /**< [pe_rows, d_model] table, or NULL: on the fly. */
    size_t pe_rows;         /**< Rows of pe. */
    peak_pe_params pe_params;  /**< For the on-the-fly PE. */
    const int64_t *positions;  /**< Per token; NULL: pos0 + t % seq_len. */
    size_t pos0;            /**< First position (with positions NULL). */
    size_t seq_len;         /**< 0: one sequence of n_tokens. */
    int32_t padding_idx;    /**< -1: off.  Else fairseq make_positions(): a
                               token equal to padding_idx gets E[id]*scale and
                               no PE, the others get position pos0 +
                               padding_idx + 1 + (number of non-pad tokens
                               before it in its sequence); pos0 = 0 is
                               fairseq's numbering, pos0 > 0 continues it
                               (incremental decoding).  Not combined with
                               positions. */
    peak_dtype table_type;  /**< Element type of E (PEAK_F32, 0, by default). */
    peak_dtype out_type;    /**< Element type of out; pe stays float32. */
} peak_embed_desc;

/** @brief No table, scale 1, PE on the fly with PEAK_PE_PARAMS_DEFAULT,
    one sequence from position 0, no padding index. */
#define PEAK_EMBED_DESC_DEFAULT                                                  \
    {NULL, 0, 0, 0, 1.0f, NULL, 0, PEAK_PE_PARAMS_DEFAULT, NULL, 0, 0, -1, PEAK_F32, PEAK_F32}

/**
 * @brief Fused gather + scale + PE: out[t, :] = E[ids[t], :] * scale +
 *        PE(pos(t), :) for t < n_tokens.
 *
 * pos(t) = positions[t] if positions, else pos0 + t % seq_len
 * (pos0 + t if seq_len == 0); see peak_embed_desc::padding_idx for fairseq
 * numbering.  Each element is computed as one float multiply then one float
 * add (never fused), so every tier gives the same bits.
 *
 * Types: the table and out are each float32, bfloat16 or float16
 * (desc->table_type, out_type).  A 16-bit E is widened exactly; a 16-bit
 * out is the float32 element above rounded once to nearest even
 * (peak_convert's rounding).  The SIMD tiers read a 16-bit table and write
 * a 16-bit out of the table's type in their own loops (float16 only where
 * the tier has vector float16 conversions: AVX-512, NEON; on AVX2 the
 * scalar tier's code runs such calls); other pairs are computed into
 * float32 rows on the stack and rounded from there.  A call with any
 * 16-bit tensor takes d_model up to 8192 (PEAK_ERR_UNSUPPORTED beyond:
 * the stack rows).
 * @param[out] out  [n_tokens, d_model] elements of out_type, row stride
 *                  ld_out, aligned to its element's size; its extent must
 *                  not meet the table's, pe's, ids' or positions'.
 * @param ld_out    elements between output rows (>= d_model).
 * @param ids       [n_tokens] int32 token ids in [0, vocab).
 * @param n_tokens  number of tokens (all sequences).
 * @param desc      the embedding table, scale, PE source and numbering.
 * @param pool     the caller's thread pool, or NULL (this thread only):
 *                  see peak_threadpool.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_UNSUPPORTED for a table_type or out_type outside
 *   peak_dtype, or d_model above 8192 with a 16-bit table or out;
 *   PEAK_ERR_INVALID_ARG for NULL out/ids/desc/table, zero n_tokens,
 *   vocab or d_model, ld_out or ld_table < d_model, a non-finite scale,
 *   padding_idx outside [-1, vocab), padding_idx combined with positions,
 *   out's extent meeting the table, pe, ids or positions (all read while
 *   out is written), bad pe_params (on the fly);
 *   PEAK_ERR_OUT_OF_RANGE for an id outside [0, vocab), a position < 0 or
 *   >= pe_rows (table) or >= PEAK_MAX_POSITION (on the fly), pos0 >=
 *   PEAK_MAX_POSITION (positions NULL), or an extent of out, the table or
 *   pe whose byte offset exceeds PTRDIFF_MAX.  Pad tokens have no position:
 *   a call of pad tokens only is checked against none (any pos0 below
 *   PEAK_MAX_POSITION).
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe
 *   (tables may be shared).
 * @source Vaswani et al. 2017, sec. 3.4-3.5; fairseq make_positions().
 */
PEAK_API peak_status peak_embed_pe(void *out, ptrdiff_t ld_out, const int32_t *ids,
                                   size_t n_tokens, const peak_embed_desc *desc,
                                   const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Masks (shared by softmax and attention)                                    */
/* ------------------------------------------------------------------------ */

/** @brief Where the causal diagonal sits when Lq != Lk. */
typedef enum peak_align {
    PEAK_ALIGN_TOP_LEFT = 0,    /**< qpos = i + q_offset (PyTorch is_causal). */
    PEAK_ALIGN_BOTTOM_RIGHT = 1 /**< qpos = i + q_offset + Lk - Lq (flash-attn,
                                     ONNX). */
} peak_align;

/**
 * @brief Which keys each score row sees (softmax and attention).
 *
 * Scores are indexed [b, h, i, j]: batch, head, query row i < Lq, key
 * j < Lk.  A key is visible to a row when every enabled condition holds:
 *   - causal:  j <= qpos, qpos = i + q_offset (PEAK_ALIGN_TOP_LEFT) or
 *     i + q_offset + Lk - Lq (PEAK_ALIGN_BOTTOM_RIGHT), computed in signed
 *     arithmetic (qpos may be negative: no key);
 *   - window:  j > qpos - window (window > 0; also used without causal);
 *   - key_len: j < key_len[b] (key padding; 0 <= key_len[b] <= Lk);
 *   - keep:    keep[b*ks[0] + h*ks[1] + i*ks[2] + j] != 0;
 *   - bias:    bias[b*bs[0] + h*bs[1] + i*bs[2] + j] != -inf (also added).
 *
 * Masked scores are never read, their probabilities are exactly 0, and a row
 * with no visible key -- or whose visible scores are all -inf -- is a row of
 * zeros (never NaN).  A visible +inf or NaN score makes the row NaN at its
 * visible keys (masked keys stay 0).  Strides of 0 broadcast.
 * q_offset, window, Lq and Lk must be at most 2^40 (else
 * PEAK_ERR_OUT_OF_RANGE), so the signed index arithmetic cannot overflow.
 * Start from PEAK_MASK_DEFAULT (nothing masked).
 */
typedef struct peak_mask {
    int causal;               /**< Nonzero: key j visible only if j <= qpos. */
    peak_align align;         /**< Where the causal diagonal sits. */
    size_t q_offset;          /**< Cached positions before query row 0
                                   (KV-cache decoding). */
    size_t window;            /**< 0: none; else also j > qpos - window. */
    const int32_t *key_len;   /**< [batch] or NULL. */
    const uint8_t *keep;      /**< Boolean mask or NULL. */
    ptrdiff_t keep_stride[3]; /**< For b, h, i; j contiguous. */
    const float *bias;        /**< Additive float mask or NULL. */
    ptrdiff_t bias_stride[3]; /**< For b, h, i; j contiguous. */
} peak_mask;

/** @brief No mask: every key visible. */
#define PEAK_MASK_DEFAULT {0, PEAK_ALIGN_TOP_LEFT, 0, 0, NULL, NULL, {0, 0, 0}, NULL, {0, 0, 0}}

/* ------------------------------------------------------------------------ */
/* Logit options (shared by softmax and attention)                            */
/* ------------------------------------------------------------------------ */

/** @brief Which distance the ALiBi bias grows with (peak_logits::alibi). */
typedef enum peak_alibi {
    PEAK_ALIBI_NONE = 0,     /**< No ALiBi bias. */
    PEAK_ALIBI_CAUSAL = 1,   /**< distance = qpos - j (BLOOM, MPT, Falcon;
                                  negative, so a bonus, for keys after qpos
                                  when the mask lets a row see them). */
    PEAK_ALIBI_SYMMETRIC = 2 /**< distance = |qpos - j| (bidirectional
                                  encoders). */
} peak_alibi;

/**
 * @brief What current decoders do to the attention logits besides scaling
 *        and masking: soft-capping (Gemma 2), ALiBi (BLOOM, MPT, Falcon-RW)
 *        and attention sinks (gpt-oss, StreamingLLM).  A field of
 *        peak_softmax_desc and peak_attention_desc; start from
 *        PEAK_LOGITS_DEFAULT (every option off).
 *
 * For score row (b, h, i) -- h the query head -- and key j, in this order:
 *   1. s = x * scale (softmax) or q . k * scale (attention);
 *   2. soft-capping, when softcap > 0: s = softcap * tanh(s / softcap),
 *      before every mask, so a masked key stays masked (the other order was
 *      onnxruntime#28379); +-inf scores become +-softcap;
 *   3. ALiBi, when alibi != PEAK_ALIBI_NONE: s += -slope[h] * distance,
 *      with qpos as peak_mask defines it (q_offset and the causal alignment
 *      included, whether or not the mask is causal);
 *   4. the additive mask (peak_mask::bias), then the other masks;
 *   5. sinks, when sinks != NULL: the row's softmax denominator takes one
 *      more term e^sink[h], which has no value (no probability is output
 *      for it, no V row is read for it): probabilities sum to less than 1.
 * peak_softmax forms steps 1-4 in float (each operation rounded once:
 * t = s / softcap, tanh(t) by the library's own vector tanh, its product
 * with softcap; (float)distance, its product with the slope, the sum), the
 * same bits on every tier; peak_attention's accuracy bounds count |ALiBi|
 * with |bias|.
 *
 * ALiBi slopes: slopes[h * alibi_slopes_stride] when alibi_slopes is not
 * NULL (finite, >= 0), else peak_alibi_slopes() of the call's head count
 * (Press et al. 2022; BLOOM's rule for head counts that are not powers of
 * two).  The bias is added as -slope * distance (the ALiBi paper's form);
 * implementations that add slope * j instead (BLOOM's, ggml's) give the
 * same softmax and a log-sum-exp larger by slope * qpos: peak_attention's
 * lse is that of the distance form.  distance is exact in float up to
 * 2^24; beyond, it is rounded once (relative 2^-24), and the product keeps
 * its relative accuracy at any position.
 *
 * Sinks: sinks[h * sinks_stride] (stride 0: one sink for every head),
 * finite.  The sink joins the row's maximum and sum: y_j = e^(s_j - m') /
 * (sum_k e^(s_k - m') + e^(sink - m')), m' = max(m, sink); peak_attention's
 * lse includes it (log(sum e^s + e^sink)).  A row with no visible key, or
 * whose visible scores are all -inf, is still all zeros (attention: O = 0,
 * lse = sink, the log of the sink's term alone); a visible NaN or +inf
 * score still makes the row NaN.
 */
typedef struct peak_logits {
    float softcap;               /**< +-0: off; else a positive finite cap. */
    peak_alibi alibi;            /**< PEAK_ALIBI_NONE: no ALiBi. */
    const float *alibi_slopes;   /**< [heads] or NULL: peak_alibi_slopes(). */
    ptrdiff_t alibi_slopes_stride; /**< Between heads, in elements (>= 0). */
    const float *sinks;          /**< [heads] sink logits, or NULL: none. */
    ptrdiff_t sinks_stride;      /**< Between heads (>= 0; 0 broadcasts). */
} peak_logits;

/** @brief Every logit option off. */
#define PEAK_LOGITS_DEFAULT {0.0f, PEAK_ALIBI_NONE, NULL, 0, NULL, 0}

/**
 * @brief The ALiBi slopes of a model with `heads` attention heads:
 *        slopes[h] for h < heads, float32.
 *
 * For n = heads a power of two, slope[h] = 2^(-8 (h + 1) / n).  Otherwise,
 * with p the largest power of two below n: the p slopes of p heads, then
 * the slopes of 2p heads at odd h' = 1, 3, 5, ... for the remaining n - p
 * heads (2^(-4 h' / p) for h' = 1, 3, ..., 2 (n - p) - 1).  Each is the
 * exact value rounded once to float (the power is computed in double).
 * @param[out] slopes  [heads] float32, contiguous.
 * @param heads  number of query heads, 1 to 2^20.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_INVALID_ARG for NULL slopes or heads 0;
 *   PEAK_ERR_OUT_OF_RANGE for heads above 2^20.
 * @threadsafety Reentrant.
 * @source Press, Smith and Lewis 2022 (ALiBi), sec. 3; BigScience BLOOM's
 *   build_alibi_tensor for head counts that are not powers of two.
 */
PEAK_API peak_status peak_alibi_slopes(float *slopes, size_t heads);

/* ------------------------------------------------------------------------ */
/* Masked softmax                                                             */
/* ------------------------------------------------------------------------ */

/** @brief Shape, strides, scale and mask of a peak_softmax() call; start from
    PEAK_SOFTMAX_DESC_DEFAULT. */
typedef struct peak_softmax_desc {
    size_t batch;          /**< B. */
    size_t heads;          /**< H. */
    size_t q_len;          /**< Lq: rows = batch * heads * q_len. */
    size_t k_len;          /**< Lk: columns (keys), contiguous. */
    ptrdiff_t x_stride[3]; /**< For b, h, i; j contiguous; 0 broadcasts
                                (the same scores for every b, h or i). */
    ptrdiff_t y_stride[3]; /**< For b, h, i; j contiguous. */
    float scale;           /**< Multiplies x before the mask; 0: 1. */
    peak_mask mask;        /**< Which keys each row sees. */
    peak_logits logits;    /**< Soft-capping, ALiBi, sinks (peak_logits). */
    peak_dtype x_type;     /**< Element type of x (PEAK_F32, 0, by default). */
    peak_dtype y_type;     /**< Element type of y; the bias stays float32. */
} peak_softmax_desc;

/** @brief Zero sizes and strides (set them), scale 1, no mask, no logit
    options, float32 x and y. */
#define PEAK_SOFTMAX_DESC_DEFAULT                                                \
    {0, 0, 0, 0, {0, 0, 0}, {0, 0, 0}, 0.0f, PEAK_MASK_DEFAULT, PEAK_LOGITS_DEFAULT, \
     PEAK_F32, PEAK_F32}

/**
 * @brief Masked row softmax: y[b,h,i,:] = softmax_j(x[b,h,i,j] * scale +
 *        bias[b,h,i,j]) over visible j, 0 at masked j.
 *
 * A row with no visible key is all zeros.  A +inf or NaN among the visible
 * scaled scores makes the row NaN.  The score x*scale + bias is formed in
 * float (as PyTorch does): if it overflows to +inf the row is NaN; if it
 * overflows to -inf (or a huge negative bias makes it so) that key is
 * visible with probability exactly 0, and a row of only such keys is all
 * zeros.  The maximum is taken out before exp, so no finite score
 * overflows exp.
 *
 * Accuracy: every probability of at least FLT_MIN is within 4 ULP of the
 * exact softmax of the float scores: relative, however small the
 * probability (the kernels' error budget bounds it by 3.6 ULP; measured:
 * 0.5 ULP on the scalar tier, which computes in double, 2.92 ULP on the
 * SIMD tiers over 22M probabilities down to FLT_MIN).  The SIMD tiers
 * (AVX2, AVX-512, NEON) return the same bits as each other; the scalar
 * tier may differ from them by those few ULP.  Below FLT_MIN: an
 * exponential term e^(s - max) of at least FLT_MIN is kept on every tier,
 * one below 2^-127.5 counts as 0 on every tier, and in between the scalar
 * tier takes 0 where the SIMD tiers may keep a subnormal term; so a
 * probability below FLT_MIN may be 0 on one tier and subnormal on another,
 * never more than FLT_MIN apart.  A term just above FLT_MIN divided by the
 * row's sum can also give a subnormal probability.  Under FTZ/DAZ (e.g.
 * -ffast-math) subnormal probabilities become +0.
 *
 * Types: x and y are each float32, bfloat16 or float16 (desc->x_type,
 * y_type).  A 16-bit x is widened exactly, so its scores are the values
 * the tensor holds; the arithmetic is float32 as above, and a 16-bit y
 * is each float32 probability rounded once to nearest even (peak_convert),
 * so within half an ULP of its type plus the 4 float32 ULP above of the
 * exact softmax.  Rows with a 16-bit y go through float32 scratch: on the
 * stack for Lk <= 8192, else a buffer of Lk floats per worker allocated
 * by the call (PEAK_ERR_NO_MEMORY if that fails).
 * @param[out] y  [B, H, Lq, Lk] elements of y_type at y + b*y_stride[0] +
 *                h*y_stride[1] + i*y_stride[2] + j.  y may equal x (in
 *                place; then x_type must equal y_type and y_stride
 *                x_stride); otherwise y's extent must not meet x's, nor the
 *                mask's key_len, keep or bias, nor the logits'
 *                alibi_slopes or sinks.
 * @param x       scores, [B, H, Lq, Lk] elements of x_type with x_stride.
 * @param desc    sizes, strides, scale and mask.
 * @param pool     the caller's thread pool, or NULL (this thread only):
 *                  see peak_threadpool.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_UNSUPPORTED for an x_type or y_type outside peak_dtype;
 *   PEAK_ERR_INVALID_ARG for NULL y/x/desc, a zero size, a negative
 *   stride, a stride of y below what keeps its rows apart, y == x with
 *   different strides or types, y's extent meeting x's (other than y == x) or a mask
 *   array's, a non-finite scale, an align value outside the enum; logits
 *   (peak_logits): a softcap that is NaN, negative or infinite, an alibi
 *   value outside the enum, a negative or non-finite slope, a non-finite
 *   sink, a negative slopes or sinks stride, y meeting alibi_slopes or
 *   sinks;
 *   PEAK_ERR_OUT_OF_RANGE for key_len[b] outside [0, Lk], the 2^40 limits of
 *   peak_mask, an extent whose byte offset overflows ptrdiff_t, more than
 *   2^20 heads with the library's ALiBi slopes (alibi_slopes NULL);
 *   PEAK_ERR_NO_MEMORY if a 16-bit y with Lk > 8192 needs scratch that
 *   cannot be allocated (nothing is written).
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe.
 * @source Vaswani et al. 2017 eq. (1); causal alignment as in PyTorch
 *   scaled_dot_product_attention (top-left) and flash-attn 2.1
 *   (bottom-right).
 */
PEAK_API peak_status peak_softmax(void *y, const void *x, const peak_softmax_desc *desc,
                                  const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Vector exponential                                                        */
/* ------------------------------------------------------------------------ */

/**
 * @brief y[k] = e^x[k] for k < n, float32 in and out (x in natural units,
 *        no scaling).
 *
 * Accuracy: at most 1 ULP from e^x for every normal result (0.91 ULP,
 * measured exhaustively over all 2^32 inputs).  Every tier returns the same
 * bits (the SIMD tiers, and a scalar tier running the same algorithm with
 * fmaf), so results do not depend on the CPU.
 *
 * Edges: the result is +inf exactly for x >= 0x1.62e430p+6f (88.722839),
 * the first float whose e^x rounds past FLT_MAX.  Underflow is gradual:
 * results below FLT_MIN (x < -87.33654) are subnormals rounded once from
 * the approximation, within one subnormal step of e^x (98% of them are e^x
 * correctly rounded), and +0 exactly for x <= -0x1.9fe36ap+6f (-103.972084),
 * the first float whose e^x is below 2^-150.  e^-inf = +0, e^+inf = +inf,
 * e^+-0 = 1 exactly, NaN gives NaN; a result is never negative.  errno is
 * never set.  The softmax and attention kernels use exponentials of their
 * own (internal), not this function: the softmax's reduces by its row's
 * maximum, attention's is a faster 2^t whose results below FLT_MIN are
 * flushed to +0.  Under FTZ/DAZ (e.g. a program built with -ffast-math)
 * subnormal results become +0 on every tier.
 * @param[out] y  [n] float32, contiguous.  y may equal x (in place);
 *                otherwise y must not overlap x.
 * @param x       [n] float32, contiguous.
 * @param n       number of elements.
 * @param pool     the caller's thread pool, or NULL (this thread only):
 *                  see peak_threadpool.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_INVALID_ARG for NULL y or x, n == 0, or y overlapping x
 *   without being equal to it; PEAK_ERR_OUT_OF_RANGE if n * 4 bytes does
 *   not fit in a ptrdiff_t.
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe.
 * @source Cody and Waite (1980) range reduction and a minimax polynomial
 *   (kernels/exp.h).
 */
PEAK_API peak_status peak_exp(float *y, const float *x, size_t n, const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Conversions between element types                                         */
/* ------------------------------------------------------------------------ */

/**
 * @brief Bytes of one element of a type.
 * @param type  any value.
 * @return 4 (PEAK_F32), 2 (PEAK_BF16, PEAK_F16), 0 for a value outside the
 *         enum.
 * @threadsafety Safe from any thread.
 */
PEAK_API size_t peak_dtype_size(peak_dtype type);

/**
 * @brief y[k] = x[k] converted from x_type to y_type, for k < n.
 *
 * Widening (bfloat16 or float16 to float32) is exact.  Narrowing rounds
 * once, to nearest with ties to even (IEEE 754 roundTiesToEven), whatever
 * rounding mode MXCSR holds (on AArch64, float16 rounds as FPCR says: to
 * nearest even unless the program changed it); float16 <-> bfloat16 goes through
 * float32, which holds either exactly: one rounding.  The same type is a
 * copy.
 * - NaN stays NaN, quiet, with its sign and the top bits of its payload (as
 *   many as the narrower fraction holds); a signalling NaN is quieted (the
 *   fraction's top bit set) by every conversion between two types (a
 *   same-type copy keeps every bit).
 * - Overflow gives inf with the sign: float16 from a magnitude of 65520 or
 *   more (the tie between 65504, the largest finite, and 2^16 goes to the
 *   even 2^16); bfloat16 from 0x1.ff0000p+127 (0x7f7f8000) or more.
 * - Subnormals of every type are kept, never flushed, on x86 whatever
 *   MXCSR.DAZ and FTZ say: bfloat16 is converted with integer operations,
 *   float16 with VCVTPH2PS and VCVTPS2PH, which ignore them for half
 *   inputs and outputs (a float32 subnormal narrows to a signed zero
 *   either way).  On AArch64 float16 follows FPCR (FZ16 flushes it; Linux
 *   starts processes with it clear).
 * Every tier gives the same bits (the scalar tier: kernels/convert.h).
 * @param[out] y  [n] elements of y_type, contiguous, aligned to the
 *                element's size.  y may equal x only when the types are
 *                equal (then nothing is written); otherwise they must not
 *                overlap.
 * @param y_type  y's element type.
 * @param x       [n] elements of x_type, contiguous, aligned to the
 *                element's size.
 * @param x_type  x's element type.
 * @param n       number of elements.
 * @param pool    the caller's thread pool, or NULL (this thread only): see
 *                peak_threadpool.  Items of 16384 elements.
 * @return PEAK_OK, or an error (below); nothing is written on an error.
 * @errors PEAK_ERR_UNSUPPORTED for a type outside peak_dtype;
 *   PEAK_ERR_INVALID_ARG for NULL y or x, n == 0, or y overlapping x
 *   (other than y == x with equal types); PEAK_ERR_OUT_OF_RANGE if n * 4
 *   bytes do not fit in a ptrdiff_t (whatever the types).
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe.
 * @source IEEE 754-2019 sec. 5.4.2 (formatOf conversions) and 6.2 (NaN
 *   payloads); bfloat16's layout: Intel, "BFLOAT16 - Hardware Numerics
 *   Definition" (2018).
 */
PEAK_API peak_status peak_convert(void *y, peak_dtype y_type, const void *x, peak_dtype x_type,
                                  size_t n, const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Scaled dot-product attention                                               */
/* ------------------------------------------------------------------------ */

/**
 * @brief RoPE inside peak_attention() (peak_attention_desc::rope): Q and K
 *        rotated by the call, bit-identical to peak_rope_apply() on Q and K
 *        with these parameters followed by the same call without rope.
 *
 * The call rotates Q (and K, if rotate_k) in a first phase into its
 * workspace ([B, Lq, H, Dh] and [B, Lk, KVH, Dh] floats, counted by
 * peak_attention_workspace_size()), on the pool, then attends to the
 * copies: one more pass over Q and K, ~1-2% of a prefill's time.  Keys
 * stored already rotated in a KV cache (the usual decode) need rotate_k 0:
 * then only the Lq query rows are rotated.  Positions are as in
 * peak_rope_desc, per batch entry: query row i of entry b at
 * q_positions[b * q_positions_stride + i] or q_pos0 + i, key j at
 * k_positions[...] or k_pos0 + j.  For causal decode with a cache of P
 * keys, q_pos0 = P (and the mask's q_offset, or bottom-right alignment,
 * says the same).  Positions are int64 here (peak_rope_desc also takes
 * int32).  A rope that rotates neither Q nor K is ignored, its fields
 * unchecked.
 */
typedef struct peak_attention_rope {
    peak_rope_pairing pairing; /**< Which dimensions pair. */
    peak_rope_params params;   /**< rotary_dim <= head_dim; the rest only on
                                    the fly (cache NULL). */
    const float *cache;        /**< peak_rope_cache() rows for positions 0 ..
                                    cache_rows - 1, or NULL: on the fly. */
    size_t cache_rows;         /**< Rows of cache. */
    int rotate_q;              /**< Nonzero: rotate Q. */
    int rotate_k;              /**< Nonzero: rotate K (0: K is stored rotated). */
    size_t q_pos0;             /**< Position of query row 0 (no q_positions). */
    const int64_t *q_positions; /**< Or [B, Lq] positions, each >= 0. */
    ptrdiff_t q_positions_stride; /**< Between batch entries; 0: shared. */
    size_t k_pos0;             /**< Position of key 0 (no k_positions). */
    const int64_t *k_positions; /**< Or [B, Lk] positions, each >= 0. */
    ptrdiff_t k_positions_stride; /**< Between batch entries; 0: shared. */
} peak_attention_rope;

/** @brief Half-split pairing, PEAK_ROPE_PARAMS_DEFAULT (set rotary_dim),
    on the fly, Q and K rotated, positions 0 .. L-1 for both. */
#define PEAK_ATTENTION_ROPE_DEFAULT                                              \
    {PEAK_ROPE_HALF_SPLIT, PEAK_ROPE_PARAMS_DEFAULT, NULL, 0, 1, 1, 0, NULL, 0, 0, NULL, 0}

/** @brief Shapes, strides, scale, mask and optional outputs of a
    peak_attention() call; start from PEAK_ATTENTION_DESC_DEFAULT. */
typedef struct peak_attention_desc {
    size_t batch;      /**< B. */
    size_t heads;      /**< H: query heads. */
    size_t kv_heads;   /**< Key/value heads, dividing heads (MQA/GQA); 0: heads. */
    size_t q_len;      /**< Lq (cross-attention: Lq != Lk). */
    size_t kv_len;     /**< Lk. */
    size_t head_dim;   /**< Dh: length of a query/key vector. */
    size_t v_head_dim; /**< Dv: length of a value vector; 0: Dh. */
    float scale;       /**< Multiplies q . k; 0: 1/sqrt(head_dim). */
    /** Strides of Q for the [b, l, h] indices; the last (d) is contiguous.
        [B, L, H, D] packed: {L*H*D, H*D, D}; [B, H, L, D] packed:
        {H*L*D, D, L*D}. */
    ptrdiff_t q_stride[3];
    ptrdiff_t k_stride[3]; /**< Strides of K for [b, l, h], as q_stride. */
    ptrdiff_t v_stride[3]; /**< Strides of V for [b, l, h], as q_stride. */
    ptrdiff_t o_stride[3]; /**< Strides of O for [b, l, h], as q_stride. */
    peak_mask mask;        /**< Which keys each query row sees. */
    float *lse;            /**< Optional [b, h, i] log-sum-exp of the scaled,
                                masked scores (natural log), with the sink
                                when logits.sinks is set; -inf for a fully
                                masked row (the sink with sinks); NULL: not
                                written. */
    ptrdiff_t lse_stride[3]; /**< Strides of lse for [b, h, i]. */
    /** Rotary embedding of Q and K done by the call itself, or NULL: none.
        See peak_attention_rope. */
    const struct peak_attention_rope *rope;
    peak_logits logits; /**< Soft-capping, ALiBi, sinks (peak_logits). */
    /* Element types, each independently (PEAK_F32, 0, by default): "all
       bfloat16", "all float16" and "float32 Q with a 16-bit K/V cache" are
       the usual mixes.  Strides stay in elements; the arithmetic is
       float32 whatever they are (peak_attention()). */
    peak_dtype q_type; /**< Element type of Q (peak_dtype). */
    peak_dtype k_type; /**< Element type of K. */
    peak_dtype v_type; /**< Element type of V. */
    peak_dtype o_type; /**< Element type of O (lse stays float32). */
} peak_attention_desc;

/** @brief Zero sizes and strides (set them), kv_heads = heads, Dv = Dh,
    scale 1/sqrt(Dh), no mask, no lse, every tensor float32. */
#define PEAK_ATTENTION_DESC_DEFAULT                                              \
    {0, 0, 0, 0, 0, 0, 0, 0.0f, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0},     \
     PEAK_MASK_DEFAULT, NULL, {0, 0, 0}, NULL, PEAK_LOGITS_DEFAULT,               \
     PEAK_F32, PEAK_F32, PEAK_F32, PEAK_F32}

/**
 * @brief Bytes of scratch memory peak_attention() needs for desc on the
 *        active tier with pool's workers (to be 64-byte aligned).
 *
 * The answer depends on the tier (query it again after peak_isa_force()),
 * on the pool's number of workers (peak_threadpool_workers(): one slot of
 * scratch each, so a workspace sized for NULL is too small for a pool of
 * 8 and gets PEAK_ERR_WORKSPACE), on Lk and head_dim / v_head_dim, and on
 * the SIMD tiers on whether a kv head has more than 64 query rows
 * (Lq * heads / kv_heads) and whether the call is split over its keys:
 * see peak_attention() for the sizes.  Query it for each shape and pool; a
 * workspace sized for decode (Lq = 1) is too small for a prefill.
 * Where the size does not fit in a size_t (only for shapes no buffer can
 * hold: on the SIMD tiers a head_dim or v_head_dim beyond 2^54, on the
 * scalar tier Lk + v_head_dim beyond 2^61 with zero key strides; or a pool
 * of that many workers), bytes receives the sentinel SIZE_MAX rounded down
 * to 64, which no allocator can satisfy: peak_attention() with a NULL
 * workspace then returns PEAK_ERR_NO_MEMORY.
 * @param desc        as for peak_attention() (validated the same way).
 * @param pool     the caller's thread pool, or NULL (this thread only):
 *                  see peak_threadpool.
 * @param[out] bytes  receives the size.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_INVALID_ARG for NULL desc or bytes, and the descriptor
 *   errors of peak_attention() (sizes, strides, scale, mask);
 *   PEAK_ERR_OUT_OF_RANGE likewise.
 * @threadsafety Safe from any thread.
 */
PEAK_API peak_status peak_attention_workspace_size(const peak_attention_desc *desc,
                                                   const peak_threadpool *pool, size_t *bytes);

/**
 * @brief Scaled dot-product attention: O[b,i,h,:] = sum_j P[b,h,i,j]
 *        V[b,j,h/g,:], P = softmax_j(Q[b,i,h,:] . K[b,j,h/g,:] * scale),
 *        masked as peak_mask says, g = heads / kv_heads.
 *
 * Fully masked rows give O = 0 (and lse = -inf, or the row's sink with
 * logits.sinks); a visible +inf/NaN score
 * gives O = NaN (and lse = NaN).  A key a row sees contributes P V even
 * where its weight P is 0, so an inf or NaN in its V reaches the row (0 *
 * NaN = NaN, as in PyTorch); a masked key never affects the row.  K and V
 * rows of keys that no query row of their kv head sees are never read (a
 * key some rows of a 64-row block see is read for the block).
 * The extents of O, lse and the workspace (its first
 * peak_attention_workspace_size() bytes) must not meet each other, Q, K, V
 * or the mask's arrays (checked; extents, so tensors that interleave in one
 * buffer without sharing an element are rejected too).
 *
 * Threads: the call is cut, by its shapes alone, into parts -- blocks of
 * 64 query rows of one (batch, kv head), heaviest first; on the SIMD tiers
 * decode-like calls also by their keys (split-KV, below) -- that run on
 * the pool's workers; O and lse are the same bytes with no pool or any
 * pool (peak_threadpool).
 *
 * Workspace: a shared part, then one slot per worker of the pool (1 for
 * NULL), each rounded up to 64 bytes.  A slot, by tier: scalar 64 +
 * 8 (Lk + Dv) bytes.  AVX2, AVX-512 and NEON (fused, flash-style: 64 query
 * rows x 64 keys per tile): 64 + 256 Dh' + 512 Dv' + 256 (Dh + Dv) +
 * ~35 KiB for one tile, with Dh', Dv' rounded up to 16 -- 114 KiB for
 * Dh = Dv = 64, 355 KiB for 256; and when a kv head has more than 64 query
 * rows (Lq * H / kv_heads > 64), the K and V rows its query blocks share,
 * packed once per worker: 4 (Dh' + Dv') bytes per key for the first keys,
 * Lk rounded up to 64, up to 2 MiB -- 1.1 MiB a slot for Dh = 64 and
 * L = 2048, 2.1 MiB for any L >= 4096 at Dh = 64, 2.3 MiB at Dh = Dv = 256
 * (the one-tile part grows with Dh, Dv beyond that: 3.3 MiB at 1024).
 * The shared part is 0 except for split-KV: on the SIMD tiers a call whose
 * kv heads have at most 64 query rows each (decode, a short query against
 * a long cache) and whose work is modelled above ~80 us is cut into key
 * chunks of equal length (a multiple of 64 keys, at least 128, aiming at
 * 2048 parts; not when that makes fewer than 8 chunks, so never below
 * Lk = 1024), whose partial O and lse are merged through their lse as
 * peak_attention_merge() does: 4 (Dv + 1) bytes per query row and chunk
 * plus 16 per chunk, at most ~4 MiB -- 2.0 MiB for a decode step of 32
 * heads over 32768 keys (256 chunks), 131 KiB for 8 heads over 8192 (64).
 * Before all of it, float32 copies (each rounded up to 64 bytes): of Q,
 * 4 Dh (B Lq H) bytes, when Q is 16-bit or rope (peak_attention_rope)
 * rotates it; of K, 4 Dh (B Lk kv_heads), when rope rotates K; of O,
 * 4 Dv (B Lq H), when O is 16-bit.
 * No other memory is used, whatever Lq and Lk.
 *
 * Types (desc->q_type ... o_type).  16-bit K and V are read where they
 * are, widened exactly to float32 as they are loaded (a decode step reads
 * half the bytes); 16-bit Q is widened into the workspace first, and a
 * 16-bit O is written there in float32, then rounded once per element to
 * nearest even (NaN stays NaN, quiet, its sign kept -- its payload may
 * differ between tiers; float16 overflow gives inf).  The conversions keep
 * subnormals whatever MXCSR/FPCR say (integer operations, or F16C/FCVT,
 * which ignore them), but the float32 arithmetic follows them: a float16
 * subnormal widens to a normal float32, while a bfloat16 subnormal stays
 * subnormal and reads as 0 under DAZ (and a result below float32's normal
 * range is flushed under FTZ), as for float32 inputs.  A product of two
 * float16 values is exact in float32; one of bfloat16 values is exact
 * unless it leaves float32's range (bfloat16 has float32's exponents).
 * Every sum accumulates in float32 (never in a 16-bit type), so the
 * bounds below hold against the exact attention of the widened inputs,
 * plus half an ULP of O's type where O is 16-bit.  On an AVX2 CPU without F16C a
 * float16 K or V runs on the scalar tier's kernels.
 *
 * Accuracy, against the attention of the given floats computed exactly:
 * the scalar tier rounds once; AVX2, AVX-512 and NEON form the scores in
 * float, so |O - exact| <= ~2^-24 * (a few) * (scale * sum_d |q_d k_d| +
 * |bias|) * max|V| plus ~1e-6 * max|V|: measured (x86) <= 5e-6 * max|V| for q, k in
 * [-1, 1] and Dh <= 256, but up to 2.6e-5 * max|V| for q, k in [-8, 8]
 * (score spreads of hundreds), where the 1e-5 * max|V| target is not met.
 * The running sums over keys are folded into a second level every 1024
 * keys, so long rows stay within the bound: measured <= 1.3e-6 * max|V|
 * for V = 1 +- 0.01 up to Lk = 262144, tiled and decode (without the fold
 * it was 1.1e-5 at Lk = 65536).  A split-KV call's chunks are each within
 * these bounds and their merge (in double, rounded once) keeps them.
 * lse within 4e-6 * (1 + |lse|).  These bounds need sum_d |q_d k_d| and
 * max|V| times the number of visible keys below FLT_MAX: the SIMD tiers
 * form q . k in float before scaling and accumulate P V in float, so beyond
 * that (inputs near 1e19 and up) a SIMD row may be inf or NaN where the
 * scalar tier's is finite.
 * @param[out] o    O: [B, Lq, H, Dv] at o + b*o_stride[0] + i*o_stride[1] +
 *                  h*o_stride[2] + d elements of desc->o_type.
 * @param q         Q: [B, Lq, H, Dh] with q_stride, of desc->q_type.
 * @param k         K: [B, Lk, kv_heads, Dh] with k_stride, of desc->k_type.
 * @param v         V: [B, Lk, kv_heads, Dv] with v_stride, of desc->v_type.
 * @param desc      sizes, strides, scale, mask and the optional lse.
 * @param workspace NULL (then the library allocates and frees it inside the
 *                  call) or at least peak_attention_workspace_size() bytes
 *                  for the same pool, 64-byte aligned.
 * @param workspace_size  bytes at workspace (ignored when it is NULL).
 * @param pool     the caller's thread pool, or NULL (this thread only):
 *                  see peak_threadpool.  The workspace must hold a slot
 *                  for each of its workers.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_INVALID_ARG for NULL o/q/k/v/desc, zero sizes, kv_heads
 *   not dividing heads, a negative stride, a stride that makes O's rows
 *   overlap, non-finite scale, O, lse or the workspace meeting each other,
 *   Q, K, V or a mask array, a workspace not 64-byte aligned; the logits
 *   errors of peak_softmax() (O, lse or the workspace meeting alibi_slopes
 *   or sinks among them); with rope:
 *   a rotary_dim above head_dim, the params errors of peak_rope_cache()
 *   (on the fly), a rope array (cache, positions) meeting O, lse or the
 *   workspace;
 *   PEAK_ERR_OUT_OF_RANGE for key_len outside [0, Lk], the 2^40 limits of
 *   peak_mask, an extent whose byte offset overflows ptrdiff_t, more than
 *   2^20 heads with the library's ALiBi slopes, a rope
 *   position that is negative or at or beyond cache_rows (cache) or
 *   PEAK_MAX_POSITION (on the fly);
 *   PEAK_ERR_WORKSPACE for a too small workspace, one sized for fewer
 *   workers than the pool's included (checked before the workspace's
 *   overlap);
 *   PEAK_ERR_NO_MEMORY when workspace is NULL and allocation fails;
 *   PEAK_ERR_UNSUPPORTED for a type outside peak_dtype (checked after the
 *   NULL pointers, before the shapes).
 * @threadsafety Reentrant: concurrent calls are safe with distinct outputs
 *   and distinct workspaces (one per call, whatever its pool).
 * @source Vaswani et al. 2017 eq. (1) and sec. 3.2.2 (multi-head);
 *   split-KV: Dao et al. 2023, Flash-Decoding; rounding: IEEE 754-2019
 *   sec. 4.3.1 (roundTiesToEven).
 */
PEAK_API peak_status peak_attention(void *o, const void *q, const void *k, const void *v,
                                    const peak_attention_desc *desc, void *workspace,
                                    size_t workspace_size, const peak_threadpool *pool);

/** @brief Sizes and strides of a peak_attention_merge() call; start from
    PEAK_ATTENTION_MERGE_DESC_DEFAULT.  Strides are in elements. */
typedef struct peak_attention_merge_desc {
    size_t batch;      /**< B. */
    size_t heads;      /**< H: query heads. */
    size_t q_len;      /**< Lq. */
    size_t v_head_dim; /**< Dv: length of an output row. */
    /** Strides of the output O for the [b, i, h] indices, as
        peak_attention_desc's o_stride; the last (d) is contiguous. */
    ptrdiff_t o_stride[3];
    ptrdiff_t lse_stride[3];      /**< Strides of the output lse for [b, h, i]. */
    ptrdiff_t part_o_stride[3];   /**< Strides of every o_parts[p], for [b, i, h]. */
    ptrdiff_t part_lse_stride[3]; /**< Strides of every lse_parts[p], for [b, h, i]. */
} peak_attention_merge_desc;

/** @brief Zero sizes and strides: set them all. */
#define PEAK_ATTENTION_MERGE_DESC_DEFAULT                                        \
    {0, 0, 0, 0, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}

/**
 * @brief Merges n_parts partial attention results -- the same queries
 *        against disjoint sets of keys, each with its log-sum-exp, as
 *        peak_attention() gives them -- into the attention against all of
 *        those keys.  Per row (b, i, h), the parts taken in the fixed order
 *        p = 0 .. n_parts-1:
 *        M = max_p lse_p,  w_p = e^(lse_p - M),
 *        O = sum_p w_p O_p / sum_p w_p,  lse = M + log(sum_p w_p).
 *
 * This is what spreads a long context over processes or devices (ring or
 * context parallelism): each computes the attention of all queries against
 * its share of the keys, with lse, and one merge gives the result of a
 * single call over all keys.  peak_attention() merges its own split-KV
 * chunks with this code.
 *
 * A part with lse_p = -inf (the row saw none of its keys) contributes
 * nothing, and its O row is not read; when every part has -inf the row gets
 * O = 0 and lse = -inf, as peak_attention() gives a fully masked row.  A
 * NaN or +inf lse_p makes the row's O and lse NaN (a poisoned row stays
 * so); a NaN in an O_p whose lse_p is finite reaches the row, as a visible
 * key's NaN V does in peak_attention().
 *
 * In place: o may be o_parts[0] with part_o_stride equal to o_stride, and
 * lse may be lse_parts[0] with part_lse_stride equal to lse_stride (a
 * running result: merge {acc, new} into acc).  Otherwise the extents of O
 * and lse must not meet each other or any part (checked, as
 * peak_attention() checks its outputs), and the rows of O and of lse must
 * not overlap one another.
 *
 * Accuracy: the sums are formed in double and rounded once, so O is within
 * 1 ULP of the exact weighted mean of the given floats (plus n_parts *
 * 2^-52 * max_p |O_p|), and lse within 1 ULP of M + log(sum_p w_p).
 * Merging parts that peak_attention() computed over disjoint key sets
 * therefore gives peak_attention() over their union within its own bounds:
 * O is a convex combination of the parts, so their errors carry over,
 * plus 2^-24 * |O|; lse moves by at most the parts' largest lse error.
 * @param[out] o     O: [B, Lq, H, Dv] at o + b*o_stride[0] + i*o_stride[1]
 *                   + h*o_stride[2] + d.
 * @param[out] lse   optional [B, H, Lq] at lse + b*lse_stride[0] +
 *                   h*lse_stride[1] + i*lse_stride[2] (natural log); NULL:
 *                   not written.
 * @param o_parts    n_parts pointers, each an O_p [B, Lq, H, Dv] with
 *                   part_o_stride.
 * @param lse_parts  n_parts pointers, each an lse_p [B, H, Lq] with
 *                   part_lse_stride, as peak_attention_desc's lse.
 * @param n_parts    number of parts (1 copies, with the rules above).
 * @param desc       sizes and strides.
 * @param pool       the caller's thread pool, or NULL (this thread only):
 *                   see peak_threadpool.  The bytes are the same either way.
 * @return PEAK_OK, or an error (below); on an error nothing is written.
 * @errors PEAK_ERR_INVALID_ARG for NULL o, o_parts, lse_parts or desc, a
 *   NULL o_parts[p] or lse_parts[p], n_parts 0, a zero size, a negative
 *   stride, a stride that makes the rows of O or lse overlap, O or lse
 *   meeting each other or a part other than in place as above;
 *   PEAK_ERR_OUT_OF_RANGE for an extent whose byte offset overflows
 *   ptrdiff_t.
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe.
 * @source Rabe and Staats 2021 (attention over key chunks, merged through
 *   their maxima and sums); Dao et al. 2023, Flash-Decoding (split-KV);
 *   Liu et al. 2023, Ring Attention.
 */
PEAK_API peak_status peak_attention_merge(float *o, float *lse, const float *const *o_parts,
                                          const float *const *lse_parts, size_t n_parts,
                                          const peak_attention_merge_desc *desc,
                                          const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Residual add + LayerNorm                                                   */
/* ------------------------------------------------------------------------ */

/**
 * @brief Element types of peak_add_layernorm()'s tensors (peak_dtype; a
 *        NULL pointer to it: all float32).  gamma and beta stay float32.
 */
typedef struct peak_layernorm_types {
    peak_dtype y;   /**< Of y. */
    peak_dtype sum; /**< Of sum (when written). */
    peak_dtype x;   /**< Of x. */
    peak_dtype r;   /**< Of r (when given). */
} peak_layernorm_types;

/**
 * @brief Residual add + LayerNorm, per row t < rows:
 *        s = x[t,:] + r[t,:] (r NULL: s = x[t,:]);
 *        y[t,:] = (s - mean(s)) / sqrt(var(s) + eps) * gamma + beta.
 *
 * The variance is biased (as torch.nn.LayerNorm).  In place: y may equal x
 * or r, and sum may equal x or r, with the same row stride; otherwise y and
 * sum must share no float with x, r, gamma, beta or each other (checked:
 * rows that interleave without overlapping, such as x and y in one [x | y]
 * buffer, are accepted when both have one element size; of two sizes,
 * their whole extents must not meet; the SIMD tiers write row t while reading row t+1,
 * so a partial overlap would change the result).  Mean and variance are
 * two-pass (stable for rows with a large common offset).  Unlike
 * peak_embed_pe the tiers are not bit-identical here: each is within
 * 2e-6 * max(1, |y|, |gamma|, |beta|) of the exact LayerNorm of s (the
 * SIMD tiers normalise in float from statistics accumulated in double, so
 * the normalised value's absolute error, ~1e-7, is multiplied by gamma; a
 * row with a deviation from its mean beyond ~1.8e19, a variance below
 * 2^-100 or an inf/NaN is computed as the scalar tier computes it).
 * With eps = 0 a row of variance 0 (a constant row) has no defined
 * normalisation: every tier writes NaN to all of its y elements (0 times
 * 1/sqrt(0), as torch.nn.functional.layer_norm gives), still writes its
 * sum, and returns PEAK_OK; the other rows are unaffected.  Pass eps > 0
 * (for example 1e-5) to get beta for such rows.
 *
 * Types (types, NULL: all float32): x, r, y and sum each float32,
 * bfloat16 or float16.  16-bit inputs are widened exactly, a few rows at
 * a time, into float32 in the worker's cache-resident scratch, the float32
 * kernel runs there, and 16-bit outputs are rounded once from its float32
 * results (to nearest even; NaN stays NaN; float16 overflow gives inf):
 * y within the bound above plus half an ULP of its type, sum the float32
 * x + r rounded once.  In place needs the same type too (y == x: y's type
 * is x's).
 * @param[out] y    [rows, d_model] at y + t*ld_y (elements of types->y);
 *                  may equal x or r (then with the same row stride).
 * @param ld_y      elements between rows of y (>= d_model).
 * @param[out] sum  optional (NULL: not written) [rows, d_model] receiving s,
 *                  for pre-norm residual chains; may equal x or r (same
 *                  row stride).
 * @param ld_sum    elements between rows of sum.
 * @param x         [rows, d_model] at x + t*ld_x.
 * @param ld_x      elements between rows of x (>= d_model).
 * @param r         residual, [rows, d_model] at r + t*ld_r, or NULL.
 * @param ld_r      elements between rows of r.
 * @param gamma     [d_model] scale, or NULL (1).
 * @param beta      [d_model] shift, or NULL (0).
 * @param rows      number of rows (tokens).
 * @param d_model   floats per row, the normalised dimension.
 * @param eps       added to the variance (>= 0; 1e-5 in PyTorch).
 * @param types     the element types of y, sum, x and r, or NULL: float32.
 * @param pool     the caller's thread pool, or NULL (this thread only):
 *                  see peak_threadpool.
 * @return PEAK_OK, or an error (below).
 * @errors PEAK_ERR_UNSUPPORTED for a type outside peak_dtype, or a 16-bit
 *   tensor with d_model above 16384 (its rows go through a float32 row on
 *   the stack);
 *   PEAK_ERR_INVALID_ARG for NULL y/x, zero rows/d_model, a row
 *   stride < d_model, eps < 0 or not finite, y or sum overlapping x, r,
 *   gamma or beta other than in place with the same stride and type, y
 *   overlapping sum;
 *   PEAK_ERR_OUT_OF_RANGE for an extent whose byte offset overflows
 *   ptrdiff_t.
 * @threadsafety Reentrant: concurrent calls with distinct outputs are safe.
 * @source Ba et al. 2016; post-norm as in Vaswani et al. 2017 sec. 3.1.
 */
PEAK_API peak_status peak_add_layernorm(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum,
                                        const void *x, ptrdiff_t ld_x, const void *r,
                                        ptrdiff_t ld_r, const float *gamma, const float *beta,
                                        size_t rows, size_t d_model, float eps,
                                        const peak_layernorm_types *types,
                                        const peak_threadpool *pool);

/* ------------------------------------------------------------------------ */
/* Deprecated aliases                                                         */
/* ------------------------------------------------------------------------ */

/* Names of an earlier release, kept for source compatibility for one more
   release, then removed.  Nothing in peak uses them; new code should not. */

/** @brief Deprecated: the old name of peak_attention_desc (the same type);
    kept for one release. */
typedef peak_attention_desc peak_attn_desc;
/** @brief Deprecated: the old name of PEAK_ATTENTION_DESC_DEFAULT; kept for
    one release. */
#define PEAK_ATTN_DESC_DEFAULT PEAK_ATTENTION_DESC_DEFAULT

#ifdef __cplusplus
}
#endif

#endif /* PEAK_H */
