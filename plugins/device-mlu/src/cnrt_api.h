// The part of Cambricon's CNRT runtime (libcnrt.so) and CNDrv driver (libcndrv.so) that the mlu
// device plugin calls, declared here so that the plugin builds without Neuware. CNRT differs from
// the CUDA-shaped runtimes in small ways that matter: the device count is unsigned, the queue comes
// before the direction in cnrtMemcpyAsync, the direction values are its own, notifiers answer
// "busy" while pending, and the IPC handle is 8 bytes. CNDrv error values are not CUDA's.
// CNDrv prototypes follow cn_api.h (CNDrv 2.15); items marked (unconfirmed) could not be checked
// against an official header.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hmc::vendor::mlu {

// ---- CNRT ---------------------------------------------------------------------------------
typedef enum cnrtRet {
  cnrtSuccess = 0,
  cnrtErrorNotReady = 1,
  cnrtErrorNoDevice = 100004,
  cnrtErrorArgsInvalid = 100006,
  cnrtErrorSys = 100007,
  cnrtErrorNoMem = 100100,
  cnrtErrorDevice = 632006,
  cnrtErrorMemcpyDirectionInvalid = 632013,
  cnrtErrorBusy = 632014
} cnrtRet_t;

typedef enum cnrtMemTransDir {
  cnrtMemcpyHostToDev = 0,
  cnrtMemcpyDevToDev = 1,
  cnrtMemcpyDevToHost = 2,
  cnrtMemcpyHostToHost = 3,
  cnrtMemcpyPeerToPeer = 4,
  cnrtMemcpyNoDirection = 5
} cnrtMemTransDir_t;

constexpr int cnrtMemTypeUnregistered = 0;
constexpr int cnrtMemTypeHost = 1;
constexpr int cnrtMemTypeDevice = 2;

struct CNqueue_st;
struct CNnotifier_st;
typedef CNqueue_st* cnrtQueue_t;
typedef CNnotifier_st* cnrtNotifier_t;
// 8 bytes (unconfirmed type; passed by value like a 64-bit integer).
typedef struct cnrtIpcMemHandle_st {
  char reserved[8];
} cnrtIpcMemHandle;
// The leading fields (unconfirmed layout beyond type and device); callers pass room for more.
typedef struct cnrtPointerAttributes {
  int type;  // cnrtMemType_t
  int device;
  size_t size;
  void* devicePointer;
  void* hostPointer;
} cnrtPointerAttributes_t;

typedef cnrtRet_t (*PFN_cnrtGetLibVersion)(int* major, int* minor, int* patch);  // (unconfirmed)
typedef const char* (*PFN_cnrtGetErrorName)(cnrtRet_t error);                    // (unconfirmed)
typedef cnrtRet_t (*PFN_cnrtGetDeviceCount)(unsigned int* count);
typedef cnrtRet_t (*PFN_cnrtSetDevice)(int device);
typedef cnrtRet_t (*PFN_cnrtGetDevice)(int* device);
typedef cnrtRet_t (*PFN_cnrtDeviceGetPCIBusId)(char* pciBusId, int len, int device);
typedef cnrtRet_t (*PFN_cnrtMemGetInfo)(size_t* free, size_t* total);
typedef cnrtRet_t (*PFN_cnrtMalloc)(void** ptr, size_t bytes);
typedef cnrtRet_t (*PFN_cnrtFree)(void* ptr);
typedef cnrtRet_t (*PFN_cnrtHostMalloc)(void** ptr, size_t bytes);
typedef cnrtRet_t (*PFN_cnrtFreeHost)(void* ptr);
typedef cnrtRet_t (*PFN_cnrtMemcpyAsync)(void* dst, void* src, size_t bytes, cnrtQueue_t queue,
                                         cnrtMemTransDir_t dir);
typedef cnrtRet_t (*PFN_cnrtQueueCreate)(cnrtQueue_t* queue);
typedef cnrtRet_t (*PFN_cnrtQueueDestroy)(cnrtQueue_t queue);
typedef cnrtRet_t (*PFN_cnrtNotifierCreate)(cnrtNotifier_t* notifier);
typedef cnrtRet_t (*PFN_cnrtNotifierDestroy)(cnrtNotifier_t notifier);
typedef cnrtRet_t (*PFN_cnrtPlaceNotifier)(cnrtNotifier_t notifier, cnrtQueue_t queue);
typedef cnrtRet_t (*PFN_cnrtQueryNotifier)(cnrtNotifier_t notifier);
typedef cnrtRet_t (*PFN_cnrtAcquireMemHandle)(cnrtIpcMemHandle* handle, void* ptr);
typedef cnrtRet_t (*PFN_cnrtMapMemHandle)(void** ptr, cnrtIpcMemHandle handle, int flag);
typedef cnrtRet_t (*PFN_cnrtUnMapMemHandle)(void* ptr);
typedef cnrtRet_t (*PFN_cnrtPointerGetAttributes)(cnrtPointerAttributes_t* attr, const void* ptr);

// ---- CNDrv --------------------------------------------------------------------------------
typedef enum CNresult_enum {
  CN_SUCCESS = 0,
  CN_ERROR_NOT_READY = 1,
  CN_ERROR_NOT_INITIALIZED = 100002,
  CN_ERROR_DEINITIALIZED = 100003,
  CN_ERROR_NO_DEVICE = 100004,
  CN_ERROR_INVALID_DEVICE = 100005,
  CN_ERROR_INVALID_VALUE = 100006,
  CN_OPS_ERROR_NOT_SUPPORTED = 100050,
  CN_MEMORY_ERROR_OUT_OF_MEMORY = 100100,
  CN_MEMORY_ERROR_INVALID_ADDRESS = 100102
} CNresult;
typedef uint64_t cn_uint64_t;
typedef uint64_t CNdev;
typedef uint64_t CNaddr;
typedef struct CNuuid_st {
  char bytes[16];
} CNuuid;
typedef enum CNdevice_attribute_enum {
  CN_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0x313
} CNdevice_attribute;
typedef enum cn_mem_range_handle_type {
  CN_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 0x1
} CNmemRangeHandleType;

typedef CNresult (*PFN_cnInit)(unsigned int flags);
typedef CNresult (*PFN_cnDriverGetVersion)(int* major, int* minor, int* patch);
typedef CNresult (*PFN_cnGetErrorName)(CNresult error, const char** pstr);
typedef CNresult (*PFN_cnDeviceGet)(CNdev* pdev, int ordinal);
typedef CNresult (*PFN_cnDeviceGetName)(char* name, unsigned int len, CNdev dev);
typedef CNresult (*PFN_cnDeviceTotalMem)(cn_uint64_t* pbytes, CNdev dev);
typedef CNresult (*PFN_cnDeviceGetUuid)(CNuuid* uuid, CNdev dev);
typedef CNresult (*PFN_cnDeviceGetAttribute)(int* pi, CNdevice_attribute attrib, CNdev dev);
typedef CNresult (*PFN_cnMemGetAddressRange)(CNaddr* pbase, cn_uint64_t* psize,
                                             CNaddr addr);  // (unconfirmed)
typedef CNresult (*PFN_cnMemGetHandleForAddressRange)(void* handle, CNaddr dptr, size_t size,
                                                      CNmemRangeHandleType handleType,
                                                      cn_uint64_t flags);

// CNRT 5 introduced queues and notifiers in this shape (and dropped cnrtInit).
constexpr int kMinMajorVersion = 5;

}  // namespace hmc::vendor::mlu
