#include "framed/bounce_pipeline.h"

#include "device/stage_pool.h"
#include "peer/framing_state.h"  // SharedSlab: a released piece may drop the last hold

namespace hmc {

bool BouncePipeline::release(const StageEnv& env) {
  bool moved = false;
  for (auto it = pieces_.begin(); it != pieces_.end();) {
    if (it->state != PieceState::Done) {
      ++it;
      continue;
    }
    if (it->bounce) env.pool->give(it->bounce);
    it = pieces_.erase(it);
    moved = true;
  }
  return moved;
}

void BouncePipeline::settle(const StageEnv& env) {
  for (auto& p : pieces_) {
    bool copying = p.state == PieceState::Copying || p.state == PieceState::Unloading;
    if (copying && p.copy.poll() != HMC_IN_PROGRESS) p.state = PieceState::Done;
  }
  release(env);
}

void BouncePipeline::forget_plugin_requests() {
  for (auto& p : pieces_) {
    if (p.state == PieceState::Posted || p.state == PieceState::Ready ||
        p.state == PieceState::Acking) {
      p.net = nullptr;
      p.ack = nullptr;
      p.state = PieceState::Done;
    }
  }
}

}  // namespace hmc
