#include "coll/redis_rendezvous.h"

#include "util/status.h"

#ifdef HMC_HAVE_HIREDIS

#include <hiredis/hiredis.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "coll/redis_reply.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/random.h"

namespace hmc::coll {

namespace {

using redis::Reply;

// <prefix>/open names the generation now joining. It lives this long past rank 0's last
// refresh, so that the generation of a rank 0 that died is given up within seconds.
constexpr int kOpenTtlMs = 3000;
constexpr uint64_t kOpenRefreshNs = 500000000ull;
// The counter of generations: it only has to outlive the records of the generations it
// numbered (at most twice a join's timeout); a day keeps it across the gaps of a quiet pool.
constexpr int64_t kEpochTtlMs = 24ll * 3600 * 1000;
// One command and its answer get what is left of the join's time, within these bounds (a last
// command near the deadline still gets a fair chance).
constexpr int64_t kCallMinMs = 1000, kCallMaxMs = 5000;
constexpr useconds_t kPollUs = 5000;

// Takes <prefix>/open for this generation, or refreshes it: 1 when it is this generation's now,
// 0 when another rank 0 holds it.
const char* kTakeOpen =
    "local v = redis.call('GET', KEYS[1]) "
    "if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end "
    "if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end "
    "return 0";
// Closes the generation and records how it ended (done, or failed with the verdict) at once, so
// that no rank sees it neither open nor ended.
const char* kClose =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end "
    "redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) "
    "return 1";

struct RedisUrl {
  std::string host, user, password, prefix;
  uint16_t port = 6379;
  std::string where;  // the address without the password, for messages
};

hmc_status_t parse_url(const std::string& url, RedisUrl* out) {
  auto bad = [&](const char* why) {
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: rendezvous '{}' is not "
                "redis://[[user]:password@]host[:port][/prefix]: {}",
                redact_rendezvous(url), why);
  };
  std::string rest = url.substr(strlen("redis://"));
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  out->prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  while (!out->prefix.empty() && out->prefix.back() == '/') out->prefix.pop_back();
  if (out->prefix.empty()) out->prefix = "hmc";
  auto at = authority.rfind('@');
  if (at != std::string::npos) {
    std::string userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string::npos) return bad("the part before @ is user:password or :password");
    out->user = userinfo.substr(0, colon);
    out->password = userinfo.substr(colon + 1);
  }
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos) return bad("an IPv6 address without its ]");
    out->host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') return bad("something after the ] that is no :port");
    if (!after.empty()) port_text = after.substr(1);
  } else {
    auto colon = authority.rfind(':');
    out->host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (out->host.empty()) return bad("no host");
  if (!port_text.empty()) {
    int64_t p = 0;
    if (!parse_int(port_text, &p) || p <= 0 || p > 65535) return bad("a port from 1 to 65535");
    out->port = uint16_t(p);
  }
  bool v6 = out->host.find(':') != std::string::npos;
  out->where = fmt::format("redis://{}{}{}:{}/{}", v6 ? "[" : "", out->host, v6 ? "]" : "",
                           out->port, out->prefix);
  return HMC_SUCCESS;
}

timeval to_timeval(int64_t ms) {
  timeval tv;
  tv.tv_sec = time_t(ms / 1000);
  tv.tv_usec = suseconds_t(ms % 1000 * 1000);
  return tv;
}

// A blocking connection to the server whose every command is bounded in time. A command that
// fails (the server went away, or did not answer in time) closes it: the join fails with it.
class Redis {
 public:
  explicit Redis(const RedisUrl& url) : url_(url) {}
  ~Redis() {
    if (c_) redisFree(c_);
  }
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;

  // Retries until the deadline: the server may be restarting.
  hmc_status_t connect(uint64_t deadline_ns) {
    std::string last;
    for (;;) {
      uint64_t now = now_ns();
      int64_t left = deadline_ns > now ? int64_t((deadline_ns - now) / 1000000) : 0;
      c_ = redisConnectWithTimeout(url_.host.c_str(), url_.port,
                                   to_timeval(std::clamp<int64_t>(left, 100, kCallMaxMs)));
      if (c_ && !c_->err) break;
      last = c_ ? c_->errstr : "out of memory";
      if (c_) redisFree(c_);
      c_ = nullptr;
      if (now_ns() >= deadline_ns)
        return fail(HMC_ERR_SYSTEM, "the rendezvous store at {} could not be reached in time: {}",
                    url_.where, last);
      usleep(50000);
    }
    redis::bound_replies(c_->reader);
    if (url_.password.empty()) return HMC_SUCCESS;
    std::vector<std::string> auth = {"AUTH"};
    if (!url_.user.empty()) auth.push_back(url_.user);
    auth.push_back(url_.password);
    return call(auth, nullptr, deadline_ns);
  }

  hmc_status_t call(const std::vector<std::string>& argv, Reply* out, uint64_t deadline_ns) {
    // Names the command and its first key; never AUTH's arguments or a script's text.
    std::string what = argv[0];
    if (argv[0] == "EVAL" && argv.size() > 3) what += " on " + argv[3];
    if (argv[0] != "AUTH" && argv[0] != "EVAL" && argv.size() > 1) what += " " + argv[1];
    if (!c_)
      return fail(HMC_ERR_SYSTEM, "the rendezvous store at {} is not connected ({})", url_.where,
                  what);
    uint64_t start = now_ns();
    int64_t ms = deadline_ns > start ? int64_t((deadline_ns - start) / 1000000) : 0;
    ms = std::clamp(ms, kCallMinMs, kCallMaxMs);
    redisSetTimeout(c_, to_timeval(ms));
    std::vector<const char*> args;
    std::vector<size_t> lens;
    for (const auto& a : argv) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r =
        static_cast<redisReply*>(redisCommandArgv(c_, int(args.size()), args.data(), lens.data()));
    if (!r) {
      std::string why = c_->errstr;
      redisFree(c_);
      c_ = nullptr;
      return fail(HMC_ERR_SYSTEM,
                  "the rendezvous store at {} went away ({}, after {} ms of {}): {}", url_.where,
                  what, (now_ns() - start) / 1000000, ms, why);
    }
    if (r->type == REDIS_REPLY_ERROR) {
      std::string e(r->str, r->len);
      freeReplyObject(r);
      return fail(HMC_ERR_SYSTEM, "the rendezvous store at {} refused {}: {}", url_.where, what, e);
    }
    if (out) redis::convert(r, out);
    freeReplyObject(r);
    return HMC_SUCCESS;
  }

 private:
  RedisUrl url_;
  redisContext* c_ = nullptr;
};

// One rank's join: rank 0 leads (opens a generation, waits for every record, closes it), the
// others follow the generation that is open.
class Join {
 public:
  Join(const JoinSettings& join, const Member& self, const RedisUrl& url)
      : join_(join), self_(self), url_(url), redis_(url) {}

  hmc_status_t run(std::vector<Member>* members, uint64_t* comm_id) {
    deadline_ = deadline_after_ms(join_.timeout_ms);
    ttl_ = std::to_string(2 * int64_t(join_.timeout_ms) + 10000);
    me_ = fmt::format("context {:016x} (pid {} on {})", self_.context_id, self_.pid, self_.host_id);
    hmc_status_t st = redis_.connect(deadline_);
    if (st != HMC_SUCCESS) return st;
    return join_.rank == 0 ? lead(members, comm_id) : follow(members, comm_id);
  }

 private:
  std::string key(const std::string& what) const { return url_.prefix + "/" + what; }
  std::string gen_key(const std::string& what) const {
    return fmt::format("{}/gen/{}/{}", url_.prefix, gen_, what);
  }
  std::string rank_key(const char* what, int r) const {
    return gen_key(fmt::format("{}/{}", what, r));
  }
  hmc_status_t call(const std::vector<std::string>& argv, Reply* out = nullptr) {
    return redis_.call(argv, out, deadline_);
  }

  std::string absent() const {
    std::vector<int> ranks;
    for (int r = 0; r < join_.size; ++r)
      if (!have_[size_t(r)]) ranks.push_back(r);
    return fmt::format("rank{} {} of {}", ranks.size() > 1 ? "s" : "", rank_list(ranks),
                       join_.size);
  }
  hmc_status_t store_gone(hmc_status_t st) const {
    if (missing_ == 0)
      return fail(st,
                  "hmc_comm_create: every rank had joined generation {} but the store failed "
                  "before its rank 0 closed it: {}",
                  gen_, last_error());
    return fail(st, "hmc_comm_create: {} had not joined when the store failed: {}", absent(),
                last_error());
  }

  // Reads the records of the ranks not seen yet (those `keys` ask for after the first `skip`
  // entries of the reply). PROTOCOL for a malformed record or a size that disagrees.
  hmc_status_t take_records(const Reply& reply, size_t skip, const std::vector<int>& asked) {
    if (reply.items.size() != skip + asked.size())
      return fail(HMC_ERR_PROTOCOL,
                  "hmc_comm_create: the rendezvous store at {} answered MGET "
                  "with {} values for {} keys",
                  url_.where, reply.items.size(), skip + asked.size());
    for (size_t i = 0; i < asked.size(); ++i) {
      const Reply& v = reply.items[skip + i];
      int r = asked[i];
      if (v.nil) continue;
      int size = 0;
      uint64_t cid = 0;
      if (!decode_member(v.str, &got_[size_t(r)], &size, &cid))
        return fail(HMC_ERR_PROTOCOL,
                    "hmc_comm_create: rank {}'s entry in the rendezvous store is malformed", r);
      if (size != join_.size)
        return fail(HMC_ERR_PROTOCOL,
                    "hmc_comm_create: the size disagrees: rank {} says {}, this rank {} says {} "
                    "(from {})",
                    r, size, join_.rank, join_.size, join_.size_from);
      if (r == 0) comm_id_ = cid;
      have_[size_t(r)] = true;
      --missing_;
    }
    return HMC_SUCCESS;
  }

  // The keys of the records not seen yet, appended to `keys`; which ranks they are.
  std::vector<int> ask_missing(std::vector<std::string>* keys) const {
    std::vector<int> asked;
    for (int r = 0; r < join_.size; ++r) {
      if (have_[size_t(r)]) continue;
      asked.push_back(r);
      keys->push_back(rank_key("info", r));
    }
    return asked;
  }

  void reset_records() {
    got_.assign(size_t(join_.size), Member{});
    have_.assign(size_t(join_.size), false);
    missing_ = join_.size;
  }

  // Takes <prefix>/open for this generation, or refreshes it. INVALID_ARGUMENT when another
  // live rank 0 holds it (its record outlived its time to live: it is refreshed).
  hmc_status_t hold_open(bool first) {
    std::string held;
    uint64_t held_since = 0;
    for (;;) {
      Reply r;
      hmc_status_t st =
          call({"EVAL", kTakeOpen, "1", key("open"), open_value_, std::to_string(kOpenTtlMs)}, &r);
      if (st != HMC_SUCCESS) return st;
      if (r.integer == 1) return HMC_SUCCESS;
      if ((st = call({"GET", key("open")}, &r)) != HMC_SUCCESS) return st;
      if (r.nil) continue;
      if (r.str != held) {
        held = r.str;
        held_since = now_ns();
      }
      // A dead rank 0's record is gone kOpenTtlMs after its last refresh; one that stays
      // longer is another live rank 0's. Once this one held it, losing it is final.
      if (!first || now_ns() - held_since > uint64_t(kOpenTtlMs + 500) * 1000000ull ||
          now_ns() >= deadline_) {
        std::string generation, holder;
        redis::open_holder(held, &generation, &holder);
        return fail(HMC_ERR_INVALID_ARGUMENT,
                    "hmc_comm_create: rank 0 under {} is claimed twice: by {} (generation {}) "
                    "and by this {}",
                    url_.where, holder, generation, me_);
      }
      usleep(20000);
    }
  }

  // Rank 0's verdict on a failed join, kept in the generation for the other ranks.
  hmc_status_t give_up(hmc_status_t status) {
    std::string text = last_error();
    call({"EVAL", kClose, "2", key("open"), gen_key("failed"), open_value_,
          fmt::format("{}\n{}", int(status), text), ttl_});
    return set_error(status, text);
  }

  hmc_status_t lead(std::vector<Member>* members, uint64_t* comm_id) {
    reset_records();
    hmc_status_t st = random_bytes(&comm_id_, sizeof comm_id_);
    if (st != HMC_SUCCESS) return st;
    Reply r;
    if ((st = call({"INCR", key("epoch")}, &r)) != HMC_SUCCESS) return st;
    gen_ = uint64_t(r.integer);
    if ((st = call({"PEXPIRE", key("epoch"), std::to_string(kEpochTtlMs)})) != HMC_SUCCESS)
      return st;
    open_value_ = fmt::format("{}\n{}\n{}", gen_, join_.size, me_);
    if ((st = call({"SET", rank_key("rank", 0), me_, "PX", ttl_})) != HMC_SUCCESS ||
        (st = call({"SET", rank_key("info", 0), encode_member(self_, join_.size, comm_id_), "PX",
                    ttl_})) != HMC_SUCCESS)
      return st;
    // Open only once rank 0's own record is there: whoever sees the generation finds it.
    if ((st = hold_open(true)) != HMC_SUCCESS) return st;
    HMC_LOG_I("hmc_comm_create: rank 0 opened generation {} at {}", gen_, url_.where);
    got_[0] = self_;
    have_[0] = true;
    --missing_;
    uint64_t refreshed = now_ns();
    while (missing_ > 0) {
      if (now_ns() - refreshed > kOpenRefreshNs) {
        if ((st = hold_open(false)) != HMC_SUCCESS) return st;
        refreshed = now_ns();
      }
      std::vector<std::string> keys = {"MGET"};
      std::vector<int> asked = ask_missing(&keys);
      if ((st = call(keys, &r)) != HMC_SUCCESS) return store_gone(st);
      if ((st = take_records(r, 0, asked)) != HMC_SUCCESS) return give_up(st);
      if (missing_ == 0) break;
      if (now_ns() >= deadline_) {
        return give_up(fail(HMC_ERR_TIMEOUT,
                            "hmc_comm_create: {} did not join within {} ms (rendezvous {})",
                            absent(), join_.timeout_ms, url_.where));
      }
      usleep(kPollUs);
    }
    if ((st = call({"EVAL", kClose, "2", key("open"), gen_key("done"), open_value_, "1", ttl_})) !=
        HMC_SUCCESS)
      return st;
    // The generation's keys go once every rank has read them (their time to live is for the
    // ranks that die before).
    deadline_ = deadline_after_ms(join_.timeout_ms);
    std::vector<std::string> keys = {"MGET"};
    for (int k = 1; k < join_.size; ++k) keys.push_back(rank_key("got", k));
    while (join_.size > 1) {
      if ((st = call(keys, &r)) != HMC_SUCCESS) return st;
      int unread = 0;
      for (const auto& v : r.items) unread += v.nil;
      if (unread == 0) break;
      if (now_ns() >= deadline_) {
        HMC_LOG_W(
            "hmc_comm_create: {} rank{} joined but did not confirm it read the others' entries; "
            "generation {} at {} is left to expire",
            unread, unread > 1 ? "s" : "", gen_, url_.where);
        break;
      }
      usleep(kPollUs);
    }
    keys = {"DEL", gen_key("done")};
    for (int k = 0; k < join_.size; ++k) {
      keys.push_back(rank_key("rank", k));
      keys.push_back(rank_key("info", k));
      keys.push_back(rank_key("got", k));
    }
    if ((st = call(keys)) != HMC_SUCCESS) return st;
    *members = std::move(got_);
    *comm_id = comm_id_;
    return HMC_SUCCESS;
  }

  hmc_status_t follow(std::vector<Member>* members, uint64_t* comm_id) {
    hmc_status_t st;
    Reply r;
    for (;;) {
      reset_records();
      // A generation open under the prefix, from its rank 0.
      for (;;) {
        if ((st = call({"GET", key("open")}, &r)) != HMC_SUCCESS) return st;
        if (!r.nil) break;
        if (now_ns() >= deadline_)
          return fail(HMC_ERR_TIMEOUT,
                      "hmc_comm_create: rank 0 of {} did not join within {} ms (no generation "
                      "open at {})",
                      join_.size, join_.timeout_ms, url_.where);
        usleep(2 * kPollUs);
      }
      open_value_ = r.str;
      if (!redis::open_generation(open_value_, &gen_))
        return fail(HMC_ERR_PROTOCOL, "hmc_comm_create: {}/open at {} is malformed: '{}'",
                    url_.prefix, url_.where, open_value_);
      if ((st = call({"SET", rank_key("rank", join_.rank), me_, "NX", "PX", ttl_}, &r)) !=
          HMC_SUCCESS)
        return st;
      if (r.nil) {
        if ((st = call({"GET", rank_key("rank", join_.rank)}, &r)) != HMC_SUCCESS) return st;
        if (r.str != me_)
          return fail(HMC_ERR_INVALID_ARGUMENT,
                      "hmc_comm_create: rank {} (from {}) is claimed twice: by {} and by this {}",
                      join_.rank, join_.rank_from, r.str, me_);
      }
      if ((st = call({"SET", rank_key("info", join_.rank), encode_member(self_, join_.size, 0),
                      "PX", ttl_})) != HMC_SUCCESS)
        return st;
      bool moved = false;
      for (;;) {
        std::vector<std::string> keys = {"MGET", key("open"), gen_key("failed"), gen_key("done")};
        std::vector<int> asked = ask_missing(&keys);
        if ((st = call(keys, &r)) != HMC_SUCCESS) return store_gone(st);
        if (r.items.size() < 3) return take_records(r, 3, asked);  // says what is wrong
        const Reply &open = r.items[0], &failed = r.items[1], &done = r.items[2];
        if (!failed.nil) {
          int64_t code = 0;
          std::string text;
          redis::failed_verdict(failed.str, &code, &text);
          return fail(hmc_status_t(code), "{} (said rank 0)", text);
        }
        if ((st = take_records(r, 3, asked)) != HMC_SUCCESS) return st;
        if (!done.nil && missing_ == 0) break;
        // Another generation opened while this one was still joining: its rank 0 gave it up
        // (it died and a successor opened the next). This rank joins that one.
        if (done.nil && !open.nil && open.str != open_value_) {
          HMC_LOG_I("hmc_comm_create: generation {} at {} was given up for another; joining that",
                    gen_, url_.where);
          call({"DEL", rank_key("rank", join_.rank), rank_key("info", join_.rank)});
          moved = true;
          break;
        }
        if (now_ns() >= deadline_) {
          if (missing_ == 0)
            return fail(HMC_ERR_TIMEOUT,
                        "hmc_comm_create: every rank joined generation {} at {} but its rank 0 "
                        "did not close it within {} ms (it may have left)",
                        gen_, url_.where, join_.timeout_ms);
          return fail(HMC_ERR_TIMEOUT,
                      "hmc_comm_create: {} did not join within {} ms (rendezvous {}{})", absent(),
                      join_.timeout_ms, url_.where,
                      open.nil ? fmt::format("; generation {} is no longer open: its rank 0 may "
                                             "have left",
                                             gen_)
                               : "");
        }
        usleep(kPollUs);
      }
      if (moved) continue;
      if ((st = call({"SET", rank_key("got", join_.rank), "1", "PX", ttl_})) != HMC_SUCCESS)
        return st;
      *members = std::move(got_);
      *comm_id = comm_id_;
      return HMC_SUCCESS;
    }
  }

  const JoinSettings& join_;
  const Member& self_;
  const RedisUrl& url_;
  Redis redis_;
  uint64_t deadline_ = 0;
  std::string ttl_;  // of the generation's keys, in ms
  std::string me_;
  uint64_t gen_ = 0;
  std::string open_value_;  // "<generation>\n<size>\n<rank 0>"
  std::vector<Member> got_;
  std::vector<bool> have_;
  int missing_ = 0;
  uint64_t comm_id_ = 0;
};

}  // namespace

hmc_status_t redis_rendezvous(const JoinSettings& join, const Member& self,
                              std::vector<Member>* members, uint64_t* comm_id) {
  RedisUrl url;
  hmc_status_t st = parse_url(join.rendezvous, &url);
  if (st != HMC_SUCCESS) return st;
  return Join(join, self, url).run(members, comm_id);
}

}  // namespace hmc::coll

#else

namespace hmc::coll {

hmc_status_t redis_rendezvous(const JoinSettings& join, const Member&, std::vector<Member>*,
                              uint64_t*) {
  return fail(HMC_ERR_NOT_SUPPORTED,
              "hmc_comm_create: rendezvous {}: hmc was built without hiredis (Debian: "
              "libhiredis-dev), so it has no Redis rendezvous; use tcp://host:port",
              join.rendezvous);
}

}  // namespace hmc::coll

#endif
