// The device a vendor call must run on, made current for the life of a scope, shared by the ccl
// plugins of this tree (compiled into each: plugins never link the core). The thread's previous
// device comes back at the end of the scope; nothing is switched when the wanted one is current
// already, the usual case of an application posting on the device it works on, so that a post
// costs one query of the runtime rather than three calls.
#pragma once

namespace hmc::plugin::ccl {

// Runtime: bool get_current(Handle*) const and bool set_current(Handle) const, where a Handle
// names a device (a CUDA context, a HIP or CNRT ordinal) and compares with ==.
template <typename Runtime, typename Handle>
class CurrentDevice {
 public:
  CurrentDevice(const Runtime& rt, Handle want) : rt_(rt) {
    restore_ = rt_.get_current(&saved_);
    if (restore_ && saved_ == want) {
      restore_ = false;
      ok_ = true;
      return;
    }
    ok_ = rt_.set_current(want);
  }
  ~CurrentDevice() {
    if (restore_) rt_.set_current(saved_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
  bool ok() const { return ok_; }

 private:
  const Runtime& rt_;
  Handle saved_{};
  bool restore_ = false;
  bool ok_ = false;
};

}  // namespace hmc::plugin::ccl
