// Endpoint: its queue pairs (made, connected, brought up).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "context.h"
#include "endpoint.h"
#include "endpoint_parts.h"
#include "region.h"

namespace hmc::ibverbs {

// ---- queue pairs ---------------------------------------------------------------------------

ibv_qp* make_qp(Device& d) {
  ibv_qp_init_attr a{};
  a.send_cq = d.cq();
  a.recv_cq = d.cq();
  a.srq = d.srq();
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = kSqDepth;
  a.cap.max_send_sge = 1;
  // Small messages go inline (copied into the work request when posted: the HCA reads no send
  // buffer, one DMA less on the latency path); a device that cannot do it gets a plain queue pair.
  a.cap.max_inline_data = kInlineWanted;
  ibv_qp* qp = d.api().create_qp(d.pd(), &a);
  if (qp == nullptr) {
    a.cap.max_inline_data = 0;
    qp = d.api().create_qp(d.pd(), &a);
  }
  if (qp == nullptr) return nullptr;
  d.note_inline(a.cap.max_inline_data);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.pkey_index = 0;
  at.port_num = static_cast<uint8_t>(d.info().port);
  at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  if (d.api().modify_qp(
          qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    d.api().destroy_qp(qp);
    return nullptr;
  }
  return qp;
}

namespace {
uint8_t rd_atomic(const Device& d) {
  return static_cast<uint8_t>(std::min(16, std::max(1, d.info().dev_attr.max_qp_rd_atom)));
}
}  // namespace

bool Endpoint::create_qps() {
  msg_qp_ = make_qp(dev_);
  rma_qp_ = msg_qp_ != nullptr ? make_qp(dev_) : nullptr;
  if (rma_qp_ == nullptr) {
    why_ = std::string("cannot create queue pairs: ") + std::strerror(errno);
    return false;
  }
  if (!dev_.grow_receive_pool()) {
    why_ = "cannot grow the shared receive queue";
    return false;
  }
  dev_.register_qp(msg_qp_->qp_num, this);
  dev_.register_qp(rma_qp_->qp_num, this);
  const PortInfo& pi = dev_.info();
  local_.msg_qpn = msg_qp_->qp_num;
  local_.rma_qpn = rma_qp_->qp_num;
  local_.msg_psn = static_cast<uint32_t>(ctx().random64() & 0xffffff);
  local_.rma_psn = static_cast<uint32_t>(ctx().random64() & 0xffffff);
  local_.lid = pi.attr.lid;
  std::memcpy(local_.gid, pi.gid.raw, 16);
  local_.mtu = static_cast<uint8_t>(pi.attr.active_mtu);
  local_.link_layer = pi.attr.link_layer;
  local_.credits = dev_.credits();
  local_.eager = static_cast<uint32_t>(dev_.eager_limit());
  return true;
}

bool Endpoint::connect_qp(ibv_qp* qp, uint32_t remote_qpn, uint32_t remote_psn,
                          uint32_t local_psn) {
  return bring_up(dev_, qp, remote_qpn, remote_psn, remote_.gid, remote_.lid, remote_.mtu,
                  local_psn);
}

bool Endpoint::bring_up(Device& d, ibv_qp* qp, uint32_t rqpn, uint32_t rpsn, const uint8_t* rgid,
                        uint16_t rlid, uint8_t rmtu, uint32_t lpsn) {
  const VerbsApi& v = ctx().api();
  const PortInfo& pi = d.info();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min<int>(pi.attr.active_mtu, rmtu));
  a.dest_qp_num = rqpn;
  a.rq_psn = rpsn;
  a.max_dest_rd_atomic = rd_atomic(d);
  a.min_rnr_timer = 12;  // 0.64 ms
  a.ah_attr.port_num = static_cast<uint8_t>(pi.port);
  if (d.ethernet() || rlid == 0) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, rgid, 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(pi.gid_index);
    a.ah_attr.grh.hop_limit = 64;
  } else {
    a.ah_attr.dlid = rlid;
  }
  if (v.modify_qp(qp, &a,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    why_ = std::string("cannot bring the queue pair to RTR: ") + std::strerror(errno);
    return false;
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = static_cast<uint8_t>(ctx().rc_timeout());
  r.retry_cnt = static_cast<uint8_t>(ctx().config().retry_cnt);
  r.rnr_retry = 6;  // credits keep receivers ready; a bug becomes an error, not a hang
  r.sq_psn = lpsn;
  r.max_rd_atomic = rd_atomic(d);
  if (v.modify_qp(qp, &r,
                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    why_ = std::string("cannot bring the queue pair to RTS: ") + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace hmc::ibverbs
