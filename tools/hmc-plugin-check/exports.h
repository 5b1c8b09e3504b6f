// The symbols a plugin file exports, read from its ELF dynamic symbol table (the file, not the
// loaded object: the checker sees what any process that dlopens it sees).
#pragma once

#include <string>
#include <vector>

namespace hmc::check {

// Names of the symbols the shared object at path defines and exports (global, weak or unique
// binding; default or protected visibility), leaving out those the linker defines in every
// object (_init, _fini, _edata, _end, __bss_start). False, with *why, when the file is not a
// 64-bit ELF object whose section headers can be read.
bool exported_symbols(const std::string& path, std::vector<std::string>* out, std::string* why);

}  // namespace hmc::check
