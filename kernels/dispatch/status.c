/*
 * status.c - peak_status_string: a fixed English sentence per status.
 */
#include "peak.h"

const char *peak_status_string(peak_status s)
{
    switch (s) {
    case PEAK_OK: return "success";
    case PEAK_ERR_INVALID_ARG: return "invalid argument";
    case PEAK_ERR_OUT_OF_RANGE: return "index or size out of range";
    case PEAK_ERR_UNSUPPORTED:
        return "not supported (instruction set on this CPU/OS/build, element type, or a size "
               "the type does not take)";
    case PEAK_ERR_WORKSPACE: return "workspace too small";
    case PEAK_ERR_NO_MEMORY: return "out of memory";
    }
    return "unknown status";
}
