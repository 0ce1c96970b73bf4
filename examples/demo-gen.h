/*
 * demo-gen.h - the model peak-demo runs and the formula that fills it.
 *
 * No weight is stored anywhere: scripts/make-demo-ref.py and this file both
 * derive every weight, embedding and token id from a hash of (tensor id,
 * element index), to the same bits, so the committed reference data only
 * holds PyTorch's outputs.  Change a constant here and in the script
 * together, then rerun the script; peak-demo compares everything below with
 * the manifest and refuses to check against data made for another model.
 */
#ifndef PEAK_DEMO_GEN_H
#define PEAK_DEMO_GEN_H

#include <stddef.h>
#include <stdint.h>

/* The PyTorch PositionalEncoding example (d_model 512, max_len 5000, a
   batch of 2 sentences of 50 tokens), plus the paper's base model layer
   sizes for the encoder and decoder. */
enum {
    DEMO_D_MODEL = 512,
    DEMO_HEADS = 8,
    DEMO_HEAD_DIM = DEMO_D_MODEL / DEMO_HEADS,
    DEMO_D_FF = 2048,
    DEMO_MAX_LEN = 5000,
    DEMO_BATCH = 2,
    DEMO_SRC_LEN = 50,
    DEMO_TGT_LEN = 30, /* != DEMO_SRC_LEN: cross-attention has Lq != Lk */
    DEMO_VOCAB = 1000,
    DEMO_PAD_ID = 0,
    DEMO_TOKENS_SRC_ID = 1,
    DEMO_TOKENS_TGT_ID = 2
};

/* Real tokens per source sentence; the second is padded after 42. */
extern const int32_t demo_src_lengths[DEMO_BATCH];

#define DEMO_SEED 0x7065616b2d64656dull /* "peak-dem" */
#define DEMO_LN_EPS 1e-5f

/* Element `index` of the splitmix64 stream seeded by DEMO_SEED ^ (id << 40). */
uint64_t demo_hash(uint32_t tensor_id, uint64_t index);

/* out[i] in [-amp, amp): the top 24 bits of demo_hash as a signed integer,
   times amp * 2^-23; exact but for one float rounding. */
void demo_uniform(float *out, size_t n, uint32_t tensor_id, float amp);

/* ids[b * seq_len + t]: 1 + hash % (DEMO_VOCAB - 1) for t < lengths[b],
   DEMO_PAD_ID after. */
void demo_token_ids(int32_t *ids, uint32_t tensor_id, const int32_t *lengths, size_t batch,
                    size_t seq_len);

/* How a parameter is filled (the letters are the manifest's). */
typedef enum demo_kind {
    DEMO_KIND_WEIGHT = 'w',    /* amplitude 1/sqrt(fan_in)              */
    DEMO_KIND_BIAS = 'b',      /* amplitude 1/sqrt(fan_in of its layer) */
    DEMO_KIND_GAMMA = 'g',     /* 1 + uniform(0.25)                     */
    DEMO_KIND_BETA = 'n',      /* uniform(0.25)                         */
    DEMO_KIND_EMBEDDING = 'e'  /* amplitude 1/sqrt(d_model)             */
} demo_kind;

typedef struct demo_param {
    const char *name; /* PyTorch state_dict name, prefixed enc./dec. */
    uint32_t tensor_id;
    size_t count;
    size_t fan_in;
    demo_kind kind;
} demo_param;

size_t demo_param_count(void);
const demo_param *demo_param_at(size_t i);
float demo_param_amplitude(const demo_param *p);

/* Every parameter, generated into one allocation. */
typedef struct demo_weights {
    float *store;
    size_t offset[64]; /* per demo_param_at(i) */
} demo_weights;

/* 0 on success, -1 when out of memory. */
int demo_weights_init(demo_weights *w);
void demo_weights_free(demo_weights *w);
/* The named parameter's data; aborts on an unknown name (a typo in the demo). */
const float *demo_weights_get(const demo_weights *w, const char *name);

#endif /* PEAK_DEMO_GEN_H */
