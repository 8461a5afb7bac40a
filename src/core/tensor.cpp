// Tensor storage and element conversion.
#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace cake {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

void Tensor::Free::operator()(void* p) const { std::free(p); }

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), strides_(contiguous_strides(shape_)),
      numel_(shape_numel(shape_)) {
  if (static_cast<int>(shape_.size()) > CAKE_MAX_RANK)
    throw Error("tensor rank " + std::to_string(shape_.size()) + " exceeds the ABI maximum of 8");
  for (int64_t d : shape_)
    if (d < 0) throw Error("negative extent in shape " + shape_str(shape_));
  size_t bytes = nbytes();
  size_t alloc = ((bytes + 63) / 64) * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  if (!p) throw Error("out of memory allocating " + std::to_string(alloc) + " bytes");
  std::memset(p, 0, alloc);
  data_.reset(p);
}

double Tensor::get(int64_t flat) const {
  return load_as_f64(static_cast<const char*>(data()) + flat * dtype_size(dtype_), dtype_);
}

void Tensor::set(int64_t flat, double v) {
  store_from_f64(static_cast<char*>(data()) + flat * dtype_size(dtype_), dtype_, v);
}

cake_tensor Tensor::abi() const {
  cake_tensor t{};
  t.data = const_cast<void*>(data());
  t.dtype = static_cast<int32_t>(dtype_);
  t.rank = rank();
  for (int i = 0; i < rank(); ++i) {
    t.shape[i] = shape_[i];
    t.stride[i] = strides_[i];
  }
  return t;
}

}  // namespace cake
