#include "demo-gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int32_t demo_src_lengths[DEMO_BATCH] = {50, 42};

uint64_t demo_hash(uint32_t tensor_id, uint64_t index)
{
    uint64_t z = (DEMO_SEED ^ ((uint64_t)tensor_id << 40)) + (index + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void demo_uniform(float *out, size_t n, uint32_t tensor_id, float amp)
{
    /* amp * 2^-23 is exact, and so is (float)k for |k| <= 2^23: the product
       is the only rounding, the same one numpy makes. */
    const float unit = amp * 0x1p-23f;
    for (size_t i = 0; i < n; i++) {
        int32_t k = (int32_t)(demo_hash(tensor_id, i) >> 40) - (1 << 23);
        out[i] = (float)k * unit;
    }
}

void demo_token_ids(int32_t *ids, uint32_t tensor_id, const int32_t *lengths, size_t batch,
                    size_t seq_len)
{
    for (size_t b = 0; b < batch; b++) {
        for (size_t t = 0; t < seq_len; t++) {
            size_t i = b * seq_len + t;
            uint64_t h = demo_hash(tensor_id, i);
            ids[i] = (int32_t)t < lengths[b] ? (int32_t)(1 + h % (DEMO_VOCAB - 1)) : DEMO_PAD_ID;
        }
    }
}

/* The same list, ids and order as PARAMS in scripts/make-demo-ref.py. */
#define D DEMO_D_MODEL
#define F DEMO_D_FF
#define MHA(prefix, id)                                                                        \
    {prefix ".in_proj_weight", (id), 3 * D * D, D, DEMO_KIND_WEIGHT},                          \
        {prefix ".in_proj_bias", (id) + 1, 3 * D, D, DEMO_KIND_BIAS},                         \
        {prefix ".out_proj.weight", (id) + 2, D * D, D, DEMO_KIND_WEIGHT},                     \
        {prefix ".out_proj.bias", (id) + 3, D, D, DEMO_KIND_BIAS}
#define FFN(prefix, id)                                                                        \
    {prefix "linear1.weight", (id), F * D, D, DEMO_KIND_WEIGHT},                               \
        {prefix "linear1.bias", (id) + 1, F, D, DEMO_KIND_BIAS},                              \
        {prefix "linear2.weight", (id) + 2, D * F, F, DEMO_KIND_WEIGHT},                       \
        {prefix "linear2.bias", (id) + 3, D, F, DEMO_KIND_BIAS}
#define NORM(prefix, id)                                                                       \
    {prefix ".weight", (id), D, 0, DEMO_KIND_GAMMA}, {prefix ".bias", (id) + 1, D, 0, DEMO_KIND_BETA}

static const demo_param params[] = {
    {"embed.weight", 3, (size_t)DEMO_VOCAB * D, D, DEMO_KIND_EMBEDDING},
    MHA("enc.self_attn", 10),
    FFN("enc.", 14),
    NORM("enc.norm1", 18),
    NORM("enc.norm2", 20),
    MHA("dec.self_attn", 30),
    MHA("dec.multihead_attn", 34),
    FFN("dec.", 38),
    NORM("dec.norm1", 42),
    NORM("dec.norm2", 44),
    NORM("dec.norm3", 46),
};
#undef D
#undef F

#define N_PARAMS (sizeof params / sizeof params[0])
_Static_assert(N_PARAMS <= sizeof(((demo_weights *)0)->offset) / sizeof(size_t),
               "demo_weights.offset is too small for the parameter list");

size_t demo_param_count(void)
{
    return N_PARAMS;
}

const demo_param *demo_param_at(size_t i)
{
    return i < N_PARAMS ? &params[i] : NULL;
}

float demo_param_amplitude(const demo_param *p)
{
    switch (p->kind) {
    case DEMO_KIND_WEIGHT:
    case DEMO_KIND_BIAS:
    case DEMO_KIND_EMBEDDING:
        /* Python's 1.0 / math.sqrt(n) then np.float32: both steps are
           correctly rounded, so the float is the same. */
        return (float)(1.0 / sqrt((double)p->fan_in));
    case DEMO_KIND_GAMMA:
    case DEMO_KIND_BETA:
        break;
    }
    return 0.25f;
}

static void fill_param(float *out, const demo_param *p)
{
    demo_uniform(out, p->count, p->tensor_id, demo_param_amplitude(p));
    if (p->kind == DEMO_KIND_GAMMA) {
        for (size_t i = 0; i < p->count; i++)
            out[i] = 1.0f + out[i];
    }
}

int demo_weights_init(demo_weights *w)
{
    size_t total = 0;
    for (size_t i = 0; i < N_PARAMS; i++) {
        w->offset[i] = total;
        total += params[i].count;
    }
    w->store = malloc(total * sizeof(float));
    if (!w->store)
        return -1;
    for (size_t i = 0; i < N_PARAMS; i++)
        fill_param(w->store + w->offset[i], &params[i]);
    return 0;
}

void demo_weights_free(demo_weights *w)
{
    free(w->store);
    w->store = NULL;
}

const float *demo_weights_get(const demo_weights *w, const char *name)
{
    for (size_t i = 0; i < N_PARAMS; i++) {
        if (strcmp(params[i].name, name) == 0)
            return w->store + w->offset[i];
    }
    fprintf(stderr, "peak-demo: internal error: no parameter named %s\n", name);
    abort();
}
