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
// Use: HMC_IBVERBS_LIBRARY=<this file>. net-ibverbs dlopens it and looks every other verb up
// through it; the dynamic linker finds those in its dependency, the real libibverbs.so.1.
// DMABUF_SHIM_REFUSE=1 makes it refuse every real fd (EINVAL) while the probe still says yes:
// a registration the HCA refuses, for the per-region fallback.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
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

// The real ibv_dereg_mr, which this library's own definition hides from its callers.
static int real_dereg_mr(struct ibv_mr* mr) {
  static int (*fn)(struct ibv_mr*);
  if (fn == NULL) {
    void* dl = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (dl != NULL) fn = (int (*)(struct ibv_mr*))dlvsym(dl, "ibv_dereg_mr", "IBVERBS_1.1");
    if (fn == NULL) return ENOSYS;
  }
  return fn(mr);
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
