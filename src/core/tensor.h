// An owning, 64-byte-aligned, dense tensor of any DType, with element access as f64 and a
// view as the kernel ABI's cake_tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/kernel_abi.h"

namespace cake {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"
Shape contiguous_strides(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled, row-major contiguous

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }

  // Flat (row-major) element access, converting through f64.
  double get(int64_t flat) const;
  void set(int64_t flat, double v);

  cake_tensor abi() const;  // a view; the tensor must outlive it

 private:
  struct Free {
    void operator()(void* p) const;
  };
  DType dtype_ = DType::f32;
  Shape shape_;
  Shape strides_;
  int64_t numel_ = 0;
  std::unique_ptr<void, Free> data_;
};

}  // namespace cake
