// Put notifications at the target: those a net plugin carried with the data (notify_poll) and
// those sent on the control plane (Notify, with the bytes a notification carries), delivered to
// hmc_notify_wait in the initiator's put order (peer/notify_order.h says how the two channels are
// ordered); and, at the initiator, the NotifyAck that says how many Notify messages the target
// delivered.
#include <vector>

#include "peer/dispatch.h"
#include "peer/messages.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/transfers.h"

namespace hmc {

void Transfers::add_handlers(ControlDispatch& dispatch) {
  dispatch.add(control::MsgType::Notify,
               [this](const std::shared_ptr<Peer>& peer, const control::Channel::Message& m) {
                 return on_notify_ctrl_locked(*peer, m.payload.data(), m.payload.size());
               });
  dispatch.add(control::MsgType::NotifyAck,
               [](const std::shared_ptr<Peer>& peer, const control::Channel::Message& m) {
                 return on_notify_ack(*peer, m.payload.data(), m.payload.size());
               });
}

// Tells the initiator how many of its Notify messages were delivered (ctrl_mutex held). Peers
// that predate carried notifications neither need nor know NotifyAck.
void Transfers::send_notify_ack_ctrl_locked(Peer& peer, uint64_t delivered) {
  if (!delivered || !(peer.remote.features & path::kFeatureCarriedNotify) || !peer.ctrl) return;
  control::Writer w;
  msg::encode_notify_ack(delivered, &w);
  if (peer.ctrl->send(control::MsgType::NotifyAck, w) != HMC_SUCCESS)
    HMC_LOG_D("peer {}: NotifyAck not sent: {}", peer.name, last_error());
}

void Transfers::poll_carried_notifications_locked(Peer& peer) {
  const auto* t = peer.net->table();
  uint64_t value = 0;
  while (peer.ep && t->notify_poll(peer.ep, &value) == HMC_PLUGIN_SUCCESS) {
    uint64_t acked = notifications_.deliver(
        peer, [&](NotifyReceiver& r, std::vector<Note>* out) { r.carried(value, out); });
    if (acked) {
      std::lock_guard<std::mutex> lock(peer.ctrl_mutex);
      send_notify_ack_ctrl_locked(peer, acked);
    }
  }
}

std::string Transfers::on_notify_ctrl_locked(Peer& peer, const uint8_t* p, size_t n) {
  msg::Notify m;
  if (!msg::decode_notify(p, n, &m)) return "malformed notification";
  uint64_t acked = notifications_.deliver(peer, [&](NotifyReceiver& r, std::vector<Note>* out) {
    r.control({m.value, std::move(m.bytes)}, m.carried_before, out);
  });
  send_notify_ack_ctrl_locked(peer, acked);
  return "";
}

std::string Transfers::on_notify_ack(Peer& peer, const uint8_t* p, size_t n) {
  uint64_t delivered = 0;
  if (!msg::decode_notify_ack(p, n, &delivered)) return "malformed notification acknowledgement";
  peer.notify_sender.acked(delivered);
  return "";
}

void Transfers::drain_held_notifications(Peer& peer) {
  notifications_.deliver(peer, [](NotifyReceiver& r, std::vector<Note>* out) { r.drain(out); });
}

}  // namespace hmc
