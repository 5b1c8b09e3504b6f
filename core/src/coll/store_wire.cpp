#include "coll/store_wire.h"

#include <cstring>

namespace hmc::coll::store_wire {

namespace {

void put_u32(std::string& s, uint32_t v) {
  s.append(reinterpret_cast<const char*>(&v), 4);
}
uint32_t get_u32(const char* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

}  // namespace

std::string encode_request(uint8_t op, const std::string& key, const std::string& value) {
  std::string req(1, char(op));
  put_u32(req, uint32_t(key.size()));
  put_u32(req, uint32_t(value.size()));
  req += key;
  req += value;
  return req;
}

Take take_request(std::string* in, Request* out) {
  if (in->size() < kRequestHead) return Take::kNeedMore;
  uint32_t kl = get_u32(in->data() + 1), vl = get_u32(in->data() + 5);
  if (kl > kMaxField || vl > kMaxField) return Take::kMalformed;
  if (in->size() < kRequestHead + kl + vl) return Take::kNeedMore;
  out->op = uint8_t((*in)[0]);
  out->key = in->substr(kRequestHead, kl);
  out->value = in->substr(kRequestHead + kl, vl);
  in->erase(0, kRequestHead + kl + vl);
  if (out->op != kSet && out->op != kGet && out->op != kClaim) return Take::kUnknownOp;
  return Take::kOk;
}

std::string serve(const Request& req, std::map<std::string, std::string>* data) {
  bool found = true;
  std::string reply;
  if (req.op == kSet) {
    (*data)[req.key] = req.value;
  } else if (req.op == kGet) {
    auto it = data->find(req.key);
    found = it != data->end();
    if (found) reply = it->second;
  } else if (req.op == kClaim) {
    reply = data->emplace(req.key, req.value).first->second;
  }
  return encode_reply(found, reply);
}

std::string encode_reply(bool found, const std::string& value) {
  std::string out(1, char(found ? 1 : 0));
  put_u32(out, uint32_t(value.size()));
  out += value;
  return out;
}

bool decode_reply_head(const char* head, bool* found, uint32_t* len) {
  *found = head[0] != 0;
  *len = get_u32(head + 1);
  return *len <= kMaxField;
}

}  // namespace hmc::coll::store_wire
