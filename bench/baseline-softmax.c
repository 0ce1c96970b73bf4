/*
 * baseline-softmax.c - the softmax baselines of baseline-softmax.h, built
 * with the project's default flags.
 */
#include "baseline-softmax.h"

#include <math.h>

#if PEAK_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

void bench_softmax_expf_loop(float *y, const float *x, size_t rows, size_t L, int causal)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * L;
        float *yr = y + r * L;
        const size_t n = causal ? r % L + 1 : L;
        float max = -INFINITY;
        for (size_t j = 0; j < n; j++)
            max = xr[j] > max ? xr[j] : max;
        float sum = 0.0f;
        for (size_t j = 0; j < n; j++) {
            yr[j] = expf(xr[j] - max);
            sum += yr[j];
        }
        const float inv = 1.0f / sum;
        for (size_t j = 0; j < n; j++)
            yr[j] *= inv;
        for (size_t j = n; j < L; j++)
            yr[j] = 0.0f;
    }
}

#if PEAK_BENCH_ONEDNN
int bench_softmax_onednn_once(float *y, const float *x, size_t rows, size_t L, const char **impl)
{
    const dnnl_dims_t dims = {(dnnl_dim_t)rows, (dnnl_dim_t)L};
    dnnl_engine_t engine = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t src = NULL, dst = NULL;
    dnnl_memory_desc_t md;
    dnnl_softmax_desc_t sd;
    int rc = 1;
    *impl = "?";
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab) != dnnl_success ||
        dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &md, 1) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &sd, NULL, engine, NULL) != dnnl_success ||
        dnnl_primitive_create(&prim, pd) != dnnl_success ||
        dnnl_memory_create(&src, &md, engine, (void *)x) != dnnl_success ||
        dnnl_memory_create(&dst, &md, engine, y) != dnnl_success)
        goto out;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, impl);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    if (dnnl_primitive_execute(prim, stream, 2, args) == dnnl_success &&
        dnnl_stream_wait(stream) == dnnl_success)
        rc = 0;
out:
    /* impl points into pd: the caller gets a static copy of the name. */
    {
        static char name[64];
        size_t k = 0;
        for (; (*impl)[k] && k + 1 < sizeof name; k++)
            name[k] = (*impl)[k];
        name[k] = '\0';
        *impl = name;
    }
    if (dst)
        dnnl_memory_destroy(dst);
    if (src)
        dnnl_memory_destroy(src);
    if (prim)
        dnnl_primitive_destroy(prim);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (stream)
        dnnl_stream_destroy(stream);
    if (engine)
        dnnl_engine_destroy(engine);
    return rc;
}
#endif
