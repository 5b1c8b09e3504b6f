// Transfer lists (hmc_xfer_prepare/post) between the test process and a peer process, over every
// data path: a scattered write of blocks with a notification the target checks the data under,
// the same list posted again, a read of blocks back into other places, a read of many small
// ranges (several chunks of a vectored get where the plugin has one), and refusals before
// anything moves (a descriptor outside either region, an unknown op, a list that moves nothing).
#include <cstring>

#include "fixture.h"

namespace hmc_test {
namespace {

class XferList : public LoopbackTest {
 protected:
  // Posts the list and ends the request; returns the status with hmc's message.
  hmc_status_t post_and_wait(hmc_xfer_list_t list, uint32_t flags, uint64_t value,
                             std::string* detail, size_t* bytes = nullptr) {
    hmc_request_t req = nullptr;
    hmc_status_t st = hmc_xfer_post(list, flags, value, &req);
    if (st != HMC_SUCCESS) {
      *detail = "hmc_xfer_post refused it: " + describe(st);
      return st;
    }
    st = finish(req, kOpTimeoutMs, bytes);
    if (st != HMC_SUCCESS) *detail = "the request ended with " + describe(st);
    return st;
  }
};
HMC_INSTANTIATE_OVER_PATHS(XferList);

TEST_P(XferList, ScatteredBlocksWrittenAndReadBackWithNotifications) {
  ASSERT_NO_FATAL_FAILURE(open());
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kXferTarget));
  std::vector<uint8_t> desc;
  std::string err;
  ASSERT_EQ(recv_blob(c.peer, kTagDesc, &desc, kOpTimeoutMs, &err), HMC_SUCCESS) << err;
  Remote rem;
  hmc_status_t st = rem.import(c.peer, desc);
  ASSERT_EQ(st, HMC_SUCCESS) << "hmc_remote_import: " << describe(st);

  HostBuffer src(kXferRegionSize), dst(kXferRegionSize);
  pattern_fill(src.data(), kXferRegionSize, kXferSeed);
  memset(dst.data(), 0x5A, kXferRegionSize);
  Region src_region, dst_region;
  ASSERT_EQ(src_region.register_mem(ctx(), src.data(), kXferRegionSize, 0), HMC_SUCCESS);
  ASSERT_EQ(dst_region.register_mem(ctx(), dst.data(), kXferRegionSize, 0), HMC_SUCCESS);

  // Refused before anything moves: the target's memory is checked whole afterwards.
  std::vector<hmc_xfer_desc_t> writes = xfer_write_list();
  hmc_xfer_list_t list = nullptr;
  std::vector<hmc_xfer_desc_t> bad = writes;
  bad[7].remote_offset = kXferRegionSize - kXferBlock + 1;  // one byte past the end
  EXPECT_EQ(
      hmc_xfer_prepare(src_region.get(), rem.get(), HMC_XFER_WRITE, bad.data(), bad.size(), &list),
      HMC_ERR_OUT_OF_BOUNDS);
  EXPECT_NE(std::string(hmc_last_error()).find("descriptor 7"), std::string::npos)
      << hmc_last_error();
  EXPECT_EQ(list, nullptr);
  bad = writes;
  bad[3].local_offset = UINT64_MAX - 10;  // overflowing
  EXPECT_EQ(
      hmc_xfer_prepare(src_region.get(), rem.get(), HMC_XFER_WRITE, bad.data(), bad.size(), &list),
      HMC_ERR_OUT_OF_BOUNDS);
  hmc_xfer_desc_t empty{0, 0, 0};
  EXPECT_EQ(hmc_xfer_prepare(src_region.get(), rem.get(), HMC_XFER_WRITE, &empty, 1, &list),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_xfer_prepare(src_region.get(), rem.get(), static_cast<hmc_xfer_op_t>(7),
                             writes.data(), writes.size(), &list),
            HMC_ERR_INVALID_ARGUMENT);

  // The write list, posted twice (the second time without a notification: the same bytes).
  ASSERT_EQ(hmc_xfer_prepare(src_region.get(), rem.get(), HMC_XFER_WRITE, writes.data(),
                             writes.size(), &list),
            HMC_SUCCESS)
      << hmc_last_error();
  uint64_t total = 0;
  for (const auto& d : writes) total += d.size;
  size_t moved = 0;
  ASSERT_EQ(post_and_wait(list, HMC_XFER_NOTIFY, kXferWriteNote, &err, &moved), HMC_SUCCESS) << err;
  EXPECT_EQ(moved, total);
  ASSERT_EQ(post_and_wait(list, 0, 0, &err), HMC_SUCCESS) << err;
  EXPECT_EQ(hmc_xfer_release(list), HMC_SUCCESS);
  EXPECT_EQ(hmc_xfer_release(list), HMC_ERR_INVALID_HANDLE);
  uint64_t ack = 0;
  ASSERT_NO_FATAL_FAILURE(recv_ctrl(c.peer, kTagCtrl + 1, &ack));  // the target checked it
  EXPECT_EQ(ack, kCtrlAck);

  // Read back into other places; the list is released while its post still runs.
  std::vector<hmc_xfer_desc_t> reads = xfer_read_list();
  ASSERT_EQ(hmc_xfer_prepare(dst_region.get(), rem.get(), HMC_XFER_READ, reads.data(), reads.size(),
                             &list),
            HMC_SUCCESS)
      << hmc_last_error();
  hmc_request_t req = nullptr;
  ASSERT_EQ(hmc_xfer_post(list, HMC_XFER_NOTIFY, kXferReadNote, &req), HMC_SUCCESS)
      << hmc_last_error();
  EXPECT_EQ(hmc_xfer_release(list), HMC_SUCCESS);
  ASSERT_EQ(finish(req, kOpTimeoutMs), HMC_SUCCESS) << hmc_last_error();
  std::vector<uint8_t> image = GuardedMem::initial_image(kXferRegionSize, kXferInitSeed);
  apply_xfer_writes(&image);
  std::vector<uint8_t> want(kXferRegionSize, 0x5A);
  for (const auto& d : reads)
    memcpy(want.data() + d.local_offset, image.data() + kGuard + d.remote_offset, d.size);
  EXPECT_EQ(bytes_check(dst.data(), want.data(), kXferRegionSize), "");

  // Many small ranges (more than one chunk of a vectored get where the plugin offers them),
  // from all over the target, into ranges of dst that never touch.
  std::vector<hmc_xfer_desc_t> small;
  for (uint64_t i = 0; i < 600; ++i)
    small.push_back(
        {i * 100, (i * 1721) % (kXferRegionSize - 64), i % 7 == 3 ? uint64_t{1} : uint64_t{64}});
  memset(dst.data(), 0x5A, kXferRegionSize);
  ASSERT_EQ(hmc_xfer_prepare(dst_region.get(), rem.get(), HMC_XFER_READ, small.data(), small.size(),
                             &list),
            HMC_SUCCESS)
      << hmc_last_error();
  moved = 0;
  ASSERT_EQ(post_and_wait(list, 0, 0, &err, &moved), HMC_SUCCESS) << err;
  EXPECT_EQ(hmc_xfer_release(list), HMC_SUCCESS);
  want.assign(kXferRegionSize, 0x5A);
  total = 0;
  for (const auto& d : small) {
    memcpy(want.data() + d.local_offset, image.data() + kGuard + d.remote_offset, d.size);
    total += d.size;
  }
  EXPECT_EQ(moved, total);
  EXPECT_EQ(bytes_check(dst.data(), want.data(), kXferRegionSize), "");

  ASSERT_NO_FATAL_FAILURE(send_ctrl(c.peer, kTagCtrl, kCtrlDone));
  ASSERT_NO_FATAL_FAILURE(recv_ctrl(c.peer, kTagCtrl + 1, &ack));
  EXPECT_EQ(ack, kCtrlAck);
  expect_exit_ok(&c);
}

}  // namespace
}  // namespace hmc_test
