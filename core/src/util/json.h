// A small JSON reader for description files (the collectives' cluster topologies): the whole text
// parsed into a tree whose every value remembers its line and column, so that whoever reads the
// tree can say where a field it rejects is. Not for wire data or large documents.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hmc::json {

enum class Type { Null, Bool, Number, String, Array, Object };
const char* type_name(Type t);

struct Value {
  Type type = Type::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> items;                            // Array
  std::vector<std::pair<std::string, Value>> members;  // Object, in the file's order
  int line = 0;                                        // 1-based, where the value starts
  int column = 0;                                      // 1-based

  // The member named `key` of an object, or nullptr (also for a non-object).
  const Value* find(const std::string& key) const;
};

// Parses one JSON document (RFC 8259: no comments, no trailing commas; duplicate keys are
// rejected). False with *error "line L, column C: what" on malformed text. Nesting deeper than
// 64 levels is rejected rather than recursed into.
bool parse(const std::string& text, Value* out, std::string* error);

}  // namespace hmc::json
