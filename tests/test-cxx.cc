// peak.h must compile as C++ and link with C linkage (extern "C").
#include "peak.h"

#include <cstdio>
#include <cstring>

int main()
{
    peak_pe_params params = PEAK_PE_PARAMS_DEFAULT;
    peak_softmax_desc sd = PEAK_SOFTMAX_DESC_DEFAULT;
    peak_attention_desc ad = PEAK_ATTENTION_DESC_DEFAULT;
    peak_embed_desc ed = PEAK_EMBED_DESC_DEFAULT;
    float row[4];
    if (peak_pe_table(row, PEAK_F32, 1, 4, 0, &params, NULL) != PEAK_OK || row[1] != 1.0f)
        return 1;
    if (sd.scale != 0.0f || ad.mask.causal != 0 || ed.padding_idx != -1)
        return 1;
    std::printf("C++ consumer: peak %s, tier %s\n", peak_version(), peak_isa_name(peak_isa_active()));
    return std::strcmp(peak_version(), PEAK_VERSION_STRING) == 0 ? 0 : 1;
}
