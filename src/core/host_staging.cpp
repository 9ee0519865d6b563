#include "core/host_staging.h"

namespace snug {

HostStaging::HostStaging(const Tensor& t, Use use) : t_(t) {
  if (!t.defined() || t.device().host_addressable()) return;
  Device& dev = t.device();
  Device& host = dev.host();
  SNUG_ASSERT(&host != &dev && host.host_addressable(), "device ", dev.name(),
              " has no host pool for staging");
  staged_ = Tensor::empty(t.shape(), t.dtype(), t.category(), host);
  if (use != Use::write)
    dev.download(static_cast<char*>(staged_.raw()), static_cast<const char*>(t.raw()), t.nbytes());
}

void HostStaging::upload() const {
  if (!staged_.defined()) return;
  t_.device().upload(static_cast<char*>(t_.raw()), static_cast<const char*>(staged_.raw()),
                     t_.nbytes());
}

}  // namespace snug
