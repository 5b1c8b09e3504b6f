#include "devplug/pci.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace hmc::devplug {

std::string normalize_pci_bus_id(const std::string& id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char tail = 0;
  if (std::sscanf(id.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4 ||
      domain > 0xffff || bus > 0xff || device > 0x1f || function > 7)
    return "";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, device, function);
  return buf;
}

int pci_numa_node(const std::string& normalized_id) {
  if (normalized_id.empty()) return -1;
  std::string path = "/sys/bus/pci/devices/" + normalized_id + "/numa_node";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return -1;
  int node = -1;
  if (std::fscanf(f, "%d", &node) != 1) node = -1;
  std::fclose(f);
  return node < 0 ? -1 : node;
}

}  // namespace hmc::devplug
