// The bounded, deterministic fuzz smoke of one target (fuzz_target.h), built with any compiler
// and run by ctest (labels unit;fuzz). Inputs: the target's seeds (hmc::fuzz::seeds()), every
// file of the corpus directories given, and N pseudo-random mutations of them (bit flips,
// interesting values over length/type fields, truncations, erasures, insertions, splices,
// concatenations). A failed check or a sanitizer report aborts the process, failing the test.
//
//   <name>_fuzz_smoke [--iterations N] [--seed S] [--max-seconds T] [CORPUS_DIR|FILE ...]
//   <name>_fuzz_smoke --write-corpus DIR     (writes the seeds as files; DIR's other
//                                             files, such as regression inputs, stay)
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace {

using Bytes = std::vector<uint8_t>;
constexpr size_t kMaxInput = 64 * 1024;

// splitmix64: small, fast, and the same sequence everywhere.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

bool read_file(const std::string& path, Bytes* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// Adds path (a file, or every regular file of a directory) to inputs. False when unreadable.
bool add_path(const std::string& path, std::vector<Bytes>* inputs) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    Bytes b;
    if (!read_file(path, &b)) return false;
    inputs->push_back(std::move(b));
    return true;
  }
  DIR* d = opendir(path.c_str());
  if (!d) return false;
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());  // deterministic order
  for (const auto& n : names) {
    Bytes b;
    if (read_file(path + "/" + n, &b)) inputs->push_back(std::move(b));
  }
  return true;
}

void put_le(Bytes* b, size_t at, uint64_t v, size_t width) {
  for (size_t i = 0; i < width && at + i < b->size(); ++i)
    (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

void mutate_once(Bytes* b, const std::vector<Bytes>& pool, Rng& rng) {
  static const uint32_t kLengths[] = {0,
                                      1,
                                      4,
                                      11,
                                      12,
                                      13,
                                      31,
                                      32,
                                      33,
                                      255,
                                      4096,
                                      4097,
                                      (1u << 20) - 1,
                                      1u << 20,
                                      (1u << 20) + 1,
                                      0x7fffffffu,
                                      0xffffffffu};
  static const uint16_t kShorts[] = {0, 1, 2, 3, 4, 5, 15, 16, 17, 24, 25, 99, 0x7fff, 0xffff};
  static const uint8_t kBytes[] = {0, 1, 2, 0x7f, 0x80, 0xfe, 0xff};
  switch (rng.below(10)) {
    case 0:  // flip one bit
      if (!b->empty()) (*b)[rng.below(b->size())] ^= static_cast<uint8_t>(1u << rng.below(8));
      break;
    case 1:  // interesting byte
      if (!b->empty()) (*b)[rng.below(b->size())] = kBytes[rng.below(sizeof kBytes)];
      break;
    case 2:  // truncate
      b->resize(rng.below(b->size() + 1));
      break;
    case 3: {  // erase a range
      if (b->empty()) break;
      size_t at = rng.below(b->size());
      size_t n = 1 + rng.below(std::min<size_t>(64, b->size() - at));
      b->erase(b->begin() + at, b->begin() + at + n);
      break;
    }
    case 4: {  // insert random bytes
      size_t at = rng.below(b->size() + 1);
      size_t n = 1 + rng.below(16);
      Bytes ins(n);
      for (auto& x : ins) x = static_cast<uint8_t>(rng.next());
      b->insert(b->begin() + at, ins.begin(), ins.end());
      break;
    }
    case 5: {  // duplicate a chunk elsewhere
      if (b->empty()) break;
      size_t from = rng.below(b->size());
      size_t n = 1 + rng.below(std::min<size_t>(256, b->size() - from));
      Bytes chunk(b->begin() + from, b->begin() + from + n);
      size_t at = rng.below(b->size() + 1);
      b->insert(b->begin() + at, chunk.begin(), chunk.end());
      break;
    }
    case 6: {  // splice: our prefix + another input's suffix
      const Bytes& o = pool[rng.below(pool.size())];
      size_t cut = rng.below(b->size() + 1);
      size_t from = rng.below(o.size() + 1);
      b->resize(cut);
      b->insert(b->end(), o.begin() + from, o.end());
      break;
    }
    case 7:  // interesting u32 (frame length, string lengths)
      if (b->size() >= 4)
        put_le(b, rng.below(b->size() - 3), kLengths[rng.below(std::size(kLengths))], 4);
      break;
    case 8:  // interesting u16 (versions, types)
      if (b->size() >= 2)
        put_le(b, rng.below(b->size() - 1), kShorts[rng.below(std::size(kShorts))], 2);
      break;
    default: {  // append another input (multi-frame streams)
      const Bytes& o = pool[rng.below(pool.size())];
      b->insert(b->end(), o.begin(), o.end());
      break;
    }
  }
  if (b->size() > kMaxInput) b->resize(kMaxInput);
}

int write_corpus(const std::string& dir) {
  mkdir(dir.c_str(), 0755);  // may exist
  for (const auto& s : hmc::fuzz::seeds()) {
    std::string path = dir + "/" + s.name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(s.bytes.data()),
              static_cast<std::streamsize>(s.bytes.size()));
    if (!out) {
      fprintf(stderr, HMC_FUZZ_NAME "_fuzz_smoke: cannot write %s\n", path.c_str());
      return 1;
    }
    printf("wrote %s (%zu bytes)\n", path.c_str(), s.bytes.size());
  }
  return 0;
}

bool parse_u64(const char* text, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iterations = 100000, seed = 0x686d63, max_seconds = 25;
  std::vector<Bytes> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](uint64_t* out) {
      if (i + 1 >= argc || !parse_u64(argv[i + 1], out)) {
        fprintf(stderr, HMC_FUZZ_NAME "_fuzz_smoke: %s needs a non-negative integer\n", a.c_str());
        exit(2);
      }
      ++i;
    };
    if (a == "--iterations" || a == "-n") {
      value(&iterations);
    } else if (a == "--seed") {
      value(&seed);
    } else if (a == "--max-seconds") {
      value(&max_seconds);
    } else if (a == "--write-corpus") {
      if (i + 1 >= argc) {
        fprintf(stderr, HMC_FUZZ_NAME "_fuzz_smoke: --write-corpus needs a directory\n");
        return 2;
      }
      return write_corpus(argv[i + 1]);
    } else if (a == "--help" || a == "-h") {
      printf(
          "usage: %s [--iterations N] [--seed S] [--max-seconds T] [CORPUS_DIR|FILE ...]\n"
          "       %s --write-corpus DIR\n",
          argv[0], argv[0]);
      return 0;
    } else if (!add_path(a, &inputs)) {
      fprintf(stderr, HMC_FUZZ_NAME "_fuzz_smoke: cannot read corpus path %s: %s\n", a.c_str(),
              strerror(errno));
      return 2;
    }
  }
  const size_t from_files = inputs.size();
  for (auto& s : hmc::fuzz::seeds()) inputs.push_back(std::move(s.bytes));

  const auto start = std::chrono::steady_clock::now();
  for (const Bytes& in : inputs) hmc::fuzz::fuzz_one(in.data(), in.size());

  Rng rng{seed};
  uint64_t done = 0;
  for (; done < iterations; ++done) {
    // Check the clock every 1024 inputs: a hard bound on the run time on slow (sanitizer) builds.
    if ((done & 1023) == 0 && max_seconds > 0 &&
        std::chrono::steady_clock::now() - start > std::chrono::seconds(max_seconds)) {
      printf(HMC_FUZZ_NAME "_fuzz_smoke: time budget of %llu s reached after %llu mutations\n",
             static_cast<unsigned long long>(max_seconds), static_cast<unsigned long long>(done));
      break;
    }
    Bytes b = inputs[rng.below(inputs.size())];
    const size_t stacked = 1 + rng.below(4);
    for (size_t k = 0; k < stacked; ++k) mutate_once(&b, inputs, rng);
    hmc::fuzz::fuzz_one(b.data(), b.size());
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  printf(HMC_FUZZ_NAME
         "_fuzz_smoke: %zu corpus files + %zu built-in seeds + %llu mutations, no "
         "failure, %lld ms\n",
         from_files, inputs.size() - from_files, static_cast<unsigned long long>(done),
         static_cast<long long>(ms));
  return 0;
}
