#include "exports.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hmc::check {
namespace {

// A read-only mapping of a whole file.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error_ = std::strerror(errno);
      return;
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const unsigned char*>(p);
        size_ = static_cast<size_t>(st.st_size);
      } else {
        error_ = std::strerror(errno);
      }
    } else {
      error_ = "empty or unreadable file";
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& error() const { return error_; }
  // True when [offset, offset + len) lies inside the file.
  bool holds(uint64_t offset, uint64_t len) const {
    return offset <= size_ && len <= size_ - offset;
  }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::string error_;
};

bool linker_defined(const char* name) {
  static const char* const kNames[] = {"_init",   "_fini",       "_edata",
                                       "_end",    "__bss_start", "__bss_start__",
                                       "__end__", "_bss_end__",  "__bss_end__"};
  for (const char* n : kNames)
    if (std::strcmp(name, n) == 0) return true;
  return false;
}

}  // namespace

bool exported_symbols(const std::string& path, std::vector<std::string>* out, std::string* why) {
  MappedFile f(path);
  if (f.data() == nullptr) {
    *why = "cannot read " + path + ": " + f.error();
    return false;
  }
  if (f.size() < sizeof(Elf64_Ehdr) || std::memcmp(f.data(), ELFMAG, SELFMAG) != 0 ||
      f.data()[EI_CLASS] != ELFCLASS64) {
    *why = "not a 64-bit ELF object";
    return false;
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, f.data(), sizeof eh);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      !f.holds(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr))) {
    *why = "its section headers cannot be read (stripped of them?)";
    return false;
  }
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, f.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  out->clear();
  bool found = false;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sym = section(i);
    if (sym.sh_type != SHT_DYNSYM) continue;
    if (sym.sh_link >= eh.e_shnum || sym.sh_entsize != sizeof(Elf64_Sym) ||
        !f.holds(sym.sh_offset, sym.sh_size)) {
      *why = "its dynamic symbol table is malformed";
      return false;
    }
    Elf64_Shdr str = section(sym.sh_link);
    if (!f.holds(str.sh_offset, str.sh_size) || str.sh_size == 0) {
      *why = "its dynamic string table is malformed";
      return false;
    }
    const char* strtab = reinterpret_cast<const char*>(f.data() + str.sh_offset);
    found = true;
    for (size_t k = 1; k < sym.sh_size / sizeof(Elf64_Sym); ++k) {
      Elf64_Sym s;
      std::memcpy(&s, f.data() + sym.sh_offset + k * sizeof(Elf64_Sym), sizeof s);
      unsigned bind = ELF64_ST_BIND(s.st_info);
      unsigned vis = ELF64_ST_VISIBILITY(s.st_other);
      if (s.st_shndx == SHN_UNDEF || s.st_name >= str.sh_size) continue;
      if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
      if (vis != STV_DEFAULT && vis != STV_PROTECTED) continue;
      const char* name = strtab + s.st_name;
      if (std::memchr(name, '\0', str.sh_size - s.st_name) == nullptr || linker_defined(name))
        continue;
      out->emplace_back(name);
    }
  }
  if (!found) {
    *why = "it has no dynamic symbol table";
    return false;
  }
  return true;
}

}  // namespace hmc::check
