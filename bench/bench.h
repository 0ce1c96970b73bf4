/*
 * bench.h - what bench-main.c needs from each kernel family's benchmark file.
 *
 * One registrar per family keeps bench_peak a single binary (one JSON file,
 * one --benchmark_filter namespace) while each family's file stays
 * self-contained.
 */
#ifndef PEAK_BENCH_H
#define PEAK_BENCH_H

/* Registers pe_table/<variant>/seq_len:<n>/d_model:<d> for every variant
   and shape (bench-pe-table.c). */
void bench_register_pe_table(void);

/* Registers softmax/<variant>/L:<n>/causal:<0|1> for every variant and
   shape (bench-softmax.c). */
void bench_register_softmax(void);

/* Registers embed/<variant>/batch:<B>/seq_len:<S> (bench-embed.c) and
   layernorm/<variant>/rows:<R>/d_model:<D> (bench-layernorm.c). */
void bench_register_embed(void);
void bench_register_layernorm(void);

/* Registers sdpa/<variant>/H:<h>/Lq:<n>/Lk:<n>/causal:<0|1>/cold:<0|1> and
   fma_peak/<isa> (bench-sdpa.c). */
void bench_register_sdpa(void);

#endif /* PEAK_BENCH_H */
