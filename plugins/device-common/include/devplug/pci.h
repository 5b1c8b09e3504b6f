// PCI identity of a device, as the runtimes report it and as sysfs names it.
#pragma once

#include <string>

namespace hmc::devplug {

// Canonical form of a PCI bus id: "dddd:bb:dd.f" in lower case, with a 4-digit domain (runtimes
// answer "0000:3B:00.0" or "00000000:3b:00.0"). Returns "" for text that is not a bus id.
std::string normalize_pci_bus_id(const std::string& id);

// NUMA node of a PCI device from /sys/bus/pci/devices/<id>/numa_node, or -1 when unknown.
int pci_numa_node(const std::string& normalized_id);

}  // namespace hmc::devplug
