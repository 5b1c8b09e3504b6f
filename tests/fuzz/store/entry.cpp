// The TCP rendezvous store's protocol (coll/store_wire.h) and the member records its values
// carry (coll/bootstrap.h), with the address blob inside each record (peer/address.h).
//  data[0] % 3 == 0: data[1..] is what a client sent the store's server, taken in pieces of
//                    data-dependent sizes as recv delivers them; every request it accepts is
//                    served against one map, the way the server does.
//  data[0] % 3 == 1: data[1..] is what the server sent a client: reply heads and values.
//  data[0] % 3 == 2: data[1..] is a member record (as a rank stores it and every rank reads it).
#include <map>
#include <string>

#include "coll/bootstrap.h"
#include "coll/store_wire.h"
#include "fuzz_target.h"
#include "peer/address.h"

namespace hmc::fuzz {
namespace {

using namespace coll::store_wire;

void member(const std::string& s) {
  coll::Member m;
  int size = 0;
  uint64_t cid = 0;
  if (!coll::decode_member(s, &m, &size, &cid)) return;
  // The engine reads the address of every member it connects to.
  Address a;
  (void)decode_address(m.address.data(), m.address.size(), &a);
  // One encoding later the record is stable.
  std::string e1 = coll::encode_member(m, size, cid);
  coll::Member m2;
  int size2 = 0;
  uint64_t cid2 = 0;
  HMC_FUZZ_CHECK(coll::decode_member(e1, &m2, &size2, &cid2));
  HMC_FUZZ_CHECK(size2 == size && cid2 == cid && m2.address == m.address &&
                 m2.context_id == m.context_id && m2.pid == m.pid && m2.host_id == m.host_id &&
                 m2.vendor == m.vendor);
  HMC_FUZZ_CHECK(coll::encode_member(m2, size2, cid2) == e1);
}

void server(const uint8_t* p, size_t n) {
  std::map<std::string, std::string> data;
  std::string in;
  size_t pos = 0;
  uint32_t h = 2166136261u;  // FNV-1a of the input picks the piece sizes
  for (size_t i = 0; i < n && i < 32; ++i) h = (h ^ p[i]) * 16777619u;
  while (pos < n) {
    h = h * 1103515245u + 12345u;
    size_t piece = std::min<size_t>(n - pos, 1 + (h >> 16) % 64);
    in.append(reinterpret_cast<const char*>(p + pos), piece);
    pos += piece;
    for (;;) {
      const size_t before = in.size();
      coll::store_wire::Request req;
      Take t = take_request(&in, &req);
      if (t == Take::kNeedMore) {
        HMC_FUZZ_CHECK(in.size() == before);
        break;
      }
      if (t == Take::kMalformed) return;  // the client is dropped
      const std::string again = encode_request(req.op, req.key, req.value);
      HMC_FUZZ_CHECK(before - in.size() == again.size());
      if (t == Take::kUnknownOp) return;  // the client is dropped
      HMC_FUZZ_CHECK(req.key.size() <= kMaxField && req.value.size() <= kMaxField);
      std::string reply = serve(req, &data);
      bool found = false;
      uint32_t len = 0;
      HMC_FUZZ_CHECK(reply.size() >= kReplyHead && decode_reply_head(reply.data(), &found, &len));
      HMC_FUZZ_CHECK(len == reply.size() - kReplyHead);
      if (req.op == kSet) HMC_FUZZ_CHECK(data[req.key] == req.value && found && len == 0);
      if (req.op == kGet) HMC_FUZZ_CHECK(found == (data.count(req.key) == 1));
      if (req.op == kClaim) HMC_FUZZ_CHECK(found && reply.substr(kReplyHead) == data[req.key]);
      if (found && len > 0) member(reply.substr(kReplyHead));
    }
  }
}

void client(const uint8_t* p, size_t n) {
  size_t pos = 0;
  while (n - pos >= kReplyHead) {
    bool found = false;
    uint32_t len = 0;
    if (!decode_reply_head(reinterpret_cast<const char*>(p + pos), &found, &len)) {
      HMC_FUZZ_CHECK(len > kMaxField);
      return;  // the client drops the connection
    }
    pos += kReplyHead;
    if (n - pos < len) return;  // the rest never came
    if (found) member(std::string(reinterpret_cast<const char*>(p + pos), len));
    pos += len;
  }
}

void record(const uint8_t* p, size_t n) {
  member(std::string(reinterpret_cast<const char*>(p), n));
}

const Decoder kDecoders[] = {server, client, record};

std::vector<uint8_t> as_bytes(const std::string& s) {
  return bytes_of(s.data(), s.size());
}

}  // namespace

void fuzz_one(const uint8_t* data, size_t len) {
  pick(kDecoders, data, len);
}

std::vector<Seed> seeds() {
  // host_id, hostname, pid, context_id, unix_name, tcp_host, tcp_port
  const Address addr{"node-a/0b1c2d3e", "node-a",   4242, 0x1122334455667788ull,
                     "hmc-4242",        "10.0.0.7", 41000};
  coll::Member m{encode_address(addr), addr.context_id, addr.pid, addr.host_id, "cuda"};
  const std::string rec0 = coll::encode_member(m, 4, 0xfeedfacecafebeefull);
  m.vendor = "host";
  const std::string rec1 = coll::encode_member(m, 4, 0);
  // A rank's join as its client sends it, and the answers it gets.
  const std::string joins = encode_request(kSet, "info/1", rec1) +
                            encode_request(kClaim, "info/0", rec0) +
                            encode_request(kGet, "info/0", "") + encode_request(kGet, "got/3", "") +
                            encode_request(kSet, "got/1", "1");
  const std::string replies = encode_reply(true, "") + encode_reply(true, rec0) +
                              encode_reply(true, rec0) + encode_reply(false, "") +
                              encode_reply(true, "");
  return {
      {"server-join", picked(0, as_bytes(joins))},
      {"client-join", picked(1, as_bytes(replies))},
      {"record-rank0", picked(2, as_bytes(rec0))},
      {"record-rank1", picked(2, as_bytes(rec1))},
  };
}

}  // namespace hmc::fuzz
