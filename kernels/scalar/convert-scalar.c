/*
 * convert-scalar.c - peak_convert one element at a time: convert.h, the
 * bits every tier gives.
 */
#include "convert.h"
#include "internal.h"

void peak_half_convert__scalar(void *y, peak_dtype y_type, const void *x, peak_dtype x_type,
                               size_t n, bool stream)
{
    (void)stream; /* plain stores: the reference */
    if (x_type == y_type) {
        peak_convert_copy(y, x, x_type, n);
        return;
    }
    peak_convert_one_by_one(y, y_type, x, x_type, 0, n);
}
