// Whether a net device registers a device's memory directly (net/registration.h), and what
// hmc_peer_info's device_memory says of a path (peer/device_memory.h): per device plugin, then
// the peer's end.
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>

#include "net/registration.h"
#include "net_record.h"
#include "peer/device_memory.h"

using namespace hmc;

namespace {
hmc_plugin_status_t fake_export(hmc_device_ctx_t*, const void*, size_t, int*, uint64_t*) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}

struct Fixture {
  hmc_device_plugin_v1_t table{};
  std::vector<Device> devices;
  NetDevice nd;

  Fixture() {
    table.dmabuf_export = fake_export;
    Device host;
    host.name = "host";
    devices.push_back(host);
    add("cuda", 0, HMC_MEM_IFACE_CUDA, HMC_DEVICE_CAP_DMABUF);
    add("cuda", 1, HMC_MEM_IFACE_CUDA, HMC_DEVICE_CAP_DMABUF);
    add("hip", 0, HMC_MEM_IFACE_ROCM, 0);
    nd.name = "rxe0:1";
    nd.props.mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
    nd.props.flags = HMC_NET_FLAG_DMABUF;
  }
  void add(const std::string& plugin, int index, int iface, uint32_t caps) {
    Device d;
    d.name = plugin + ":" + std::to_string(index);
    d.plugin_name = plugin;
    d.plugin = &table;
    d.index = index;
    d.mem_iface = iface;
    d.caps = caps;
    devices.push_back(d);
  }
  const Device& dev(const std::string& name) const {
    for (const auto& d : devices)
      if (d.name == name) return d;
    throw std::runtime_error("no " + name);
  }
};

// The peer's end: ibverbs on rxe1:1, host memory only.
path::NetRecord peer_end(uint32_t flags) {
  return test::host_record("ibverbs", "rxe1:1", flags);
}
}  // namespace

TEST(DeviceDirect, RefusalSaysWhichSideCannot) {
  Fixture f;
  EXPECT_EQ(direct_refusal(f.nd, f.dev("host"), true), "");
  EXPECT_EQ(direct_refusal(f.nd, f.dev("cuda:0"), true), "");
  EXPECT_EQ(direct_refusal(f.nd, f.dev("cuda:0"), false), "HMC_NET_DMABUF=0");
  EXPECT_EQ(direct_refusal(f.nd, f.dev("hip:0"), true), "hip:0 exports no dma-buf");
  f.nd.props.flags = 0;
  EXPECT_EQ(direct_refusal(f.nd, f.dev("cuda:0"), true), "no native access, no dma-buf");
  // Reached by pointer: direct whatever the dma-buf side says.
  f.nd.props.mem_ifaces |= HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
  EXPECT_EQ(direct_refusal(f.nd, f.dev("cuda:0"), false), "");
}

TEST(DeviceDirect, DescribesEachPluginOnceThenThePeersEnd) {
  Fixture f;
  path::NetRecord dmabuf = peer_end(HMC_NET_FLAG_DMABUF), plain = peer_end(0);
  EXPECT_EQ(describe_device_memory(&f.nd, &dmabuf, 1, f.devices, true),
            "cuda direct (dma-buf), hip staged (hip:0 exports no dma-buf); peer's rxe1:1 "
            "registers dma-bufs");
  EXPECT_EQ(describe_device_memory(&f.nd, &plain, 2, f.devices, false),
            "cuda staged (HMC_NET_DMABUF=0), hip staged (HMC_NET_DMABUF=0); peer's rxe1:1 takes "
            "no dma-buf (its device memory is staged)");
  // A peer without device memory: nothing said of its end.
  EXPECT_EQ(describe_device_memory(&f.nd, &dmabuf, 0, f.devices, true),
            "cuda direct (dma-buf), hip staged (hip:0 exports no dma-buf)");
  f.nd.props.mem_ifaces |= HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
  EXPECT_EQ(describe_device_memory(&f.nd, nullptr, 1, f.devices, true),
            "cuda direct (native), hip staged (hip:0 exports no dma-buf)");
  EXPECT_EQ(describe_device_memory(nullptr, nullptr, 0, f.devices, true),
            "cuda staged (no net device on the path), hip staged (no net device on the path)");
  // Host memory only on both sides: nothing to say.
  EXPECT_EQ(describe_device_memory(&f.nd, &dmabuf, 0, {f.devices[0]}, true), "");
}

// Registration by pointer for put/get only (rma_mem_ifaces, legacy GPUDirect): after dma-buf,
// which comes first where both sides can; said "peermem"; the peer's end too.
TEST(DeviceDirect, PeermemAfterDmabuf) {
  Fixture f;
  f.nd.props.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
  f.nd.props.rma_mem_ifaces =
      HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA) | HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_ROCM);
  std::string why;
  EXPECT_EQ(direct_way(f.nd, f.dev("cuda:0"), true, &why), DirectWay::kDmabuf);
  EXPECT_EQ(direct_way(f.nd, f.dev("cuda:0"), false, &why), DirectWay::kPeermem);
  EXPECT_EQ(why, "");
  EXPECT_EQ(direct_way(f.nd, f.dev("hip:0"), true, &why), DirectWay::kPeermem);
  EXPECT_EQ(direct_way(f.nd, f.dev("host"), true, &why), DirectWay::kNative);
  path::NetRecord peer = peer_end(0);
  peer.rma_mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
  EXPECT_EQ(describe_device_memory(&f.nd, &peer, 1, f.devices, true),
            "cuda direct (dma-buf), hip direct (peermem); peer's rxe1:1 registers some device "
            "memory by pointer (peermem)");
  // Not declared (or a plugin that predates the field): staged as before.
  f.nd.props.rma_mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
  EXPECT_EQ(direct_way(f.nd, f.dev("hip:0"), true, &why), DirectWay::kNone);
  EXPECT_EQ(why, "hip:0 exports no dma-buf");
  f.nd.props.hdr.struct_size = offsetof(hmc_net_device_props_t, rma_mem_ifaces);
  EXPECT_EQ(rma_mem_ifaces(f.nd), 0u);
  EXPECT_EQ(direct_way(f.nd, f.dev("cuda:0"), false, &why), DirectWay::kNone);
  EXPECT_EQ(why, "HMC_NET_DMABUF=0");
}
