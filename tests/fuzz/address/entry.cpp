// Address blobs (peer/address.h): what hmc_connect reads from an application, which got it from
// the peer (hmc_address), and the "host:port" text of hmc_address_from_host.
//  data[0] even: data[1..] is a blob for decode_address; one it accepts re-encodes to what it
//                read (trailing bytes are ignored) and decodes to the same address again.
//  data[0] odd:  data[1..] is text for parse_host_port.
#include <string>

#include "fuzz_target.h"
#include "peer/address.h"

namespace hmc::fuzz {
namespace {

bool same(const Address& a, const Address& b) {
  return a.host_id == b.host_id && a.hostname == b.hostname && a.pid == b.pid &&
         a.context_id == b.context_id && a.unix_name == b.unix_name && a.tcp_host == b.tcp_host &&
         a.tcp_port == b.tcp_port;
}

void blob(const uint8_t* p, size_t n) {
  Address a;
  if (decode_address(p, n, &a) != HMC_SUCCESS) return;
  HMC_FUZZ_CHECK(a.host_id.size() <= 256 && a.hostname.size() <= 256);
  HMC_FUZZ_CHECK(a.unix_name.size() <= 108 && a.tcp_host.size() <= 256);
  HMC_FUZZ_CHECK(!a.unix_name.empty() || (!a.tcp_host.empty() && a.tcp_port != 0));
  std::vector<uint8_t> again = encode_address(a);
  HMC_FUZZ_CHECK(again.size() <= n);
  Address b;
  HMC_FUZZ_CHECK(decode_address(again.data(), again.size(), &b) == HMC_SUCCESS);
  HMC_FUZZ_CHECK(same(a, b));
}

void text(const uint8_t* p, size_t n) {
  Address a;
  if (parse_host_port(std::string(reinterpret_cast<const char*>(p), n), &a) != HMC_SUCCESS) return;
  HMC_FUZZ_CHECK(a.tcp_port != 0 && a.unix_name.empty());
  HMC_FUZZ_CHECK(a.tcp_host.size() < n);
}

const Decoder kDecoders[] = {blob, text};

}  // namespace

void fuzz_one(const uint8_t* data, size_t len) {
  pick(kDecoders, data, len);
}

std::vector<Seed> seeds() {
  // host_id, hostname, pid, context_id, unix_name, tcp_host, tcp_port
  const Address unix_and_tcp{"node-a/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
                             "node-a",
                             4242,
                             0x1122334455667788ull,
                             "hmc-4242-1122334455667788",
                             "10.0.0.7",
                             41000};
  Address tcp_only;
  parse_host_port("[fd00::7]:5000", &tcp_only);
  auto text_of = [](const char* s) { return bytes_of(s, std::string(s).size()); };
  return {
      {"blob-unix-tcp", picked(0, encode_address(unix_and_tcp))},
      {"blob-tcp-only", picked(0, encode_address(tcp_only))},
      {"text-v4", picked(1, text_of("127.0.0.1:29500"))},
      {"text-v6", picked(1, text_of("[fd00::7]:5000"))},
      {"text-name", picked(1, text_of("node-b.cluster:65535"))},
  };
}

}  // namespace hmc::fuzz
