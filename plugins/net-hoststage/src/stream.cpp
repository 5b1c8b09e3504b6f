#include "stream.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "context.h"
#include "endpoint.h"

namespace hmc::hoststage {

namespace {

constexpr int kMaxIov = 64;
// Bytes one call moves per direction before yielding (keeps every slot bounded).
constexpr size_t kWriteBudget = size_t{32} << 20;
constexpr size_t kReadBudget = size_t{32} << 20;
// Bulk bytes queued at once for one write when the queue ran dry.
constexpr size_t kBulkBatch = size_t{256} << 10;
// DATA payloads at least this large are read straight into their destination.
constexpr size_t kDirectRead = size_t{4} << 10;
constexpr size_t kMinRxBuffer = size_t{256} << 10;
constexpr size_t kSmallRead = size_t{4} << 10;

}  // namespace

Stream::Stream(Endpoint& ep, Fd fd, int index, size_t rx_inline_max)
    : ep_(ep),
      ctx_(ep.ctx()),
      fd_(std::move(fd)),
      index_(index),
      rx_inline_max_(rx_inline_max),
      max_frame_(sizeof(WireHdr) + kVecListMax + rx_inline_max),
      rxcap_(std::max(kMinRxBuffer, 2 * max_frame_)),
      rx_(new uint8_t[rxcap_]) {}

Stream::~Stream() {
  shutdown();
}

void Stream::start() {
  token_ = ctx_.watch(fd_.get(), EPOLLIN, PollKind::kStream, this);
  if (token_ == 0)
    ep_.fail(HMC_PLUGIN_ERR_SYSTEM, "epoll_ctl(stream %d) failed: %s", index_,
             errno_text(errno).c_str());
}

void Stream::shutdown() {
  if (!fd_.valid()) return;
  ctx_.unwatch(fd_.get(), token_);
  token_ = 0;
  fd_.reset();
  outq_.clear();
  in_data_ = false;
}

void Stream::set_want_out(bool on) {
  if (on == want_out_ || token_ == 0) return;
  want_out_ = on;
  ctx_.modify(fd_.get(), token_, EPOLLIN | (on ? EPOLLOUT : 0u));
}

void Stream::queue(const OutFrame& f) {
  outq_.push_back(f);
  if (!want_out_ && !in_pump_) pump_out();
}

void Stream::on_event(uint32_t events) {
  if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) != 0) on_readable();
  if ((events & EPOLLOUT) != 0 && fd_.valid() && !ep_.failed()) pump_out();
}

void Stream::pump_out() {
  if (!fd_.valid() || in_pump_) return;
  Endpoint::Busy busy(ep_);
  in_pump_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{in_pump_};

  size_t budget = kWriteBudget;
  for (;;) {
    if (ep_.failed()) return;
    if (outq_.empty()) {
      // Bulk chunks until a write's worth is queued: the small DATA frames of a vectored
      // transfer's pieces then go many to a system call, not one each.
      size_t batch = 0;
      while (outq_.size() < kMaxIov / 2 && batch < kBulkBatch) {
        OutFrame f;
        if (!ep_.next_chunk(&f)) break;
        if (ep_.failed()) return;
        batch += f.total();
        outq_.push_back(std::move(f));
      }
      if (outq_.empty()) break;
    }
    iovec iov[kMaxIov];
    int cnt = 0;
    size_t want = 0;
    for (const OutFrame& f : outq_) {
      if (cnt + 2 > kMaxIov || want >= budget) break;
      if (f.done < sizeof(WireHdr)) {
        iov[cnt].iov_base = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(&f.hdr)) + f.done;
        iov[cnt].iov_len = sizeof(WireHdr) - f.done;
        want += iov[cnt].iov_len;
        ++cnt;
      }
      size_t pdone = f.done > sizeof(WireHdr) ? f.done - sizeof(WireHdr) : 0;
      if (!add_payload(f, pdone, iov, &cnt, kMaxIov, &want)) break;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(cnt);
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        set_want_out(true);
        return;
      }
      ep_.on_stream_error(*this, errno);
      return;
    }
    size_t left = static_cast<size_t>(n);
    while (left > 0) {
      OutFrame& f = outq_.front();
      size_t take = std::min(left, f.total() - f.done);
      f.done += take;
      left -= take;
      if (f.done == f.total()) {
        OutFrame fin = f;
        outq_.pop_front();
        ep_.on_frame_written(fin);
        if (ep_.failed()) return;
      }
    }
    if (static_cast<size_t>(n) < want) {  // the socket is full: wait for EPOLLOUT
      set_want_out(true);
      return;
    }
    if (static_cast<size_t>(n) >= budget) {
      // Yield; the socket is still writable, so EPOLLOUT brings us back on the next progress.
      ctx_.note_more_work();
      set_want_out(true);
      return;
    }
    budget -= static_cast<size_t>(n);
  }
  set_want_out(false);
}

bool Stream::add_payload(const OutFrame& f, size_t pdone, iovec* iov, int* cnt, int max,
                         size_t* want) {
  if (!f.spans) {
    if (f.len > pdone) {
      if (*cnt >= max) return false;
      iov[*cnt] = iovec{const_cast<uint8_t*>(f.data) + pdone, f.len - pdone};
      *want += f.len - pdone;
      ++*cnt;
    }
    return true;
  }
  const std::vector<VecSpan>& v = *f.spans;
  size_t piece = f.span_first;
  uint64_t off = f.span_off + pdone;  // may run past the first piece: walked below
  uint64_t left = f.len - pdone;
  while (left > 0 && piece < v.size()) {
    if (off >= v[piece].len) {
      off -= v[piece].len;
      ++piece;
      continue;
    }
    if (*cnt >= max) return false;
    size_t n = static_cast<size_t>(std::min<uint64_t>(v[piece].len - off, left));
    iov[*cnt] = iovec{v[piece].local + off, n};
    ++*cnt;
    *want += n;
    left -= n;
    off = 0;
    ++piece;
  }
  return true;
}

void Stream::on_readable() {
  if (!fd_.valid() || in_read_) return;  // in_read_: reached again through drain()
  Endpoint::Busy busy(ep_);
  in_read_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{in_read_};
  size_t budget = kReadBudget;
  while (!ep_.failed() && fd_.valid()) {
    ssize_t n;
    size_t asked;
    iovec iov[kMaxIov + 1];
    int cnt = 0;
    if (in_data_ && rd_ == wr_ && data_left_ >= kDirectRead)
      cnt = ep_.data_iov(data_sink_, data_piece_, data_off_, std::min<uint64_t>(data_left_, budget),
                         iov, kMaxIov);
    if (cnt > 0) {
      // The payload's rest straight into place (the pieces it spans, for a vectored transfer),
      // and the next frame's header (a DATA chunk of a vectored transfer follows another) into
      // the buffer, in one call.
      size_t want = 0;
      for (int i = 0; i < cnt; ++i) want += iov[i].iov_len;
      rd_ = wr_ = 0;
      iov[cnt] = iovec{rx_.get(), sizeof(WireHdr)};
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<size_t>(cnt) + 1;
      asked = want + sizeof(WireHdr);
      n = ::recvmsg(fd_.get(), &m, MSG_DONTWAIT);
      if (n > 0) {
        size_t placed = std::min(static_cast<size_t>(n), want);
        ep_.data_advance(data_sink_, &data_piece_, &data_off_, placed);
        data_left_ -= placed;
        if (data_left_ == 0) finish_data();
        // Bytes past the payload (or, when the budget cut it, more of it) go through parse.
        wr_ = static_cast<size_t>(n) - placed;
        if (wr_ > 0) parse();
      }
    } else {
      if (rd_ == wr_) {
        rd_ = wr_ = 0;
      } else if (rxcap_ - wr_ < max_frame_) {
        std::memmove(rx_.get(), rx_.get() + rd_, wr_ - rd_);
        wr_ -= rd_;
        rd_ = 0;
      }
      asked = rxcap_ - wr_;
      // While bulk data is expected, read little into the buffer: a DATA header is followed by
      // payload that should land in its destination directly, not be copied out of here. A
      // partly buffered inline frame still gets all its missing bytes in one read.
      if (ep_.expecting_bulk()) asked = std::min(asked, std::max(kSmallRead, partial_frame_left()));
      n = ::recv(fd_.get(), rx_.get() + wr_, asked, MSG_DONTWAIT);
      if (n > 0) {
        wr_ += static_cast<size_t>(n);
        parse();
      }
    }
    if (n == 0) {
      ep_.on_stream_eof(*this);
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      ep_.on_stream_error(*this, errno);
      return;
    }
    if (static_cast<size_t>(n) < asked) return;  // drained; epoll reports more
    if (static_cast<size_t>(n) >= budget) {
      ctx_.note_more_work();
      return;
    }
    budget -= static_cast<size_t>(n);
  }
}

size_t Stream::partial_frame_left() const {
  size_t avail = wr_ - rd_;
  if (in_data_ || avail < sizeof(WireHdr)) return 0;
  WireHdr h;
  std::memcpy(&h, rx_.get() + rd_, sizeof(h));
  if (h.type == kMsgData || (h.flags & kFlagPayload) == 0 || h.len > payload_limit(h.type))
    return 0;
  size_t frame = sizeof(WireHdr) + static_cast<size_t>(h.len);
  return frame > avail ? frame - avail : 0;
}

void Stream::parse() {
  while (!ep_.failed() && fd_.valid()) {
    size_t avail = wr_ - rd_;
    if (in_data_) {
      if (avail == 0) return;
      size_t take = static_cast<size_t>(std::min<uint64_t>(avail, data_left_));
      const uint8_t* src = rx_.get() + rd_;
      rd_ += take;
      consume_data(src, take);
      continue;
    }
    WireHdr h;
    size_t used = 0;
    StreamFrame f = take_stream_frame(rx_.get() + rd_, avail, rx_inline_max_, &h, &used);
    if (f == StreamFrame::kNeedMore) return;  // the rest arrives later
    if (f == StreamFrame::kTooLong) {
      ep_.protocol_error("stream %d: inline payload of %llu bytes exceeds the limit %zu", index_,
                         static_cast<unsigned long long>(h.len), payload_limit(h.type));
      return;
    }
    const uint8_t* payload = rx_.get() + rd_ + sizeof(WireHdr);
    rd_ += used;
    if (f == StreamFrame::kData) {
      if (!ep_.data_begin(h)) return;
      data_sink_ = h.sink;
      data_piece_ = h.tag;
      data_off_ = h.addr;
      data_left_ = h.len;
      data_len_ = h.len;
      in_data_ = true;
      if (data_left_ == 0) finish_data();
      continue;
    }
    ep_.on_msg(h, payload);
  }
}

void Stream::consume_data(const uint8_t* src, size_t n) {
  size_t left = n;
  while (left > 0) {
    iovec iov[16];
    int cnt = ep_.data_iov(data_sink_, data_piece_, data_off_, left, iov, 16);
    if (cnt == 0) {  // nowhere to go (an aborted transfer): the bytes are dropped
      ep_.data_advance(data_sink_, &data_piece_, &data_off_, left);
      break;
    }
    size_t done = 0;
    for (int i = 0; i < cnt; ++i) {
      std::memcpy(iov[i].iov_base, src + done, iov[i].iov_len);
      done += iov[i].iov_len;
    }
    ep_.data_advance(data_sink_, &data_piece_, &data_off_, done);
    src += done;
    left -= done;
  }
  data_left_ -= n;
  if (data_left_ == 0) finish_data();
}

void Stream::finish_data() {
  in_data_ = false;
  ep_.data_end(data_sink_, data_len_);
}

}  // namespace hmc::hoststage
