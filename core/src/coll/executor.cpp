#include "coll/executor.h"

#include <algorithm>
#include <cstring>

#include "coll/reduce.h"
#include "coll/staged_reduce.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/transfers.h"

namespace hmc::coll {

uint64_t coll_tag(uint64_t comm_id, CollKind kind, uint32_t seq, uint32_t step, uint32_t pos) {
  static_assert(uint32_t(CollKind::AllReduce) < (1u << kTagKindBits), "kinds fit their bits");
  uint64_t comm = (comm_id ^ (comm_id >> 16) ^ (comm_id >> 32) ^ (comm_id >> 48)) &
                  ((uint64_t(1) << kTagCommBits) - 1);
  uint64_t t = comm;
  t = t << kTagKindBits | uint64_t(kind);
  t = t << kTagSeqBits | (seq & ((uint64_t(1) << kTagSeqBits) - 1));
  t = t << kTagStepBits | step;
  t = t << kTagPosBits | pos;
  return kCollTagBit | t;
}

Execution::Execution(Transfers& transfers, CollServices& services,
                     std::shared_ptr<Communicator> comm, Schedule schedule, const CollArgs& args,
                     const Buffers& buffers, uint32_t seq, Request* req, std::string what)
    : transfers_(transfers),
      services_(services),
      comm_(std::move(comm)),
      schedule_(std::move(schedule)),
      args_(args),
      buffers_(buffers),
      seq_(seq),
      req_(req),
      what_(std::move(what)),
      scratch_(schedule_.scratch_bytes) {
  input_host_ = !buffers_.input || services_.host_memory(buffers_.input);
  output_host_ = !buffers_.output || services_.host_memory(buffers_.output);
}

Execution::~Execution() {
  // Only ended executions are destroyed, and those have no transfer outstanding.
  for (auto& p : posted_)
    if (p.req) RequestTable::release(p.req);
}

std::vector<uint8_t> Execution::take_buffer(uint64_t bytes) {
  auto& spare = comm_->spare_buffers;
  std::vector<uint8_t> b;
  if (!spare.empty()) {
    b = std::move(spare.back());
    spare.pop_back();
  }
  if (b.size() < bytes) b.resize(bytes);
  return b;
}

void Execution::give_back(std::vector<uint8_t> buffer) {
  if (!buffer.empty()) comm_->spare_buffers.push_back(std::move(buffer));
}

namespace {

// A step's only transfer with a peer in one direction, when it is at least two pieces long, goes
// in pieces of this size (at most kMaxPieces of them, each a multiple of 4 KiB so of every
// datatype): a received piece is reduced as soon as it has arrived, while the next ones are on
// their way, and is still in the caches when it is reduced.
constexpr uint64_t kPieceBytes = 256 * 1024;
constexpr uint64_t kMaxPieces = 32;

}  // namespace

uint64_t piece_bytes(uint64_t bytes) {
  if (bytes < 2 * kPieceBytes) return bytes;
  uint64_t piece = std::max(kPieceBytes, (bytes + kMaxPieces - 1) / kMaxPieces);
  return (piece + 4095) / 4096 * 4096;
}

uint8_t* Execution::at(const Range& r) {
  switch (r.buffer) {
    case Buffer::Input:
      return const_cast<uint8_t*>(static_cast<const uint8_t*>(buffers_.input)) + r.offset;
    case Buffer::Output: return static_cast<uint8_t*>(buffers_.output) + r.offset;
    case Buffer::Scratch: return scratch_.data() + r.offset;
  }
  return nullptr;
}

bool Execution::host(Buffer b) const {
  if (b == Buffer::Input) return input_host_;
  if (b == Buffer::Output) return output_host_;
  return true;
}

hmc_status_t Execution::reduce(uint8_t* dst, Buffer db, const uint8_t* src, uint64_t bytes) {
  size_t n = bytes / dtype_size(args_.dtype);
  if (host(db)) return reduce_into(dst, src, n, args_.dtype, args_.op);
  return reduce_memory(services_.device_registry(), dst, src, n, args_.dtype, args_.op);
}

hmc_status_t Execution::local(const Action& a) {
  uint8_t* dst = at(a.dst);
  uint8_t* src = at(a.src);
  if (a.kind == ActionKind::Copy) {
    if (dst == src) return HMC_SUCCESS;
    if (host(a.dst.buffer) && host(a.src.buffer)) {
      memmove(dst, src, a.bytes);
      return HMC_SUCCESS;
    }
    return services_.copy(dst, src, a.bytes);
  }
  if (host(a.src.buffer)) return reduce(dst, a.dst.buffer, src, a.bytes);
  return reduce_memory(services_.device_registry(), dst, src, a.bytes / dtype_size(args_.dtype),
                       args_.dtype, args_.op);
}

hmc_status_t Execution::start_step() {
  const Step& step = schedule_.steps[step_];
  posted_.clear();
  reduce_next_ = 0;
  for (const Action& a : step.actions) {
    if (a.bytes == 0) continue;
    if (a.kind == ActionKind::Copy || a.kind == ActionKind::Reduce) {
      hmc_status_t st = local(a);
      if (st != HMC_SUCCESS)
        return record_failure(
            st, fmt::format("{}: step {}: local {}: {}", what_, step_,
                            a.kind == ActionKind::Copy ? "copy" : "reduction", last_error()));
    }
  }
  // How many transfers the step has with each peer in each direction: the only one of its kind
  // goes in pieces when it is large (both sides count the same, so both cut it the same).
  std::vector<uint32_t> sends(size_t(comm_->size), 0), recvs(size_t(comm_->size), 0);
  for (const Action& a : step.actions) {
    if (a.bytes == 0 || a.kind == ActionKind::Copy || a.kind == ActionKind::Reduce) continue;
    (a.kind == ActionKind::Send ? sends : recvs)[size_t(a.peer)]++;
  }
  std::vector<bool> single_send(size_t(comm_->size)), single_recv(size_t(comm_->size));
  for (size_t k = 0; k < sends.size(); ++k) {
    single_send[k] = sends[k] == 1;
    single_recv[k] = recvs[k] == 1;
  }
  // Position of each piece among this step's transfers with the same peer and direction: the
  // other side lists its matching ones in the same order.
  std::fill(sends.begin(), sends.end(), 0);
  std::fill(recvs.begin(), recvs.end(), 0);
  for (const Action& a : step.actions) {
    if (a.bytes == 0 || a.kind == ActionKind::Copy || a.kind == ActionKind::Reduce) continue;
    bool is_send = a.kind == ActionKind::Send;
    uint64_t piece = a.bytes;
    if ((is_send ? single_send : single_recv)[size_t(a.peer)]) piece = piece_bytes(a.bytes);
    for (uint64_t off = 0; off < a.bytes; off += piece) {
      uint64_t len = std::min(piece, a.bytes - off);
      uint32_t pos = is_send ? sends[size_t(a.peer)]++ : recvs[size_t(a.peer)]++;
      if (pos >= (1u << kTagPosBits))
        return record_failure(HMC_ERR_INTERNAL,
                              fmt::format("{}: step {} has more than {} transfers with rank {}",
                                          what_, step_, 1u << kTagPosBits, a.peer));
      // The sender's tag names its own rank's view: the step and position are the same on both
      // sides, so either side's numbers make the tag.
      uint64_t tag = coll_tag(comm_->id, args_.kind, seq_, uint32_t(step_), pos);
      Peer* peer = comm_->peers[size_t(a.peer)].get();
      Posted p;
      p.action = &a;
      p.offset = off;
      p.bytes = len;
      hmc_status_t st;
      if (is_send) {
        st = transfers_.post_send(peer, at(a.src) + off, len, tag, &p.req);
      } else if (a.kind == ActionKind::Recv) {
        st = transfers_.post_recv(peer, at(a.dst) + off, len, tag, &p.req);
      } else {
        p.received = take_buffer(len);
        st = transfers_.post_recv(peer, p.received.data(), len, tag, &p.req);
      }
      if (st != HMC_SUCCESS) {
        std::string text = last_error();
        return record_failure(st,
                              fmt::format("{}: step {}: {} rank {}: {}", what_, step_,
                                          is_send ? "sending to" : "receiving from", a.peer, text));
      }
      posted_.push_back(std::move(p));
    }
  }
  step_started_ = true;
  return HMC_SUCCESS;
}

hmc_status_t Execution::reduce_arrived() {
  for (; reduce_next_ < posted_.size(); ++reduce_next_) {
    Posted& p = posted_[reduce_next_];
    if (p.action->kind != ActionKind::RecvReduce) continue;
    if (!p.arrived) break;
    // Not while a send of this step still reads the bytes it would change (recursive doubling
    // sends and reduces the same buffer; a single-copy path reads the sender's memory late).
    const uint8_t* lo = at(p.action->dst) + p.offset;
    const uint8_t* hi = lo + p.bytes;
    for (const Posted& q : posted_) {
      if (q.action->kind != ActionKind::Send || !q.req) continue;
      const uint8_t* slo = at(q.action->src) + q.offset;
      if (slo < hi && lo < slo + q.bytes) return HMC_SUCCESS;
    }
    hmc_status_t st =
        reduce(at(p.action->dst) + p.offset, p.action->dst.buffer, p.received.data(), p.bytes);
    give_back(std::move(p.received));
    p.reduced = true;
    if (st != HMC_SUCCESS)
      return record_failure(st, fmt::format("{}: step {}: reducing what rank {} sent: {}", what_,
                                            step_, p.action->peer, last_error()));
  }
  return HMC_SUCCESS;
}

hmc_status_t Execution::finish_step() {
  for (auto& p : posted_) {
    if (p.action->kind != ActionKind::RecvReduce || p.reduced) continue;
    hmc_status_t st =
        reduce(at(p.action->dst) + p.offset, p.action->dst.buffer, p.received.data(), p.bytes);
    give_back(std::move(p.received));
    if (st != HMC_SUCCESS)
      return record_failure(st, fmt::format("{}: step {}: reducing what rank {} sent: {}", what_,
                                            step_, p.action->peer, last_error()));
  }
  posted_.clear();
  reduce_next_ = 0;
  step_started_ = false;
  ++step_;
  return HMC_SUCCESS;
}

bool Execution::advance() {
  if (ended_) return false;
  if (gate_) {
    hmc_status_t st;
    if (!gate_->passed(&st)) return false;
    gate_.reset();
    if (st != HMC_SUCCESS) {
      std::string why = last_error();
      record_failure(st, why);
      end(st, why);
      return true;
    }
  }
  bool busy = false;
  for (;;) {
    // Collect what ended; a failure waits for the rest to end (it fails the connections, so they
    // do), then ends the collective.
    bool all_done = true;
    for (auto& p : posted_) {
      if (!p.req) continue;
      if (!p.req->done.load(std::memory_order_acquire)) {
        all_done = false;
        continue;
      }
      busy = true;
      bool is_recv = p.action->kind != ActionKind::Send;
      // A message of another size than the schedule says: the ranks disagree on the counts
      // (the sizes on the wire are the only view of the other rank's arguments).
      if (is_recv && failure_ == HMC_SUCCESS &&
          ((p.req->status == HMC_SUCCESS && p.req->bytes != p.bytes) ||
           p.req->status == HMC_ERR_TRUNCATED)) {
        record_failure(
            HMC_ERR_PROTOCOL,
            fmt::format("{}: step {}: rank {} sent {} bytes where this rank expected {}: "
                        "the ranks' counts (or collectives) disagree",
                        what_, step_, p.action->peer, p.req->bytes, p.bytes));
      } else if (p.req->status == HMC_SUCCESS) {
        if (is_recv) received_bytes_ += p.req->bytes;
        p.arrived = true;
      } else if (failure_ == HMC_SUCCESS) {
        hmc_status_t st = p.req->status;
        // A transfer cut by a connection dropped on either side (a rank giving up the collective
        // drops its connections: its pending messages end as refused or aborted here) is a lost
        // rank to the collective.
        if (st == HMC_ERR_CANCELLED || st == HMC_ERR_REMOTE) st = HMC_ERR_PEER_LOST;
        record_failure(
            st, fmt::format("{}: step {}: {} rank {}: {}", what_, step_,
                            p.action->kind == ActionKind::Send ? "sending to" : "receiving from",
                            p.action->peer, p.req->error));
      }
      RequestTable::release(p.req);
      p.req = nullptr;
    }
    if (failure_ == HMC_SUCCESS) reduce_arrived();
    if (!all_done) return busy;
    if (failure_ != HMC_SUCCESS) {
      end(failure_, failure_text_);
      return true;
    }
    if (step_started_ && finish_step() != HMC_SUCCESS) continue;  // (failure_ is set)
    if (step_ >= schedule_.steps.size()) break;
    busy = true;
    if (start_step() != HMC_SUCCESS) continue;
  }
  if (schedule_.divide_by_size && buffers_.output_elements) {
    hmc_status_t st;
    if (output_host_) {
      st = finish_average(buffers_.output, buffers_.output_elements, args_.dtype, comm_->size);
    } else {
      size_t bytes = buffers_.output_elements * dtype_size(args_.dtype);
      std::vector<uint8_t> h(bytes);
      st = services_.copy(h.data(), buffers_.output, bytes);
      if (st == HMC_SUCCESS)
        st = finish_average(h.data(), buffers_.output_elements, args_.dtype, comm_->size);
      if (st == HMC_SUCCESS) st = services_.copy(buffers_.output, h.data(), bytes);
    }
    if (st != HMC_SUCCESS) {
      end(st, fmt::format("{}: the average's division: {}", what_, last_error()));
      return true;
    }
  }
  end(HMC_SUCCESS, "");
  return true;
}

hmc_status_t Execution::record_failure(hmc_status_t status, const std::string& why) {
  if (failure_ == HMC_SUCCESS) {
    failure_ = status;
    failure_text_ = why;
    set_error(status, why);
  }
  // The other ranks may be waiting for this one: dropping the connections ends their waits at
  // once, with HMC_ERR_PEER_LOST, where a silent rank would hold them for HMC_TIMEOUT_MS.
  if (comm_->broken.empty()) {
    comm_->broken = why;
    HMC_LOG_W("{}; the communicator is unusable from now on", why);
  }
  for (auto& peer : comm_->peers)
    if (peer && !peer->lost) services_.abandon_peer(*peer, why);
  return status;
}

void Execution::abort(hmc_status_t status, const std::string& why) {
  if (ended_) return;
  record_failure(status, why);
  // Every transfer this execution posted failed with its connection: release them now.
  for (auto& p : posted_) {
    if (p.req && p.req->done.load(std::memory_order_acquire)) {
      RequestTable::release(p.req);
      p.req = nullptr;
    }
  }
  end(status, why);
}

void Execution::end(hmc_status_t status, std::string error) {
  ended_ = true;
  --comm_->running;
  req_->bytes = received_bytes_;
  req_->status = status;
  req_->error = std::move(error);
  req_->done.store(true, std::memory_order_release);
  transfers_.events().ring();
}

}  // namespace hmc::coll
