/* The consumer of two CAKE operator packages (softmax, add) in one C program: reads each operator's inputs
   from a tensor file, calls softmax through its typed entry point and add through cake_add_run, writes
   the outputs to tensor files, and prints both contract hashes. Tensor file: "CAKEIO01", int32 n_tensors,
   int32 n_params, double params[n_params], then per tensor int32 dtype, int32 rank, int64 shape[rank] and
   the dense row-major data. Usage: consumer SOFTMAX_IN SOFTMAX_OUT ADD_IN ADD_OUT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cake_add.h>
#include <cake_softmax.h>

#define MAX_T 4

typedef struct {
  int n_tensors, n_params;
  double params[16];
  cake_tensor t[MAX_T];
} io_file;

static size_t elem_size(int32_t dtype) {
  static const size_t sz[] = {4, 2, 2, 4, 8, 1, 1};
  return dtype >= 0 && dtype <= 6 ? sz[dtype] : 0;
}

static int64_t numel(const cake_tensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; ++i) n *= t->shape[i];
  return n;
}

static void set_dense(cake_tensor* t) {
  int64_t st = 1;
  for (int i = t->rank - 1; i >= 0; --i) {
    t->stride[i] = st;
    st *= t->shape[i];
  }
}

static int read_io(const char* path, io_file* f) {
  FILE* fp = fopen(path, "rb");
  char magic[8];
  int ok = fp && fread(magic, 1, 8, fp) == 8 && memcmp(magic, "CAKEIO01", 8) == 0 &&
           fread(&f->n_tensors, 4, 1, fp) == 1 && fread(&f->n_params, 4, 1, fp) == 1 && f->n_tensors >= 0 &&
           f->n_tensors <= MAX_T && f->n_params >= 0 && f->n_params <= 16 &&
           fread(f->params, 8, (size_t)f->n_params, fp) == (size_t)f->n_params;
  for (int i = 0; ok && i < f->n_tensors; ++i) {
    cake_tensor* t = &f->t[i];
    memset(t, 0, sizeof *t);
    ok = fread(&t->dtype, 4, 1, fp) == 1 && fread(&t->rank, 4, 1, fp) == 1 && t->rank >= 0 &&
         t->rank <= CAKE_MAX_RANK && fread(t->shape, 8, (size_t)t->rank, fp) == (size_t)t->rank &&
         elem_size(t->dtype) > 0;
    if (!ok) break;
    set_dense(t);
    const size_t bytes = (size_t)numel(t) * elem_size(t->dtype);
    t->data = malloc(bytes ? bytes : 1);
    ok = t->data && fread(t->data, 1, bytes, fp) == bytes;
  }
  if (fp) fclose(fp);
  if (!ok) fprintf(stderr, "consumer: cannot read %s\n", path);
  return ok;
}

static int write_io(const char* path, const cake_tensor* t, int n) {
  FILE* fp = fopen(path, "wb");
  const int32_t nt = n, np = 0;
  int ok =
      fp && fwrite("CAKEIO01", 1, 8, fp) == 8 && fwrite(&nt, 4, 1, fp) == 1 && fwrite(&np, 4, 1, fp) == 1;
  for (int i = 0; ok && i < n; ++i) {
    const size_t bytes = (size_t)numel(&t[i]) * elem_size(t[i].dtype);
    ok = fwrite(&t[i].dtype, 4, 1, fp) == 1 && fwrite(&t[i].rank, 4, 1, fp) == 1 &&
         fwrite(t[i].shape, 8, (size_t)t[i].rank, fp) == (size_t)t[i].rank &&
         fwrite(t[i].data, 1, bytes, fp) == bytes;
  }
  if (fp && fclose(fp) != 0) ok = 0;
  if (!ok) fprintf(stderr, "consumer: cannot write %s\n", path);
  return ok;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: consumer SOFTMAX_IN SOFTMAX_OUT ADD_IN ADD_OUT\n");
    return 2;
  }
  printf("softmax %s\nadd %s\n", cake_softmax_contract_hash(), cake_add_contract_hash());

  /* softmax, typed: cake_softmax_f32(x, y, N, D), the sizes from x's shape. */
  io_file s;
  if (!read_io(argv[1], &s)) return 2;
  if (s.n_tensors != 1 || s.t[0].dtype != 0 || s.t[0].rank != 2 || s.n_params != CAKE_SOFTMAX_N_PARAMS) {
    fprintf(stderr, "consumer: the softmax input is not one f32 [N, D] tensor with the sizes N, D\n");
    return 2;
  }
  cake_tensor y = s.t[0];
  y.data = malloc((size_t)numel(&y) * 4 + 4);
  int rc = cake_softmax_f32((const float*)s.t[0].data, (float*)y.data, s.t[0].shape[0], s.t[0].shape[1]);
  if (rc != 0) {
    fprintf(stderr, "consumer: cake_softmax_f32 returned %d: %s\n", rc, cake_softmax_last_error());
    return 3;
  }
  if (!write_io(argv[2], &y, 1)) return 2;

  /* add, through the uniform ABI: in = {x [M, N], y [N]}, out = {z [M, N]}, params = {M, N}. */
  io_file a;
  if (!read_io(argv[3], &a)) return 2;
  if (a.n_tensors != 2 || a.t[0].rank != 2) {
    fprintf(stderr, "consumer: the add input is not two tensors x [M, N], y [N]\n");
    return 2;
  }
  cake_tensor z = a.t[0];
  z.data = malloc((size_t)numel(&z) * elem_size(z.dtype) + 4);
  rc = cake_add_run(a.t, 2, &z, 1, a.params, a.n_params);
  if (rc != 0) {
    fprintf(stderr, "consumer: cake_add_run returned %d: %s\n", rc, cake_add_last_error());
    return 3;
  }
  if (!write_io(argv[4], &z, 1)) return 2;

  /* A bad call is answered with a code and a message, not a crash. */
  rc = cake_add_run(a.t, 1, &z, 1, a.params, a.n_params);
  if (rc != CAKE_ERR_ARGS || strlen(cake_add_last_error()) == 0) {
    fprintf(stderr, "consumer: a call with one input returned %d (%s)\n", rc, cake_add_last_error());
    return 4;
  }
  printf("bad call: %d %s\n", rc, cake_add_last_error());
  return 0;
}
