/* The uniform C ABI every CAKE kernel exports (DESIGN §5). Plain C so that kernels from any
   track, and delivered packages, include it unchanged. dtype codes match cake::DType. */
#ifndef CAKE_KERNEL_ABI_H
#define CAKE_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CAKE_MAX_RANK 8

typedef struct {
  void* data;
  int32_t dtype; /* 0 f32, 1 f16, 2 bf16, 3 i32, 4 i64, 5 i8, 6 bool */
  int32_t rank;
  int64_t shape[CAKE_MAX_RANK];
  int64_t stride[CAKE_MAX_RANK]; /* in elements */
} cake_tensor;

/* 0 on success, non-zero error code otherwise. Tensors in the contract's inputs / outputs order,
   params in the order of its params. */
typedef int (*cake_run_fn)(const cake_tensor* in, int n_in, cake_tensor* out, int n_out,
                           const double* params, int n_params);

#ifdef __cplusplus
}
#endif

#endif /* CAKE_KERNEL_ABI_H */
