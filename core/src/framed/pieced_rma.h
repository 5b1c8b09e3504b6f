// Puts and gets in pieces: one local range to or from remote memory through bounce buffers
// where the path cannot reach local device memory (put: device-to-host copy, then iput; get:
// iget, then host-to-device copy), and the ranges of a transfer list (hmc_xfer_post) directly,
// through bounces, or as vectored puts and gets (iput_v/iget_v) of many ranges each. The target
// sees ordinary puts and gets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "framed/framed_transfer.h"
#include "hmc/plugin/net.h"

namespace hmc {

// A range of a transfer: `len` bytes at `local` (bytes from the transfer's local base) and at
// `remote_addr` (the remote registration's address space).
struct RmaSpan {
  uint64_t local = 0;
  uint64_t remote_addr = 0;
  uint64_t len = 0;
};

// A transfer list's ranges as the pieces of vectored puts or gets (net.h iput_v/iget_v), made
// once at hmc_xfer_prepare for a path that reaches the local memory directly (registered as `mr`,
// or by pointer where mr is null) and posted as they are: nothing is computed per range at post.
// The pieces are cut into chunks of at most kVecChunkPieces pieces and kVecChunkBytes bytes (a
// longer single range is a chunk of its own), one plugin request each: few enough requests that
// a list of a thousand blocks costs a handful of calls, enough of them that a long list keeps
// several in flight and the plugin's own limits (an iovec array per system call, a queue pair's
// scatter-gather entries and depth) are met in a few steps of its own.
struct VecPieces {
  static constexpr size_t kVecChunkPieces = 256;
  static constexpr uint64_t kVecChunkBytes = uint64_t{4} << 20;
  struct Chunk {
    size_t first = 0;  // index of its first piece in iov
    size_t count = 0;
    uint64_t bytes = 0;
  };
  hmc_net_mr_t* mr = nullptr;
  std::vector<hmc_net_iov_t> iov;
  std::vector<Chunk> chunks;
};

// The vectored form of `spans` from local memory at `base`, registered as `mr` (or null).
std::shared_ptr<const VecPieces> make_vec_pieces(void* base, const std::vector<RmaSpan>& spans,
                                                 hmc_net_mr_t* mr);

class PiecedRma final : public FramedTransfer {
 public:
  // One range of local device memory through bounces. `addr`, `rkey`: the remote registration's
  // address of the first byte, and its key.
  static std::unique_ptr<PiecedRma> put(const void* buf, size_t size, uint64_t addr,
                                        hmc_net_rkey_t* rkey, uint64_t chunk);
  static std::unique_ptr<PiecedRma> get(void* buf, size_t size, uint64_t addr, hmc_net_rkey_t* rkey,
                                        uint64_t chunk);
  // The spans of a transfer list from local memory at `base`: through bounces of `chunk` bytes
  // when `staged`, else each span straight from its registration `mr` (nullptr where the path
  // needs none). The spans are shared with the list, which may be released first.
  static std::unique_ptr<PiecedRma> list(bool put, void* base,
                                         std::shared_ptr<const std::vector<RmaSpan>> spans,
                                         uint64_t total, hmc_net_rkey_t* rkey, uint64_t chunk,
                                         bool staged, hmc_net_mr_t* mr);
  // A transfer list's chunks of pieces (make_vec_pieces), one iput_v/iget_v each. The plugin
  // offers the slot; the pieces are shared with the list.
  static std::unique_ptr<PiecedRma> vectored(bool put, std::shared_ptr<const VecPieces> vec,
                                             uint64_t total, hmc_net_rkey_t* rkey);
  bool started() const override { return next_span_ > 0 || next_offset_ > 0; }

 private:
  PiecedRma(bool put, void* base, uint64_t total, hmc_net_rkey_t* rkey, uint64_t chunk, bool staged,
            hmc_net_mr_t* mr);
  bool step(Request* req, Peer& peer, const StageEnv& env) override;
  bool issue_pieces(Peer& peer, const StageEnv& env);
  bool issue_chunks(Peer& peer);
  bool all_issued() const;
  // The next piece's local offset, remote address and length; false when all were issued.
  bool next_piece(size_t* local, uint64_t* remote, size_t* len) const;
  void advance_cursor(size_t len);

  bool put_;  // else a get
  hmc_net_rkey_t* rkey_;
  uint64_t chunk_;
  bool staged_;       // through bounce buffers; else straight from the user's memory
  hmc_net_mr_t* mr_;  // the user's memory's registration on the path (direct only)
  RmaSpan single_;    // the span of put()/get()
  std::shared_ptr<const std::vector<RmaSpan>> spans_;  // a list's; null for put()/get()
  std::shared_ptr<const VecPieces> vec_;               // a vectored list's; else null
  size_t next_span_ = 0;      // the span (vectored: the chunk) the next piece comes from
  uint64_t next_offset_ = 0;  // and where in it
  size_t issued_ = 0;         // pieces issued so far (their index)
};

}  // namespace hmc
