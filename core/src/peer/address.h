// The address blob a context hands out (hmc_address) and peers connect to (hmc_connect): how to
// reach its control plane, by Unix socket from the same host or by TCP from anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hmc/hmc.h"

namespace hmc {

struct Address {
  std::string host_id;  // empty when made from "host:port"
  std::string hostname;
  int32_t pid = 0;
  uint64_t context_id = 0;
  std::string unix_name;  // abstract Unix socket name, or empty
  std::string tcp_host;
  uint16_t tcp_port = 0;
};

std::vector<uint8_t> encode_address(const Address& a);
// HMC_ERR_INVALID_ARGUMENT with a message when the blob is not an hmc address; HMC_ERR_VERSION
// when it is one of another version.
hmc_status_t decode_address(const void* data, size_t len, Address* out);
// "host:port" or "[v6]:port".
hmc_status_t parse_host_port(const std::string& text, Address* out);

}  // namespace hmc
