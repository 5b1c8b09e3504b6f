// The route of one operation: how a send, a receive, a put, a get or a transfer list travels,
// chosen once per post from the peer, the memory on each side and the size, before anything is
// posted (Transfers::route_message, route_rma, route_list; docs/protocols.md, "The route of an
// operation", follows them step by step). Posting then follows the route and decides nothing.
#pragma once

#include <cstdint>

#include "device/registry.h"
#include "hmc/plugin/net.h"

namespace hmc {

enum class Route : uint8_t {
  Direct,        // one net plugin operation on the application's memory
  Framed,        // a framed message: piece 0, a header, the rest in pieces (framed/)
  Pieced,        // a put, get or transfer list in pieces through bounces (framed/pieced_rma.h)
  Vectored,      // a transfer list as vectored plugin operations (framed/pieced_rma.h)
  TargetStaged,  // the peer's region is memory its path cannot reach: the owner stages it
};

const char* route_name(Route route);

struct RoutePlan {
  Route route = Route::Direct;
  // The local memory crosses through bounce buffers (framed and pieced routes).
  bool staged = false;
  // Device memory on either side moves with no bounce buffer (counted in direct_transfers).
  bool device = false;
  MemoryLocation loc;          // where the local buffer lives, where the route looked
  hmc_net_mr_t* mr = nullptr;  // its registration on the path, where it has one
};

}  // namespace hmc
