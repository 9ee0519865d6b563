#include "core/tensor.h"

namespace snug {

// "(2,3)"; past 16 dimensions "(d0,...,d15,... (N dimensions))": a shape read from a file can have
// any number of dimensions (a safetensors header of a megabyte of 1s), and a message stays a line.
std::string shape_str(const Shape& s) {
  constexpr size_t kShown = 16;
  std::string r = "(";
  for (size_t i = 0; i < s.size() && i < kShown; ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  if (s.size() > kShown) r += ",... (" + std::to_string(s.size()) + " dimensions)";
  r += ')';
  return r;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    SNUG_CHECK(d >= 0, "negative dimension in shape ", shape_str(s));
    // A product past 64 bits wrapped into a small or negative size (issue 29: --lora-r 2^57).
    SNUG_CHECK(!__builtin_mul_overflow(n, d, &n), "a tensor of shape ", shape_str(s),
               " has more than 2^63 elements");
  }
  return n;
}

Storage::Storage(Device& dev, int64_t bytes, Category c)
    : dev_(&dev), block_(dev.pool().allocate(bytes, c)), bytes_(bytes), cat_(c) {}

Storage::~Storage() {
  dev_->pool().release(block_, bytes_, cat_);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Category c, Device& dev) {
  Tensor t;
  t.shape_ = shape;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  int64_t bytes = 0;
  SNUG_CHECK(!__builtin_mul_overflow(t.numel_, static_cast<int64_t>(dtype_size(dtype)), &bytes),
             "a tensor of shape ", shape_str(shape), " has more than 2^63 bytes");
  t.storage_ = std::make_shared<Storage>(dev, t.nbytes(), c);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Category c, Device& dev) {
  Tensor t = empty(shape, dtype, c, dev);
  t.zero_();
  return t;
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  if (i < 0) i += n;
  SNUG_ASSERT(i >= 0 && i < n, "dim ", i, " of shape ", shape_str(shape_));
  return shape_[static_cast<size_t>(i)];
}

Category Tensor::category() const {
  SNUG_ASSERT(defined());
  return storage_->category();
}

Device& Tensor::device() const {
  SNUG_ASSERT(defined());
  return storage_->device();
}

void* Tensor::raw() const {
  if (!storage_ || !storage_->data()) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_;
}

uint16_t* Tensor::data_u16() const {
  SNUG_ASSERT(dtype_ == DType::f16 || dtype_ == DType::bf16, "data_u16 on ", dtype_name(dtype_));
  return static_cast<uint16_t*>(raw());
}

Tensor Tensor::view(const Shape& shape) const {
  SNUG_ASSERT(shape_numel(shape) == numel_, "view ", shape_str(shape), " of ", shape_str(shape_));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  SNUG_ASSERT(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0]);
  Tensor t = *this;
  const int64_t row = shape_[0] ? numel_ / shape_[0] : 0;
  t.offset_ += begin * row * static_cast<int64_t>(dtype_size(dtype_));
  t.shape_[0] = end - begin;
  t.numel_ = (end - begin) * row;
  return t;
}

void Tensor::zero_() {
  if (void* p = raw()) device().zero(p, nbytes());
}

void check_shape(const Tensor& t, const Shape& expected, const char* what) {
  SNUG_CHECK(t.shape() == expected, what, ": expected shape ", shape_str(expected), ", got ",
             shape_str(t.shape()));
}

}  // namespace snug
