#include "coll/redis_reply.h"

#ifdef HMC_HAVE_HIREDIS

#include <hiredis/hiredis.h>

#include <mutex>

#include "hmc/hmc.h"
#include "util/config.h"

namespace hmc::coll::redis {

namespace {

// hiredis' own reply functions, which the bounded ones call.
const redisReplyObjectFunctions* g_default = nullptr;
redisReplyObjectFunctions g_bounded;

#if HIREDIS_MAJOR >= 1
using ElementCount = size_t;
#else
using ElementCount = int;
#endif

void* create_array(const redisReadTask* task, ElementCount elements) {
  if (elements > ElementCount(kMaxReplyElements)) return nullptr;
  return g_default->createArray(task, elements);
}

}  // namespace

void bound_replies(redisReader* reader) {
  static std::once_flag once;
  std::call_once(once, [reader] {
    g_default = reader->fn;
    g_bounded = *reader->fn;
    g_bounded.createArray = create_array;
  });
  if (reader->fn == g_default) reader->fn = &g_bounded;
#if HIREDIS_MAJOR >= 1
  reader->maxelements = kMaxReplyElements;
#endif
}

void convert(const redisReply* r, Reply* out) {
  out->nil = r->type == REDIS_REPLY_NIL;
  if (r->type == REDIS_REPLY_INTEGER) out->integer = r->integer;
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
    out->str.assign(r->str, r->len);
  if (r->type == REDIS_REPLY_ARRAY) {
    out->items.resize(r->elements);
    for (size_t i = 0; i < r->elements; ++i) convert(r->element[i], &out->items[i]);
  }
}

bool open_generation(const std::string& open_value, uint64_t* generation) {
  int64_t gen = 0;
  if (!parse_int(open_value.substr(0, open_value.find('\n')), &gen) || gen <= 0) return false;
  *generation = uint64_t(gen);
  return true;
}

void open_holder(const std::string& held, std::string* generation, std::string* holder) {
  auto nl = held.find('\n');
  *holder = held.substr(held.find('\n', nl + 1) + 1);
  *generation = held.substr(0, nl);
}

void failed_verdict(const std::string& value, int64_t* code, std::string* text) {
  auto nl = value.find('\n');
  *code = HMC_ERR_TIMEOUT;
  if (nl == std::string::npos || !parse_int(value.substr(0, nl), code)) nl = std::string::npos;
  *text = nl == std::string::npos ? value : value.substr(nl + 1);
  // hmc_comm_create returns the code: success (which would leave the members unset) or a number
  // that is no hmc error says the record is not one of hmc's.
  if (*code >= 0 || *code < HMC_ERR_INTERNAL) {
    *text = "rank 0's verdict in the store is malformed: '" + value + "'";
    *code = HMC_ERR_PROTOCOL;
  }
}

}  // namespace hmc::coll::redis

#endif
