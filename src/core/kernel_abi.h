/* The uniform C ABI every CAKE kernel exports (DESIGN §5). Plain C so that kernels from any
   track, and delivered packages, include it unchanged. dtype codes match cake::DType. */
#ifndef CAKE_KERNEL_ABI_H
#define CAKE_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CAKE_MAX_RANK 8

/* NOLINTNEXTLINE(modernize-use-using): a C header */
typedef struct {
  void* data;
  int32_t dtype; /* 0 f32, 1 f16, 2 bf16, 3 i32, 4 i64, 5 i8, 6 bool */
  int32_t rank;
  int64_t shape[CAKE_MAX_RANK];
  int64_t stride[CAKE_MAX_RANK]; /* in elements */
} cake_tensor;

/* 0 on success, non-zero error code otherwise. Tensors in the contract's inputs / outputs order.
   params: the contract's params in their order, then the value of every free size symbol (the symbols
   the case rules set, in the order the checker lists them: CheckedContract::sizes, free ones first),
   as doubles. The sizes let a kernel recover symbols no shape carries (conv2d's stride S and padding P);
   a kernel checks every tensor's shape against them. */
/* NOLINTNEXTLINE(modernize-use-using) */
typedef int (*cake_run_fn)(const cake_tensor* in, int n_in, cake_tensor* out, int n_out, const double* params,
                           int n_params);

/* Status codes of CAKE-generated kernels. */
#define CAKE_OK 0
#define CAKE_ERR_ARGS 1   /* wrong number of tensors or params */
#define CAKE_ERR_SHAPE 2  /* a tensor's shape disagrees with the sizes */
#define CAKE_ERR_INDEX 3  /* a data-dependent index is out of range */
#define CAKE_ERR_LAYOUT 4 /* a tensor is not dense row-major */
#define CAKE_ERR_DTYPE 5  /* a dtype the kernel was not built for */
#define CAKE_ERR_NOMEM 6  /* scratch allocation failed */
#define CAKE_ERR_DEVICE 7 /* the device (OpenCL, CUDA) failed */

#ifdef __cplusplus
}
#endif

#endif /* CAKE_KERNEL_ABI_H */
