#include "util/json.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace hmc::json {

const char* type_name(Type t) {
  switch (t) {
    case Type::Null: return "null";
    case Type::Bool: return "a boolean";
    case Type::Number: return "a number";
    case Type::String: return "a string";
    case Type::Array: return "an array";
    case Type::Object: return "an object";
  }
  return "?";
}

const Value* Value::find(const std::string& key) const {
  for (const auto& m : members)
    if (m.first == key) return &m.second;
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  bool document(Value* out, std::string* error) {
    skip_space();
    if (!value(out, 0)) {
      *error = error_;
      return false;
    }
    skip_space();
    if (pos_ != s_.size()) {
      fail("unexpected '{}' after the document", s_[pos_]);
      *error = error_;
      return false;
    }
    return true;
  }

 private:
  template <typename... Args>
  bool fail(fmt::format_string<Args...> f, Args&&... args) {
    if (error_.empty())
      error_ = fmt::format("line {}, column {}: ", line_, pos_ - line_start_ + 1) +
               fmt::format(f, std::forward<Args>(args)...);
    return false;
  }

  void skip_space() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '\n') {
        ++line_;
        line_start_ = pos_ + 1;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        break;
      }
      ++pos_;
    }
  }

  bool literal(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return fail("unknown word (expected a JSON value)");
    pos_ += n;
    return true;
  }

  bool value(Value* v, int depth) {
    if (depth > kMaxDepth) return fail("nested deeper than {} levels", kMaxDepth);
    if (pos_ >= s_.size()) return fail("unexpected end of text (expected a value)");
    v->line = line_;
    v->column = static_cast<int>(pos_ - line_start_ + 1);
    char c = s_[pos_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v->type = Type::String;
      return string(&v->string);
    }
    if (c == 't' || c == 'f') {
      v->type = Type::Bool;
      v->boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      v->type = Type::Null;
      return literal("null");
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(v);
    return fail("unexpected '{}' (expected a value)", c);
  }

  bool number(Value* v) {
    // The grammar is checked here; strtod then converts exactly what was checked.
    size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    size_t first = pos_;
    if (digits() == 0) return fail("a number needs digits");
    if (s_[first] == '0' && pos_ - first > 1) return fail("a number may not start with 0");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return fail("a number needs digits after '.'");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return fail("a number needs digits in its exponent");
    }
    std::string text = s_.substr(start, pos_ - start);
    errno = 0;
    v->number = std::strtod(text.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(v->number)) return fail("number {} is out of range", text);
    v->type = Type::Number;
    return true;
  }

  static void put_utf8(std::string* out, unsigned cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool hex4(unsigned* cp) {
    if (pos_ + 4 > s_.size()) return fail("\\u wants four hex digits");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<unsigned>(h - 'A' + 10);
      else
        return fail("\\u wants four hex digits");
    }
    *cp = v;
    return true;
  }

  bool string(std::string* out) {
    ++pos_;  // the opening quote
    while (true) {
      if (pos_ >= s_.size()) return fail("unterminated string");
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        out->push_back(c);
        ++pos_;
        continue;
      }
      if (++pos_ >= s_.size()) return fail("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {
            unsigned lo = 0;
            if (s_.compare(pos_, 2, "\\u") != 0) return fail("unpaired surrogate in \\u escape");
            pos_ += 2;
            if (!hex4(&lo)) return false;
            if (lo < 0xDC00 || lo >= 0xE000) return fail("unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return fail("unpaired surrogate in \\u escape");
          }
          put_utf8(out, cp);
          break;
        }
        default: return fail("unknown escape '\\{}'", e);
      }
    }
  }

  bool array(Value* v, int depth) {
    v->type = Type::Array;
    ++pos_;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      v->items.emplace_back();
      if (!value(&v->items.back(), depth + 1)) return false;
      skip_space();
      if (pos_ >= s_.size()) return fail("unterminated array (expected ',' or ']')");
      if (s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      if (s_[pos_] != ',') return fail("expected ',' or ']' in an array, got '{}'", s_[pos_]);
      ++pos_;
      skip_space();
    }
  }

  bool object(Value* v, int depth) {
    v->type = Type::Object;
    ++pos_;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a quoted member name");
      std::string key;
      if (!string(&key)) return false;
      if (v->find(key)) return fail("member \"{}\" given twice", key);
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':' after \"{}\"", key);
      ++pos_;
      skip_space();
      v->members.emplace_back(std::move(key), Value{});
      if (!value(&v->members.back().second, depth + 1)) return false;
      skip_space();
      if (pos_ >= s_.size()) return fail("unterminated object (expected ',' or '}}')");
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      if (s_[pos_] != ',') return fail("expected ',' or '}}' in an object, got '{}'", s_[pos_]);
      ++pos_;
      skip_space();
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  std::string error_;
};

}  // namespace

bool parse(const std::string& text, Value* out, std::string* error) {
  *out = Value{};
  return Parser(text).document(out, error);
}

}  // namespace hmc::json
