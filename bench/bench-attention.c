/*
 * bench-attention.c - fused attention per tier and through dispatch, against
 * OpenBLAS sgemm + peak_softmax + sgemm (the unfused path), all in one
 * binary so that every ratio comes from one run.
 *
 * Shapes: B = 1, Dh = Dv = 64, [B, L, H, D] packed, scale 1/8:
 *   self-attention H = 8, L = 128, 512, 2048, 4096, full and causal
 *   (top-left); BERT/GPT-2 H = 12, L = 128, 512, 1024; cross H = 8,
 *   Lq = 50, Lk = 512; decode H = 8, Lq = 1, Lk = 2048 with K/V warm, and
 *   cold (rotating through copies of K/V larger than the last-level cache).
 * Names: attention/<variant>/H:<h>/Lq:<n>/Lk:<n>/causal:<0|1>/cold:<0|1>.
 * Variants: scalar, avx2, avx512 (one tier's kernels, peak_kernels_for(),
 * through the attention scheduler on one worker, its workspace allocated
 * once), dispatch (peak_attention with a caller
 * workspace), rope (dispatch with RoPE on Q and K), alibi, softcap, sinks
 * (dispatch with one logit option: causal ALiBi with the library's slopes,
 * a cap of 50, per-head sinks; on H 8 causal L 512 and 2048 and decode
 * Lk 2048 only), openblas (per head: S = Q K^T by cblas_sgemm, peak_softmax in
 * place with the scale and the mask, O = P V by cblas_sgemm; one thread).
 * Counters: GFLOPs = 4 Lq Lk Dh H per call (two matrix products of 2 Lq Lk
 * Dh FLOPs per head, counted in full also for causal), GFLOPs_visible =
 * 4 Dh * (visible query-key pairs) H.
 *
 * Threads: dispatch again on a pool of n workers (bench_pool: made once by
 * peak_threadpool_create, workspace sized for it), names ending
 * /threads:<n> (n from bench_thread_counts: 1 and 2 by default), for self
 * H 8 at L 512 and 2048 (full and causal) and decode H 8 at Lk 2048 and
 * 8192 (K/V warm): the speedup is threads:2 over threads:1 of one run.
 *
 * The core's FMA peak the ratios are taken against, fma_peak/<tier>, is
 * measured in bench-limits.c.
 *
 * Before timing, rows of the output are checked against a double-precision
 * attention (1e-5 * max|V|), and rope's output against peak_rope_apply on
 * Q and K followed by dispatch (the same bytes); a wrong result is
 * skipped, not timed.
 */
#include "bench.h"
#include "gbench-shim.h"

#include "internal.h"
#include "peak.h"
#include "schedule/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if PEAK_BENCH_OPENBLAS
#include <cblas.h>
#endif

#define ATTENTION_DH 64
#define ATTENTION_MAX_HEADS 12
/* Gemma 2's attention soft-cap. */
#define ATTENTION_SOFTCAP 50.0f

typedef enum attention_impl {
  ATTENTION_TIER,
  ATTENTION_DISPATCH,
  ATTENTION_ROPE,
  ATTENTION_LOGITS,
  ATTENTION_OPENBLAS
} attention_impl;

/* The logit option of an ATTENTION_LOGITS variant (peak_logits). */
typedef enum attention_option {
  OPTION_NONE,
  OPTION_ALIBI,
  OPTION_SOFTCAP,
  OPTION_SINKS
} attention_option;

typedef struct attention_variant {
  const char *name;
  attention_impl impl;
  peak_isa isa;
  attention_option option;
} attention_variant;

static const attention_variant attention_variants[] = {
    {"scalar", ATTENTION_TIER, PEAK_ISA_SCALAR, OPTION_NONE},
#if defined(__x86_64__)
    {"avx2", ATTENTION_TIER, PEAK_ISA_AVX2, OPTION_NONE},
    {"avx512", ATTENTION_TIER, PEAK_ISA_AVX512, OPTION_NONE},
#endif
    {"dispatch", ATTENTION_DISPATCH, PEAK_ISA_SCALAR, OPTION_NONE},
    {"rope", ATTENTION_ROPE, PEAK_ISA_SCALAR, OPTION_NONE},
    {"alibi", ATTENTION_LOGITS, PEAK_ISA_SCALAR, OPTION_ALIBI},
    {"softcap", ATTENTION_LOGITS, PEAK_ISA_SCALAR, OPTION_SOFTCAP},
    {"sinks", ATTENTION_LOGITS, PEAK_ISA_SCALAR, OPTION_SINKS},
#if PEAK_BENCH_OPENBLAS
    {"openblas", ATTENTION_OPENBLAS, PEAK_ISA_SCALAR, OPTION_NONE},
#endif
};

/* {H, Lq, Lk, causal, cold} */
static const int64_t attention_shapes[][5] = {
    {8, 128, 128, 0, 0},   {8, 128, 128, 1, 0},    {8, 512, 512, 0, 0},
    {8, 512, 512, 1, 0},   {8, 2048, 2048, 0, 0},  {8, 2048, 2048, 1, 0},
    {8, 4096, 4096, 0, 0}, {8, 4096, 4096, 1, 0},  {12, 128, 128, 0, 0},
    {12, 512, 512, 0, 0},  {12, 1024, 1024, 0, 0}, {12, 1024, 1024, 1, 0},
    {8, 50, 512, 0, 0},    {8, 1, 2048, 0, 0},     {8, 1, 2048, 0, 1},
};

/* The thread variants' shapes, {H, Lq, Lk, causal, cold}. */
static const int64_t attention_thread_shapes[][5] = {
    {8, 512, 512, 0, 0},   {8, 512, 512, 1, 0}, {8, 2048, 2048, 0, 0},
    {8, 2048, 2048, 1, 0}, {8, 1, 2048, 0, 0},  {8, 1, 8192, 0, 0},
};

typedef struct attention_case {
  const attention_variant *v;
  peak_attention_desc d;
  float *q, *o, *kv; /* kv: n_copies of K then V */
  size_t kv_floats, n_copies, copy;
  void *ws;
  size_t ws_bytes;
  float *s;                         /* openblas: one head's scores */
  const peak_threadpool *pool;      /* dispatch: the thread variants' pool */
  peak_attention_rope rope;         /* rope: d.rope points here */
  float sinks[ATTENTION_MAX_HEADS]; /* sinks: d.logits.sinks points here */
} attention_case;

static const float *attention_k(const attention_case *c) {
  return c->kv + c->copy * 2 * c->kv_floats;
}

static const float *attention_v(const attention_case *c) {
  return attention_k(c) + c->kv_floats;
}

#if PEAK_BENCH_OPENBLAS
static void openblas_run(attention_case *c) {
  const peak_attention_desc *d = &c->d;
  const int H = (int)d->heads, Lq = (int)d->q_len, Lk = (int)d->kv_len,
            D = ATTENTION_DH;
  peak_softmax_desc sd = PEAK_SOFTMAX_DESC_DEFAULT;
  sd.batch = sd.heads = 1;
  sd.q_len = d->q_len;
  sd.k_len = d->kv_len;
  sd.x_stride[0] = sd.y_stride[0] = (ptrdiff_t)(d->q_len * d->kv_len);
  sd.x_stride[1] = sd.y_stride[1] = sd.x_stride[0];
  sd.x_stride[2] = sd.y_stride[2] = (ptrdiff_t)d->kv_len;
  sd.scale = d->scale;
  sd.mask = d->mask;
  for (int h = 0; h < H; h++) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Lq, Lk, D, 1.0f,
                c->q + h * D, H * D, attention_k(c) + h * D, H * D, 0.0f, c->s,
                Lk);
    peak_softmax(c->s, c->s, &sd, NULL);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Lq, D, Lk, 1.0f,
                c->s, Lk, attention_v(c) + h * D, H * D, 0.0f, c->o + h * D,
                H * D);
  }
}
#endif

static void attention_run(attention_case *c) {
  switch (c->v->impl) {
  case ATTENTION_TIER:
    peak_schedule_attention(peak_kernels_for(c->v->isa), c->o, c->q,
                            attention_k(c), attention_v(c), &c->d, c->ws, 1,
                            NULL);
    break;
  case ATTENTION_DISPATCH:
  case ATTENTION_ROPE:
  case ATTENTION_LOGITS:
    peak_attention(c->o, c->q, attention_k(c), attention_v(c), &c->d, c->ws,
                   c->ws_bytes, c->pool);
    break;
  case ATTENTION_OPENBLAS:
#if PEAK_BENCH_OPENBLAS
    openblas_run(c);
#endif
    break;
  }
  c->copy = (c->copy + 1) % c->n_copies;
}

/* Row i of head h against double precision; returns the error bound
   violated, 0 if fine. */
static double attention_check_row(const attention_case *c, size_t h, size_t i) {
  const peak_attention_desc *d = &c->d;
  const size_t H = d->heads, Lk = d->kv_len;
  const float *q = c->q + (i * H + h) * ATTENTION_DH, *k = attention_k(c),
              *v = attention_v(c);
  size_t hi = Lk;
  if (d->mask.causal)
    hi = i + 1 < Lk ? i + 1 : Lk;
  const peak_logits *lg = &d->logits;
  float slopes[ATTENTION_MAX_HEADS];
  peak_alibi_slopes(slopes, H);
  double m = -INFINITY, sum = 0.0, acc[ATTENTION_DH] = {0}, vmax = 0.0,
         worst = 0.0;
  double *s = malloc(hi * sizeof *s);
  for (size_t j = 0; j < hi; j++) {
    double dot = 0.0;
    for (size_t e = 0; e < ATTENTION_DH; e++)
      dot += (double)q[e] * k[(j * H + h) * ATTENTION_DH + e];
    s[j] = dot * d->scale;
    if (lg->softcap > 0.0f)
      s[j] = lg->softcap * tanh(s[j] / lg->softcap);
    if (lg->alibi == PEAK_ALIBI_CAUSAL)
      s[j] -= slopes[h] * ((double)i - (double)j);
    m = s[j] > m ? s[j] : m;
  }
  if (lg->sinks) {
    m = fmax(m, lg->sinks[h]);
    sum = exp(lg->sinks[h] - m);
  }
  for (size_t j = 0; j < hi; j++) {
    const double p = exp(s[j] - m);
    sum += p;
    for (size_t e = 0; e < ATTENTION_DH; e++) {
      acc[e] += p * v[(j * H + h) * ATTENTION_DH + e];
      vmax = fmax(vmax, fabs(v[(j * H + h) * ATTENTION_DH + e]));
    }
  }
  for (size_t e = 0; e < ATTENTION_DH; e++) {
    const double err =
        fabs(acc[e] / sum - c->o[(i * H + h) * ATTENTION_DH + e]);
    if (!(err <= 1e-5 * vmax))
      worst = isnan(err) ? INFINITY : fmax(worst, err);
  }
  free(s);
  return worst;
}

static void attention_fill(float *x, size_t n, uint64_t seed) {
  for (size_t e = 0; e < n; e++) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    x[e] = (float)((double)(seed >> 40) / (double)(1u << 24) * 2.0 - 1.0);
  }
}

static void *attention_alloc(size_t bytes) {
  return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* rope: the call's O equals, byte for byte, that of Q and K rotated by
   peak_rope_apply and attended to without rope. */
static int attention_rope_matches(const attention_case *c) {
  const peak_attention_desc *d = &c->d;
  const size_t nq = d->q_len * d->heads * ATTENTION_DH, nk = c->kv_floats;
  float *q = attention_alloc(nq * sizeof *q),
        *k = attention_alloc(nk * sizeof *k),
        *o = attention_alloc(nq * sizeof *o);
  int ok = q && k && o;
  for (int keys = 0; keys < 2 && ok; keys++) {
    peak_rope_desc r = PEAK_ROPE_DESC_DEFAULT;
    r.batch = 1;
    r.seq_len = keys ? d->kv_len : d->q_len;
    r.heads = d->heads;
    r.head_dim = ATTENTION_DH;
    memcpy(r.x_stride, keys ? d->k_stride : d->q_stride, sizeof r.x_stride);
    memcpy(r.y_stride, r.x_stride, sizeof r.y_stride);
    r.params = c->rope.params;
    ok = peak_rope_apply(keys ? k : q, keys ? attention_k(c) : c->q, &r,
                         NULL) == PEAK_OK;
  }
  peak_attention_desc plain = *d;
  plain.rope = NULL;
  ok = ok &&
       peak_attention(o, q, k, attention_v(c), &plain, NULL, 0, NULL) ==
           PEAK_OK &&
       memcmp(o, c->o, nq * sizeof *o) == 0;
  free(q);
  free(k);
  free(o);
  return ok;
}

static double attention_visible_pairs(const peak_attention_desc *d) {
  if (!d->mask.causal)
    return (double)d->q_len * (double)d->kv_len;
  double n = 0.0;
  for (size_t i = 0; i < d->q_len; i++)
    n += (double)(i + 1 < d->kv_len ? i + 1 : d->kv_len);
  return n;
}

/* Q, K, V and O packed [B, L, H, D] (d's sizes set, Dh = Dv = ATTENTION_DH). */
static void attention_packed_strides(peak_attention_desc *d) {
  const ptrdiff_t qrow = (ptrdiff_t)(d->heads * ATTENTION_DH),
                  krow = (ptrdiff_t)(d->kv_heads * ATTENTION_DH);
  const ptrdiff_t qs[3] = {(ptrdiff_t)d->q_len * qrow, qrow, ATTENTION_DH};
  const ptrdiff_t ks[3] = {(ptrdiff_t)d->kv_len * krow, krow, ATTENTION_DH};
  memcpy(d->q_stride, qs, sizeof qs);
  memcpy(d->o_stride, qs, sizeof qs);
  memcpy(d->k_stride, ks, sizeof ks);
  memcpy(d->v_stride, ks, sizeof ks);
}

static const char *attention_setup(attention_case *c, gb_state *st) {
  peak_attention_desc *d = &c->d;
  const size_t H = (size_t)gb_range(st, 0);
  *d = (peak_attention_desc)PEAK_ATTENTION_DESC_DEFAULT;
  d->batch = 1;
  d->heads = d->kv_heads = H;
  d->q_len = (size_t)gb_range(st, 1);
  d->kv_len = (size_t)gb_range(st, 2);
  d->head_dim = d->v_head_dim = ATTENTION_DH;
  d->scale = 0.125f;
  d->mask.causal = (int)gb_range(st, 3);
  attention_packed_strides(d);
  if (c->v->impl == ATTENTION_ROPE) {
    c->rope = (peak_attention_rope)PEAK_ATTENTION_ROPE_DEFAULT;
    c->rope.params.rotary_dim = ATTENTION_DH;
    d->rope = &c->rope;
  }
  if (c->v->option == OPTION_ALIBI)
    d->logits.alibi = PEAK_ALIBI_CAUSAL;
  if (c->v->option == OPTION_SOFTCAP)
    d->logits.softcap = ATTENTION_SOFTCAP;
  if (c->v->option == OPTION_SINKS) {
    for (size_t h = 0; h < H; h++)
      c->sinks[h] = 0.25f * (float)h - 1.0f;
    d->logits.sinks = c->sinks;
    d->logits.sinks_stride = 1;
  }
  if (H > ATTENTION_MAX_HEADS)
    return "too many heads";
  if (c->v->impl == ATTENTION_TIER && !peak_kernels_for(c->v->isa))
    return "isa not compiled in";
  if (c->v->impl == ATTENTION_TIER && c->v->isa == PEAK_ISA_AVX2 &&
      !__builtin_cpu_supports("avx2"))
    return "isa unsupported";
  if (c->v->impl == ATTENTION_TIER && c->v->isa == PEAK_ISA_AVX512 &&
      !__builtin_cpu_supports("avx512f"))
    return "isa unsupported";
  if (c->v->impl == ATTENTION_TIER && c->v->isa == PEAK_ISA_SCALAR &&
      d->q_len * d->kv_len >= 1 << 20)
    return "scalar: too slow at this size";
  c->kv_floats = d->kv_len * H * ATTENTION_DH;
  /* Cold: copies of K and V that together exceed this machine's 300 MiB
     L3 (and any smaller one). */
  c->n_copies =
      gb_range(st, 4)
          ? (size_t)(400u << 20) / (2 * c->kv_floats * sizeof(float)) + 1
          : 1;
  c->q = attention_alloc(d->q_len * H * ATTENTION_DH * sizeof(float));
  c->o = attention_alloc(d->q_len * H * ATTENTION_DH * sizeof(float));
  c->kv = attention_alloc(c->n_copies * 2 * c->kv_floats * sizeof(float));
  if (c->v->impl == ATTENTION_TIER)
    c->ws_bytes =
        peak_schedule_attention_workspace(peak_kernels_for(c->v->isa), d, 1);
  else if (peak_attention_workspace_size(d, c->pool, &c->ws_bytes) != PEAK_OK)
    return "workspace size";
  c->ws = attention_alloc(c->ws_bytes ? c->ws_bytes : 64);
  if (c->v->impl == ATTENTION_OPENBLAS)
    c->s = attention_alloc(d->q_len * d->kv_len * sizeof(float));
  if (!c->q || !c->o || !c->kv || !c->ws ||
      (c->v->impl == ATTENTION_OPENBLAS && !c->s))
    return "out of memory";
  attention_fill(c->q, d->q_len * H * ATTENTION_DH, 1);
  for (size_t e = 0; e < c->n_copies; e++)
    attention_fill(c->kv + e * 2 * c->kv_floats, 2 * c->kv_floats, 2);
  return NULL;
}

static void attention_body(gb_state *st, void *user,
                           const peak_threadpool *pool) {
  attention_case c;
  memset(&c, 0, sizeof c);
  c.v = user;
  c.pool = pool;
  const char *why = attention_setup(&c, st);
  if (!why) {
    attention_run(&c);
    c.copy = 0;
    const size_t rows[3] = {0, c.d.q_len / 2, c.d.q_len - 1};
    if (c.v->impl == ATTENTION_ROPE && !attention_rope_matches(&c))
      why = "wrong result";
    for (size_t r = 0; r < 3 && !why && c.v->impl != ATTENTION_ROPE; r++)
      for (size_t h = 0; h < c.d.heads && !why; h += c.d.heads - 1)
        if (attention_check_row(&c, h, rows[r]) != 0.0)
          why = "wrong result";
  }
  if (why) {
    gb_skip_with_error(st, why);
  } else {
    while (gb_keep_running(st)) {
      attention_run(&c);
      gb_do_not_optimize(c.o);
    }
    const double it = (double)gb_iterations(st),
                 per_pair = 4.0 * ATTENTION_DH * (double)c.d.heads;
    gb_set_counter(st, "GFLOPs",
                   it * per_pair * (double)c.d.q_len * (double)c.d.kv_len *
                       1e-9,
                   GB_COUNTER_RATE);
    gb_set_counter(st, "GFLOPs_visible",
                   it * per_pair * attention_visible_pairs(&c.d) * 1e-9,
                   GB_COUNTER_RATE);
    gb_set_counter(st, "workspace_bytes", (double)c.ws_bytes, GB_COUNTER_PLAIN);
  }
  free(c.s);
  free(c.ws);
  free(c.kv);
  free(c.o);
  free(c.q);
}

static void bench_attention(gb_state *st, void *user) {
  attention_body(st, user, NULL);
}

/* .../threads:<n>: argument 5 */
static void bench_attention_threads(gb_state *st, void *user) {
  const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 5));
  if (pool)
    attention_body(st, user, pool);
  else
    gb_skip_with_error(
        st,
        "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

/* The logit options' variants run on the shapes their cost is judged on
   (each against dispatch of the same shape, one run): self-attention H 8
   causal at L 512 and 2048, and decode at Lk 2048. */
static bool attention_logits_shape(size_t s) {
  const int64_t *a = attention_shapes[s];
  return a[0] == 8 && a[4] == 0 &&
         ((a[1] == a[2] && a[3] == 1 && a[1] >= 512 && a[1] <= 2048) ||
          (a[1] == 1 && a[2] == 2048));
}

/* ---- 16-bit tensors -------------------------------------------------------------- */

/* {H, kv_heads, Lq, Lk, cold, K/V type, Q/O type} (peak_dtype): a decode
   step of a GQA model over a float32 / bfloat16 / float16 cache (Q and O
   float32), and self-attention at L 2048 all float32 / bfloat16 / float16.
   Counter kv_bytes: K and V bytes per second, against read/bytes of the
   same run. */
static const int64_t attention_type_shapes[][7] = {
    {32, 8, 1, 8192, 1, PEAK_F32, PEAK_F32},   {32, 8, 1, 8192, 1, PEAK_BF16, PEAK_F32},
    {32, 8, 1, 8192, 1, PEAK_F16, PEAK_F32},   {32, 8, 1, 8192, 0, PEAK_F32, PEAK_F32},
    {32, 8, 1, 8192, 0, PEAK_BF16, PEAK_F32},  {8, 8, 1, 8192, 1, PEAK_F32, PEAK_F32},
    {8, 8, 1, 8192, 1, PEAK_BF16, PEAK_F32},   {8, 8, 2048, 2048, 0, PEAK_F32, PEAK_F32},
    {8, 8, 2048, 2048, 0, PEAK_BF16, PEAK_BF16}, {8, 8, 2048, 2048, 0, PEAK_F16, PEAK_F16},
};

typedef struct attention_typed_case {
  peak_attention_desc d;
  void *q, *o, *kv; /* kv: n_copies of K then V, of d.k_type */
  size_t kv_elems, kv_bytes, n_copies, copy;
  void *ws;
  size_t ws_bytes;
} attention_typed_case;

static const char *attention_typed_setup(attention_typed_case *c, gb_state *st) {
  peak_attention_desc *d = &c->d;
  *d = (peak_attention_desc)PEAK_ATTENTION_DESC_DEFAULT;
  const size_t H = (size_t)gb_range(st, 0), KVH = (size_t)gb_range(st, 1);
  d->batch = 1;
  d->heads = H;
  d->kv_heads = KVH;
  d->q_len = (size_t)gb_range(st, 2);
  d->kv_len = (size_t)gb_range(st, 3);
  d->head_dim = d->v_head_dim = ATTENTION_DH;
  d->scale = 0.125f;
  d->k_type = d->v_type = (peak_dtype)gb_range(st, 5);
  d->q_type = d->o_type = (peak_dtype)gb_range(st, 6);
  attention_packed_strides(d);
  const size_t kb = peak_dtype_size(d->k_type), qb = peak_dtype_size(d->q_type);
  const size_t nq = d->q_len * H * ATTENTION_DH;
  c->kv_elems = d->kv_len * KVH * ATTENTION_DH;
  c->kv_bytes = 2 * c->kv_elems * kb;
  /* Cold: copies of K and V beyond any last-level cache (400 MiB). */
  c->n_copies = gb_range(st, 4) ? (size_t)(400u << 20) / c->kv_bytes + 1 : 1;
  c->q = attention_alloc(nq * qb);
  c->o = attention_alloc(nq * qb);
  c->kv = attention_alloc(c->n_copies * c->kv_bytes);
  float *tmp = attention_alloc((nq > 2 * c->kv_elems ? nq : 2 * c->kv_elems) * sizeof(float));
  if (peak_attention_workspace_size(d, NULL, &c->ws_bytes) != PEAK_OK)
    return "workspace size";
  c->ws = attention_alloc(c->ws_bytes ? c->ws_bytes : 64);
  if (!c->q || !c->o || !c->kv || !c->ws || !tmp) {
    free(tmp);
    return "out of memory";
  }
  attention_fill(tmp, nq, 1);
  peak_convert(c->q, d->q_type, tmp, PEAK_F32, nq, NULL);
  for (size_t e = 0; e < c->n_copies; e++) {
    attention_fill(tmp, 2 * c->kv_elems, 2 + e);
    peak_convert((char *)c->kv + e * c->kv_bytes, d->k_type, tmp, PEAK_F32, 2 * c->kv_elems,
                 NULL);
  }
  free(tmp);
  return NULL;
}

static void bench_attention_types(gb_state *st, void *user) {
  (void)user;
  attention_typed_case c;
  memset(&c, 0, sizeof c);
  const char *why = attention_typed_setup(&c, st);
  if (why) {
    gb_skip_with_error(st, why);
  } else {
    while (gb_keep_running(st)) {
      const char *k = (const char *)c.kv + c.copy * c.kv_bytes;
      if (peak_attention(c.o, c.q, k, k + c.kv_bytes / 2, &c.d, c.ws, c.ws_bytes, NULL) !=
          PEAK_OK) {
        gb_skip_with_error(st, "peak_attention failed");
        break;
      }
      gb_do_not_optimize(c.o);
      c.copy = (c.copy + 1) % c.n_copies;
    }
    const double it = (double)gb_iterations(st);
    gb_set_counter(st, "kv_bytes", it * (double)c.kv_bytes, GB_COUNTER_RATE);
    gb_set_counter(st, "GFLOPs",
                   it * 4.0 * ATTENTION_DH * (double)c.d.heads * (double)c.d.q_len *
                       (double)c.d.kv_len * 1e-9,
                   GB_COUNTER_RATE);
  }
  free(c.ws);
  free(c.kv);
  free(c.o);
  free(c.q);
}

static void attention_register_types(void) {
  static const char *const names[] = {"H", "KVH", "Lq", "Lk", "cold", "kv", "qo"};
  for (size_t s = 0; s < sizeof attention_type_shapes / sizeof attention_type_shapes[0]; s++) {
    gb_bench *b = gb_register("attention/types", bench_attention_types, NULL);
    b = gb_arg_names(gb_args(b, attention_type_shapes[s], 7), names, 7);
    if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
      fprintf(stderr, "bench_peak: cannot register attention/types\n");
      exit(EXIT_FAILURE);
    }
  }
}

void bench_register_attention(void) {
  static const char *const arg_names[] = {"H", "Lq", "Lk", "causal", "cold"};
  char name[64];
  attention_register_types();
#if PEAK_BENCH_OPENBLAS
  openblas_set_num_threads(1);
#endif
  for (size_t s = 0; s < sizeof attention_shapes / sizeof attention_shapes[0];
       s++)
    for (size_t i = 0;
         i < sizeof attention_variants / sizeof attention_variants[0]; i++) {
      if (attention_variants[i].impl == ATTENTION_TIER &&
          !bench_tier_has_kernel("attention", attention_variants[i].isa))
        continue;
      if (attention_variants[i].impl == ATTENTION_LOGITS &&
          !attention_logits_shape(s))
        continue;
      snprintf(name, sizeof name, "attention/%s", attention_variants[i].name);
      gb_bench *b =
          gb_register(name, bench_attention, (void *)&attention_variants[i]);
      b = gb_args(b, attention_shapes[s], 5);
      b = gb_arg_names(b, arg_names, 5);
      b = gb_unit(b, GB_MICROSECOND);
      if (gb_use_real_time(b) == NULL) {
        fprintf(stderr, "bench_peak: cannot register %s\n", name);
        exit(EXIT_FAILURE);
      }
    }
  static const char *const thread_names[] = {"H",      "Lq",   "Lk",
                                             "causal", "cold", "threads"};
  const attention_variant *dispatch = NULL;
  for (size_t i = 0;
       i < sizeof attention_variants / sizeof attention_variants[0]; i++)
    if (attention_variants[i].impl == ATTENTION_DISPATCH)
      dispatch = &attention_variants[i];
  const int64_t *threads;
  const size_t n_threads = bench_thread_counts(&threads);
  for (size_t s = 0;
       s < sizeof attention_thread_shapes / sizeof attention_thread_shapes[0];
       s++)
    for (size_t t = 0; t < n_threads; t++) {
      int64_t args[6];
      memcpy(args, attention_thread_shapes[s],
             sizeof attention_thread_shapes[s]);
      args[5] = threads[t];
      gb_bench *b = gb_register("attention/dispatch", bench_attention_threads,
                                (void *)dispatch);
      b = gb_arg_names(gb_args(b, args, 6), thread_names, 6);
      if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
        fprintf(stderr,
                "bench_peak: cannot register attention/dispatch threads\n");
        exit(EXIT_FAILURE);
      }
    }
}
