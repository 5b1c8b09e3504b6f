// RAII owners for libfabric objects, the API version this plugin asks for, and error text.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <memory>
#include <string>

namespace hmc::ofi {

// fi_getinfo is asked for this API version: FI_HMEM, fi_mr_attr.iface, FI_MR_ENDPOINT and
// FI_CONTEXT2 all exist by then. An older libfabric answers -FI_ENOSYS and the plugin reports
// no device, naming the version.
constexpr uint32_t kFiVersion = FI_VERSION(1, 14);

// Owns one fid-based object (fabric, domain, ep, cq, av, mr) and fi_close()s it.
template <typename T>
class Fid {
 public:
  Fid() = default;
  ~Fid() { reset(); }
  Fid(const Fid&) = delete;
  Fid& operator=(const Fid&) = delete;

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  // For the out-parameter of fi_fabric/fi_domain/...; releases what was held.
  T** out() {
    reset();
    return &p_;
  }
  void reset() {
    if (p_ != nullptr) fi_close(&p_->fid);
    p_ = nullptr;
  }

 private:
  T* p_ = nullptr;
};

struct FiInfoDeleter {
  void operator()(fi_info* i) const {
    if (i != nullptr) fi_freeinfo(i);
  }
};
using FiInfoPtr = std::unique_ptr<fi_info, FiInfoDeleter>;

// fi_strerror of a libfabric return code (negative) or error number (positive).
inline const char* fi_err(long long rc) {
  return fi_strerror(static_cast<int>(rc < 0 ? -rc : rc));
}

}  // namespace hmc::ofi
