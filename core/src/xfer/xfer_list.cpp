#include "xfer/xfer_list.h"

#include "util/status.h"

namespace hmc {

hmc_status_t make_xfer_list(Region* local, Remote* remote, hmc_xfer_op_t op,
                            const hmc_xfer_desc_t* descs, size_t count,
                            std::unique_ptr<XferList>* out) {
  auto spans = std::make_shared<std::vector<RmaSpan>>();
  spans->reserve(count);
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const hmc_xfer_desc_t& d = descs[i];
    if (d.size == 0) continue;  // an empty block moves nothing
    if (d.local_offset > local->size || d.size > local->size - d.local_offset)
      return fail(HMC_ERR_OUT_OF_BOUNDS,
                  "hmc_xfer_prepare: descriptor {}: {} bytes at local offset {} fall outside the "
                  "{}-byte local region (nothing was prepared)",
                  i, d.size, d.local_offset, local->size);
    if (d.remote_offset > remote->size || d.size > remote->size - d.remote_offset)
      return fail(HMC_ERR_OUT_OF_BOUNDS,
                  "hmc_xfer_prepare: descriptor {}: {} bytes at remote offset {} fall outside the "
                  "peer's {}-byte region (nothing was prepared)",
                  i, d.size, d.remote_offset, remote->size);
    uint64_t remote_addr = remote->base + d.remote_offset;
    if (!spans->empty()) {
      RmaSpan& last = spans->back();
      if (last.local + last.len == d.local_offset && last.remote_addr + last.len == remote_addr) {
        last.len += d.size;
        total += d.size;
        continue;
      }
    }
    spans->push_back({d.local_offset, remote_addr, d.size});
    total += d.size;
  }
  if (total == 0)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_xfer_prepare: the list of {} descriptors moves no "
                "byte",
                count);
  auto list = std::make_unique<XferList>();
  list->local = local;
  list->remote = remote;
  list->put = op == HMC_XFER_WRITE;
  list->spans = std::move(spans);
  list->total = total;
  list->described = count;
  *out = std::move(list);
  return HMC_SUCCESS;
}

}  // namespace hmc
