// A test-only libibverbs for the RDMA test bed: it makes Soft-RoCE (rxe), which refuses dma-bufs
// (EOPNOTSUPP), register the dma-bufs of the emulated GPU runtimes (tests/fakes), so that
// net-ibverbs' device-direct path runs on the kernel's real verbs stack.
//
// What is emulated, and what is not: the emulated runtimes' dma-buf is a dup of the memfd that
// backs the allocation (tests/fakes/core/fakegpu.h), so it can be mapped like any file. This
// library's ibv_reg_dmabuf_mr maps it (MAP_SHARED, at the offset asked for) and registers that
// mapping with ibv_reg_mr_iova, whose iova is the one the caller asked for: rxe then reads and
// writes the allocation's pages, and work requests address them by the device pointer, as with
// an HCA that takes dma-bufs. The kernel's dma-buf importer (ib_umem_dmabuf, the HCA's page
// tables) is not exercised; everything else (the MR, keys, RDMA READ/WRITE into those pages) is
// the real rxe. ibv_reg_dmabuf_mr(fd -1) answers EBADF, as a kernel and HCA with dma-buf
// support do. The mapping lives as long as the MR: ibv_dereg_mr unmaps it.
//
// Legacy GPUDirect (nvidia_peermem) is emulated the same way: ibv_reg_mr of an address inside
// an emulated device allocation (the runtimes' PROT_NONE shared view of a memfd named
// "fakegpu-*", which rxe could not pin) finds that memfd through /proc/self/maps and the
// process's open fds (the runtime keeps it open), maps it read-write and registers the mapping
// with ibv_reg_mr_iova at iova = the device pointer: what the peer-memory module does with the
// GPU's pages. Any other address goes to the real ibv_reg_mr. PEERMEM_SHIM=0 turns this off (rxe
// then refuses device pointers, EFAULT, as an HCA without the module does).
//
// Use: HMC_IBVERBS_LIBRARY=<this file>. net-ibverbs dlopens it and looks every other verb up
// through it; the dynamic linker finds those in its dependency, the real libibverbs.so.1.
// DMABUF_SHIM_REFUSE=1 makes it refuse every real fd (EINVAL) while the probe still says yes:
// a registration the HCA refuses, for the per-region fallback.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHIM_API __attribute__((visibility("default")))

// The MRs this library registered from dma-bufs, with their mappings.
struct shim_mr {
  struct ibv_mr* mr;
  void* map;
  size_t map_len;
  struct shim_mr* next;
};
static struct shim_mr* g_mrs;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

// The real libibverbs' version of a verb this library defines itself.
static void* real_verb(const char* name) {
  void* dl = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  return dl != NULL ? dlvsym(dl, name, "IBVERBS_1.1") : NULL;
}

// The real ibv_dereg_mr, which this library's own definition hides from its callers.
static int real_dereg_mr(struct ibv_mr* mr) {
  static int (*fn)(struct ibv_mr*);
  if (fn == NULL) fn = (int (*)(struct ibv_mr*))real_verb("ibv_dereg_mr");
  if (fn == NULL) return ENOSYS;
  return fn(mr);
}

// Maps length bytes of fd from file offset `offset` (the pages around them), registers them at
// iova and records the mapping, which ibv_dereg_mr unmaps.
static struct ibv_mr* register_mapping(struct ibv_pd* pd, int fd, uint64_t offset, size_t length,
                                       uint64_t iova, int access) {
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  const uint64_t lead = offset % page;
  const size_t map_len = (size_t)((lead + length + page - 1) / page * page);
  void* map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(offset - lead));
  if (map == MAP_FAILED) return NULL;
  struct shim_mr* e = malloc(sizeof *e);
  if (e == NULL) {
    munmap(map, map_len);
    errno = ENOMEM;
    return NULL;
  }
  struct ibv_mr* mr = ibv_reg_mr_iova(pd, (char*)map + lead, length, iova, access);
  if (mr == NULL) {
    int err = errno;
    free(e);
    munmap(map, map_len);
    errno = err;
    return NULL;
  }
  e->mr = mr;
  e->map = map;
  e->map_len = map_len;
  pthread_mutex_lock(&g_lock);
  e->next = g_mrs;
  g_mrs = e;
  pthread_mutex_unlock(&g_lock);
  return mr;
}

// The emulated device allocation holding [addr, addr+length): an fd of its memfd (the caller
// closes it) and the file offset of addr's page. -1 where addr is no emulated device memory.
static int emulated_device_memory(uintptr_t addr, size_t length, off_t* page_offset) {
  FILE* maps = fopen("/proc/self/maps", "re");
  if (maps == NULL) return -1;
  char line[512];
  unsigned long long ino = 0;
  int found = 0;
  while (!found && fgets(line, sizeof line, maps) != NULL) {
    unsigned long long start, end, off;
    char perms[8], path[256] = "";
    if (sscanf(line, "%llx-%llx %7s %llx %*s %llu %255[^\n]", &start, &end, perms, &off, &ino,
               path) < 5)
      continue;
    if (addr < start || addr >= end) continue;
    // The runtimes' device view: shared, no access, of a "fakegpu-*" memfd.
    if (strcmp(perms, "---s") != 0 || strstr(path, "/memfd:fakegpu-") == NULL ||
        addr + length > end)
      break;
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    *page_offset = (off_t)(off + (addr - start) / page * page);
    found = 1;
  }
  fclose(maps);
  if (!found) return -1;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == NULL) return -1;
  int out = -1;
  struct dirent* d;
  while (out < 0 && (d = readdir(fds)) != NULL) {
    int fd = atoi(d->d_name);
    struct stat st;
    if (d->d_name[0] == '.' || fd == dirfd(fds) || fstat(fd, &st) != 0) continue;
    if (S_ISREG(st.st_mode) && (unsigned long long)st.st_ino == ino)
      out = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  }
  closedir(fds);
  return out;
}

#undef ibv_reg_mr
SHIM_API struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t length, int access) {
  static struct ibv_mr* (*real)(struct ibv_pd*, void*, size_t, int);
  if (real == NULL)
    real = (struct ibv_mr * (*)(struct ibv_pd*, void*, size_t, int)) real_verb("ibv_reg_mr");
  if (real == NULL) {
    errno = ENOSYS;
    return NULL;
  }
  const char* on = getenv("PEERMEM_SHIM");
  off_t page_offset = 0;
  int fd = length == 0 || (on != NULL && on[0] == '0')
               ? -1
               : emulated_device_memory((uintptr_t)addr, length, &page_offset);
  if (fd < 0) return real(pd, addr, length, access);
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  struct ibv_mr* mr = register_mapping(pd, fd, (uint64_t)page_offset + (uintptr_t)addr % page,
                                       length, (uintptr_t)addr, access);
  int err = errno;
  close(fd);  // the mapping holds the memfd
  errno = err;
  return mr;
}

SHIM_API struct ibv_mr* ibv_reg_dmabuf_mr(struct ibv_pd* pd, uint64_t offset, size_t length,
                                          uint64_t iova, int fd, int access) {
  if (fd < 0) {
    errno = EBADF;
    return NULL;
  }
  const char* refuse = getenv("DMABUF_SHIM_REFUSE");
  if (length == 0 || (refuse != NULL && refuse[0] == '1')) {
    errno = EINVAL;
    return NULL;
  }
  return register_mapping(pd, fd, offset, length, iova, access);
}

SHIM_API int ibv_dereg_mr(struct ibv_mr* mr) {
  pthread_mutex_lock(&g_lock);
  struct shim_mr** at = &g_mrs;
  while (*at != NULL && (*at)->mr != mr) at = &(*at)->next;
  struct shim_mr* e = *at;
  if (e != NULL) *at = e->next;
  pthread_mutex_unlock(&g_lock);
  int rc = real_dereg_mr(mr);
  if (e != NULL) {
    if (rc == 0) {
      munmap(e->map, e->map_len);
      free(e);
    } else {  // still registered: keep it, and its mapping, for another try
      pthread_mutex_lock(&g_lock);
      e->next = g_mrs;
      g_mrs = e;
      pthread_mutex_unlock(&g_lock);
    }
  }
  return rc;
}
