/*
 * items.h - the arithmetic the schedulers share to cut a call into work
 * items of a fixed size (parallel.h): how many, how long the last one is,
 * and the total of their cost model.  Sizes come from the call's shapes only, never from the number of
 * workers, so the partition (and every byte) is the same at any thread
 * count.
 */
#ifndef PEAK_SCHEDULE_ITEMS_H
#define PEAK_SCHEDULE_ITEMS_H

#include "parallel.h"

#include <stddef.h>

/* Items of `size` that cover n (at least one). */
static inline size_t peak_items(size_t n, size_t size)
{
    return n <= size ? 1 : (n - 1) / size + 1;
}

/* The length of the item that starts at `start` (< n). */
static inline size_t peak_item_len(size_t n, size_t start, size_t size)
{
    return n - start < size ? n - start : size;
}

/* a clamped to [lo, hi] (lo <= hi). */
static inline size_t peak_clamp_size(size_t a, size_t lo, size_t hi)
{
    return a < lo ? lo : a > hi ? hi : a;
}

/* The sum of w's item costs, for its total_ns: for works whose items are
   long (microseconds) next to the few nanoseconds of a cost. */
static inline double peak_work_sum_ns(const peak_work *w)
{
    double ns = 0.0;
    for (size_t i = 0; i < w->items; i++)
        ns += w->cost(w->ctx, i);
    return ns;
}

#endif /* PEAK_SCHEDULE_ITEMS_H */
