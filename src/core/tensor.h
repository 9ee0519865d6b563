// Tensor: a contiguous, row-major n-d array with a dtype, on a Device, whose bytes come from that
// device's MemoryPool under one Category. Copies share storage (like torch.Tensor); the storage is
// returned to the pool when the last Tensor referring to it is dropped or reset(). data() is a
// device pointer, for the device's op table (kernels/op_table.h) and its copies (core/device.h);
// host code reads it only through core/host_staging.h or a download. On the meta device data() is
// nullptr and the meta entries do nothing, so model code never asks which device runs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/memory.h"

namespace snug {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

class Storage {
 public:
  Storage(Device& dev, int64_t bytes, Category c);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return block_.ptr; }
  int64_t bytes() const { return bytes_; }
  Category category() const { return cat_; }
  Device& device() const { return *dev_; }

 private:
  Device* dev_;
  PoolBlock block_;
  int64_t bytes_;
  Category cat_;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialized contents (cpu) / no contents (meta).
  static Tensor empty(const Shape& shape, DType dtype, Category c, Device& dev);
  static Tensor zeros(const Shape& shape, DType dtype, Category c, Device& dev);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative i counts from the end
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  int64_t nbytes() const { return numel_ * static_cast<int64_t>(dtype_size(dtype_)); }
  DType dtype() const { return dtype_; }
  Category category() const;
  Device& device() const;
  bool is_meta() const { return defined() && device().is_meta(); }

  void* raw() const;
  template <typename T>
  T* data() const {
    SNUG_ASSERT(dtype_of<T>() == dtype_, "data<", dtype_name(dtype_of<T>()), "> on a ",
                dtype_name(dtype_), " tensor");
    return static_cast<T*>(raw());
  }
  // For 16-bit float tensors (f16/bf16 bit patterns).
  uint16_t* data_u16() const;

  // Same storage, new shape of equal numel.
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) of the first dimension, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // All bytes 0, through the device's backend (a memset on cpu; nothing on meta).
  void zero_();
  // Drops this reference (storage freed if last).
  void reset() { *this = Tensor(); }
  // Number of Tensors sharing the storage (for tests of freeing behaviour).
  long use_count() const { return storage_.use_count(); }

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // bytes
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
};

// Throws a snug::Error naming `what` unless t has exactly `expected` shape.
void check_shape(const Tensor& t, const Shape& expected, const char* what);

}  // namespace snug
