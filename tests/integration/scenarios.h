// The scenarios that the tests (parent) and hmc-test-peer (child) play together: their names,
// tags, seeds, sizes and layouts. Both sides compile this one definition, so an expected image
// of memory computed by one side is the image the other side produced.
//
// Conventions: the parent is the test process (it accepts), the child is hmc-test-peer (it
// connects). Control values travel as 8-byte messages on tags from kTagCtrl up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "harness.h"
#include "hmc/hmc.h"

namespace hmc_test {

// hmc-test-peer <scenario> <parent address, hex> [key=value ...]
namespace scenario {
constexpr const char* kHello = "hello";             // exchange one value; check peer info
constexpr const char* kEchoSizes = "echo-sizes";    // sizes=a,b,c: receive each, send one back
constexpr const char* kOrdering = "ordering";       // receives posted before/after; tag order
constexpr const char* kTruncate = "truncate";       // too-small receive buffers, both sides
constexpr const char* kConcurrent = "concurrent";   // count=N sends+recvs in flight at once
constexpr const char* kRmaTarget = "rma-target";    // registers; parent puts/gets (+notify)
constexpr const char* kXferTarget = "xfer-target";  // registers; parent writes/reads lists
// size=N: registers N bytes, then SIGKILLs itself 20 ms after kCtrlGo, under the parent's reads
constexpr const char* kXferTargetDie = "xfer-target-die";
constexpr const char* kNotifyInitiator = "notify-initiator";  // imports parent's; puts+notify
constexpr const char* kBoundsTarget = "bounds-target";        // registers regions the parent abuses
constexpr const char* kDieMidSend = "die-mid-send";           // size=N: SIGKILLs itself mid-send
constexpr const char* kEcho = "echo";                         // echoes one value and one message
constexpr const char* kConnectExpect = "connect-expect";      // status=N: hmc_connect must return N
constexpr const char* kSendThenClose =
    "send-then-close";  // set=small|mixed:     // sends, then closes at once
constexpr const char* kWithdrawInitiator =
    "withdraw-initiator";  // puts into parent's until refused
// count=N release=i how=die|idle: imports N parent regions (releasing region i right after its
// import), acks, then SIGKILLs itself (die) or stops calling hmc (idle; with progress-thread=0).
constexpr const char* kImportThenStop = "import-then-stop";
}  // namespace scenario

// Timeouts (ms). Generous: loaded CI machines with 2 cores; every wait is still bounded.
constexpr int kConnectTimeoutMs = 20000;
constexpr int kOpTimeoutMs = 60000;
constexpr int kPeerExitTimeoutMs = 120000;
constexpr unsigned kPeerAlarmSeconds = 240;  // the peer's own backstop

// Tags. User tags must be below HMC_TAG_MAX.
constexpr uint64_t kTagCtrl = (uint64_t)1 << 58;  // + n: control values (below HMC_TAG_MAX)
constexpr uint64_t kTagDesc = kTagCtrl + 100;     // + n: region descriptors
// The parent's last word: every scenario ends with the child receiving it, so that the child's
// close never races a message it sent last (that race has its own test, kSendThenClose).
constexpr uint64_t kTagBye = kTagCtrl + 200;
constexpr uint64_t kCtrlBye = 0xB1E;
constexpr uint64_t kTagData = 1000;     // + n: parent -> child data
constexpr uint64_t kTagReply = 500000;  // + n: child -> parent data

// Seeds of the data each side sends: parent sends item i with kSeedParent + i, child replies
// with kSeedChild + i.
constexpr uint64_t kSeedParent = 0x1000;
constexpr uint64_t kSeedChild = 0x2000;

// --- send/recv sizes -----------------------------------------------------------------------
constexpr size_t kMiB = (size_t)1 << 20;
constexpr size_t kGiB = (size_t)1 << 30;
// Echo buffers from this size on are populated up front (HostBuffer::prefault), on both sides.
constexpr size_t kPrefaultFrom = 64 * kMiB;

// ordering: messages the child receives with the receive posted first ("recv-before-send")
// and messages it receives after the parent sent them, posted in another order than sent.
inline const std::vector<size_t>& ordering_early_sizes() {
  static const std::vector<size_t> v{1, kMiB + 3};
  return v;
}
struct TaggedSize {
  uint64_t tag;
  size_t size;
};
// Sent in this order; received by the other side in ordering_late_recv_order().
inline const std::vector<TaggedSize>& ordering_late_messages() {
  static const std::vector<TaggedSize> v{
      {0, 7}, {HMC_TAG_MAX - 1, kMiB + 3}, {0xFFFFFFFFFFFull, 4096}, {42, 0}, {43, 64}};
  return v;
}
inline const std::vector<size_t>& ordering_late_recv_order() {
  static const std::vector<size_t> v{2, 4, 1, 0, 3};
  return v;
}
// ordering, late: one side's sends of ordering_late_messages(), all posted at once on `peer`,
// message i carrying the pattern of seed + i; request i is message i's.
struct OrderingLateSends {
  OrderingLateSends(hmc_peer_t peer, uint64_t seed) {
    const auto& late = ordering_late_messages();
    for (size_t i = 0; i < late.size(); ++i) {
      bufs.emplace_back(late[i].size);
      pattern_fill(bufs[i].data(), late[i].size, seed + i);
    }
    for (size_t i = 0; i < late.size(); ++i) {
      rq.post([&](hmc_request_t* posted) {
        return hmc_send(peer, bufs[i].data(), late[i].size, late[i].tag, posted);
      });
    }
  }
  std::vector<HostBuffer> bufs;
  Requests rq;  // after the buffers: what is still in flight ends before they are freed
};

// concurrent: the size of message i.
inline size_t concurrent_size(size_t i) {
  static const size_t table[] = {0, 1, 7, 64, 4096, 65537, 262147, kMiB + 3};
  return table[i % (sizeof table / sizeof table[0])];
}
constexpr size_t kConcurrentCount = 1000;

// concurrent: one side's `count` receives and `count` sends of concurrent_size(i) bytes, packed
// one after another in `in` and `out`, all posted at once: receive i tagged recv_tag + i, then
// send i tagged send_tag + i carrying the pattern of send_seed + i. Requests 0..count-1 are the
// receives, count..2*count-1 the sends.
struct ConcurrentExchange {
  static std::vector<size_t> offsets(size_t count) {
    std::vector<size_t> off(count + 1, 0);
    for (size_t i = 0; i < count; ++i) off[i + 1] = off[i] + concurrent_size(i);
    return off;
  }
  ConcurrentExchange(hmc_peer_t peer, size_t count, uint64_t recv_tag, uint64_t send_tag,
                     uint64_t send_seed)
      : off(offsets(count)), in(off[count]), out(off[count]) {
    in.prefault();
    out.prefault();
    for (size_t i = 0; i < count; ++i)
      pattern_fill(out.data() + off[i], concurrent_size(i), send_seed + i);
    for (size_t i = 0; i < count; ++i) {
      rq.post([&](hmc_request_t* posted) {
        return hmc_recv(peer, in.data() + off[i], concurrent_size(i), recv_tag + i, posted);
      });
    }
    for (size_t i = 0; i < count; ++i) {
      rq.post([&](hmc_request_t* posted) {
        return hmc_send(peer, out.data() + off[i], concurrent_size(i), send_tag + i, posted);
      });
    }
  }
  std::vector<size_t> off;  // message i at [off[i], off[i + 1])
  HostBuffer in, out;
  Requests rq;  // after the buffers: what is still in flight ends before they are freed
};

// send-then-close: on kCtrlGo the child sends these (tag kTagReply + i, seed kSeedChild + i)
// and closes the peer and its context as soon as the sends complete; all must arrive. The
// small set completes without a posted receive (eager), so the parent may receive it after the
// child has exited; the mixed set has a rendezvous-sized message.
inline const std::vector<size_t>& send_then_close_sizes(bool small) {
  static const std::vector<size_t> mixed{8, 4096, kMiB + 3, 0, 8};
  static const std::vector<size_t> eager{8, 0, 64};
  return small ? eager : mixed;
}

// --- truncation ----------------------------------------------------------------------------
// Each case: the sender sends `sent` bytes, the receiver posts `posted` (< sent), with guard
// bytes after the posted size that must stay untouched.
struct TruncCase {
  uint64_t tag;
  size_t sent;
  size_t posted;
};
inline const std::vector<TruncCase>& truncate_to_child() {
  static const std::vector<TruncCase> v{{kTagData + 1, 4096, 100}, {kTagData + 2, kMiB + 3, kMiB}};
  return v;
}
inline const std::vector<TruncCase>& truncate_to_parent() {
  static const std::vector<TruncCase> v{{kTagReply + 1, kMiB + 3, kMiB},
                                        {kTagReply + 2, 4096, 100}};
  return v;
}
constexpr size_t kGuard = 4096;
constexpr uint8_t kGuardByte = 0xA5;

// --- one-sided -----------------------------------------------------------------------------
// A region lives inside an allocation with kGuard bytes on each side; the whole allocation
// starts as pattern(seed) over its own offsets, so guards and region are checked alike.
struct Op {
  uint64_t offset;  // into the region
  size_t size;
  uint64_t seed;  // pattern of the data, logical offset = offset
};

// rma-target: the region the child registers, the puts the parent makes (in this order, each
// finished before the next) and the gets it checks afterwards.
constexpr size_t kRmaRegionSize = 8 * kMiB + 5;
constexpr uint64_t kRmaInitSeed = 0x3000;
inline const std::vector<Op>& rma_puts() {
  static const std::vector<Op> v{
      {0, kRmaRegionSize, 0x3100},      // the whole region
      {0, 1, 0x3101},                   // first byte
      {7, 4096, 0x3102},                // unaligned page
      {kRmaRegionSize - 3, 3, 0x3103},  // last bytes
      {4095, kMiB + 3, 0x3104},         // crosses pages, odd size
      {kRmaRegionSize / 2, 2 * kMiB, 0x3105},
  };
  return v;
}
inline const std::vector<Op>& rma_gets() {
  static const std::vector<Op> v{
      {0, kRmaRegionSize, 0}, {kRmaRegionSize - 1, 1, 0}, {12345, 777777, 0}, {8, 4096, 0}};
  return v;
}
// Then puts with HMC_PUT_NOTIFY (value kNotifyBase + k), posted back to back.
constexpr uint64_t kNotifyBase = 0xC0FFEE00000ull;
inline const std::vector<Op>& rma_notify_puts() {
  // Disjoint ranges: when notification k is read, later puts may already have landed.
  static const std::vector<Op> v{{64, 3 * kMiB, 0x3200},
                                 {5 * kMiB, 2 * kMiB + 1, 0x3201},
                                 {1, 1, 0x3202},
                                 {3 * kMiB + 100, 4096, 0x3203}};
  return v;
}

// notify-initiator: the parent registers a region of kNotifySlots slots; the child puts slot k
// with notify value kNotifyBase + k, all back to back; the parent sees them in order.
constexpr size_t kNotifySlots = 500;
inline size_t notify_slot_size(size_t k) {
  return k % 50 == 7 ? kMiB + 3 : 1000 + k % 7;
}
inline uint64_t notify_slot_offset(size_t k) {
  uint64_t off = 0;
  for (size_t i = 0; i < k; ++i) off += notify_slot_size(i);
  return off;
}
inline uint64_t notify_region_size() {
  return notify_slot_offset(kNotifySlots);
}
constexpr uint64_t kNotifySeed = 0x4000;  // slot k: seed kNotifySeed + k

// bounds-target: four regions, each inside its own guarded allocation.
enum BoundsRegion { kRw = 0, kRo = 1, kWo = 2, kDereg = 3, kBoundsRegions = 4 };
inline uint32_t bounds_access(int r) {
  switch (r) {
    case kRw: return HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE;
    case kRo: return HMC_ACCESS_REMOTE_READ;
    case kWo: return HMC_ACCESS_REMOTE_WRITE;
    default: return HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE;
  }
}
// Odd sizes, so that a test can find the size inside a packed descriptor.
inline size_t bounds_size(int r) {
  return r == kRw || r == kRo ? 64 * 1024 + 37 : 4096 + 3;
}
inline uint64_t bounds_seed(int r) {
  return 0x5000 + r;
}
// The only puts the parent makes that must succeed (all others must be refused).
inline const std::vector<std::pair<int, Op>>& bounds_good_puts() {
  static const std::vector<std::pair<int, Op>> v{{kRw, {100, 16, 0x5100}},
                                                 {kWo, {0, 4096 + 3, 0x5101}}};
  return v;
}
// Handshake values on kTagCtrl.
constexpr uint64_t kCtrlDeregister = 0xDE;  // parent -> child: deregister kDereg, then ack
constexpr uint64_t kCtrlAck = 0xAC;
constexpr uint64_t kCtrlDone = 0xD0;  // parent -> child: verify memory and exit
constexpr uint64_t kCtrlGo = 0x60;

// withdraw-initiator: the parent registers one region and sends its descriptor; the child keeps
// kWithdrawDepth puts of the whole region in flight (put i writes pattern kWithdrawSeed + i),
// says kCtrlGo on kTagCtrl once one landed, and goes on until a put is refused (the parent
// deregistered meanwhile); then a fresh put and get must be refused too, and it reports the
// number of puts that succeeded on kTagCtrl + 2.
constexpr size_t kWithdrawRegionSize = 256 * 1024 + 7;
constexpr uint64_t kWithdrawInitSeed = 0x6000;
constexpr uint64_t kWithdrawSeed = 0x6100;
constexpr int kWithdrawDepth = 4;
constexpr int kWithdrawRefusedWithinMs = 30000;  // the child's bound on its wait for the refusal
constexpr uint64_t kCtrlImported = 0x1A;  // import-then-stop: child -> parent, regions imported

// xfer-target: the child registers a region (kXferInitSeed); the parent writes blocks of its own
// region (pattern kXferSeed over its offsets) into it with one transfer list, notifying
// kXferWriteNote; the child checks every byte and says kCtrlAck on kTagCtrl + 1; the parent
// reads blocks back into a second region with another list, notifying kXferReadNote, and
// checks them; then kCtrlDone / kCtrlAck as in rma-target.
constexpr size_t kXferBlock = 16 * 1024;
constexpr size_t kXferRegionSize = 64 * kXferBlock + 3;
constexpr uint64_t kXferInitSeed = 0x7000;
constexpr uint64_t kXferSeed = 0x7100;
constexpr uint64_t kXferWriteNote = 0x7E57;
constexpr uint64_t kXferReadNote = 0x7EAD;
// Blocks scattered over the target in a scrambled order, a run adjacent on both sides (merged
// into one range), an empty block, and the region's odd last bytes.
inline std::vector<hmc_xfer_desc_t> xfer_write_list() {
  std::vector<hmc_xfer_desc_t> v;
  for (uint64_t k = 0; k < 40; ++k)
    v.push_back({k * kXferBlock, ((k * 37) % 48) * kXferBlock, kXferBlock});
  for (uint64_t k = 48; k < 56; ++k) v.push_back({k * kXferBlock, k * kXferBlock, kXferBlock});
  v.push_back({56 * kXferBlock, 60 * kXferBlock, 0});
  v.push_back({kXferRegionSize - 3, kXferRegionSize - 3, 3});
  return v;
}
// What the list does to the image of the target's GuardedMem.
inline void apply_xfer_writes(std::vector<uint8_t>* image) {
  for (const auto& d : xfer_write_list())
    pattern_fill(image->data() + kGuard + d.remote_offset, d.size, kXferSeed, d.local_offset);
}
// Reads back: target block b into local block 63 - b, for b < 56, and the last bytes.
inline std::vector<hmc_xfer_desc_t> xfer_read_list() {
  std::vector<hmc_xfer_desc_t> v;
  for (uint64_t b = 0; b < 56; ++b)
    v.push_back({(63 - b) * kXferBlock, b * kXferBlock, kXferBlock});
  v.push_back({kXferRegionSize - 3, kXferRegionSize - 3, 3});
  return v;
}

// Memory for a region: kGuard bytes, the region, kGuard bytes; all of it starts as
// pattern(seed) over offsets into the allocation, so guards and region are checked alike.
struct GuardedMem {
  std::vector<uint8_t> mem;
  size_t size;

  GuardedMem(size_t region_size, uint64_t seed) : mem(region_size + 2 * kGuard), size(region_size) {
    pattern_fill(mem.data(), mem.size(), seed);
  }
  uint8_t* region() { return mem.data() + kGuard; }
  static std::vector<uint8_t> initial_image(size_t region_size, uint64_t seed) {
    std::vector<uint8_t> v(region_size + 2 * kGuard);
    pattern_fill(v.data(), v.size(), seed);
    return v;
  }
};

// The data of a put: pattern(op.seed) at logical offsets op.offset.. (so a put that landed at
// the wrong offset does not match).
inline void fill_op(void* buf, const Op& op) {
  pattern_fill(buf, op.size, op.seed, op.offset);
}
// What a successful put does to the image of a GuardedMem.
inline void apply_op(std::vector<uint8_t>* image, const Op& op) {
  pattern_fill(image->data() + kGuard + op.offset, op.size, op.seed, op.offset);
}

}  // namespace hmc_test
