// devmem_map: can the host CPU store straight into GPU device memory on this machine, and if so,
// how soon does a persistent kernel polling that memory see the store?
//
// A ring in device memory that the CPU writes through a BAR1 mapping is what GDRCopy gives
// DOCA GPUNetIO and l2fwd-nv: the kernel's poll then reads its own memory, not host memory across
// PCIe (~1.9 us a round trip here). Without the gdrdrv module, the one mapping CUDA itself offers
// is a dma-buf export of a device range (cuMemGetHandleForAddressRange); whether the kernel
// driver lets a process mmap that dma-buf is what this tool finds out, then (if it can) it times
// a doorbell both ways:
//   host  the kernel polls a word in mapped pinned host memory (what pktwarp's mapped rings do)
//   bar1  the kernel polls a word in device memory that the CPU stores through the mapping
// Each trip: the host stores seq, the kernel (one thread) sees it and stores seq into an ack
// word in pinned host memory, the host sees the ack.
//
// usage: devmem_map [TRIPS]
// Build: nvcc -O3 -std=c++17 -arch=sm_90 tools/gpu-probes/devmem_map.cu -o devmem_map -lcuda
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>
#include <immintrin.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include "tool_io.cuh" /* CK, gtimer */

static const size_t SPAN = 2u << 20; // one 2 MiB range: the dma-buf export wants page-aligned ends

__device__ __forceinline__ uint32_t ld_sys(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// One thread: wait for each seq in turn at `bell`, answer it at `ack`; 0xffffffff ends it. A
// bounded wait (2 s of %globaltimer per trip) so a host that died cannot hang the GPU.
__global__ void doorbell(const uint32_t *bell, volatile uint32_t *ack, uint32_t *timed_out) {
    uint64_t t0 = gtimer();
    for (uint32_t want = 1;; ++want) {
        uint32_t v;
        for (;;) {
            v = ld_sys(bell);
            if (v == want || v == 0xffffffffu) break;
            if (gtimer() - t0 > 2000000000ull) {
                *timed_out = 1;
                return;
            }
        }
        if (v == 0xffffffffu) return;
        *ack = v;
        t0 = gtimer();
    }
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Times `trips` doorbells through `bell_host` (the host's view of the bell word) and returns the
// sorted round trips in us; empty if the kernel timed out.
static std::vector<double> time_doorbell(volatile uint32_t *bell_host, const uint32_t *bell_dev,
                                         uint32_t trips) {
    uint32_t *ack_h, *ack_d, *to;
    CK(cudaHostAlloc(&ack_h, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&ack_d, ack_h, 0));
    CK(cudaMallocManaged(&to, 4));
    *to = 0;
    *(volatile uint32_t *)ack_h = 0;
    *bell_host = 0;
    _mm_sfence();
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    doorbell<<<1, 1, 0, s>>>(bell_dev, ack_d, to);
    CK(cudaGetLastError());
    std::vector<double> rt;
    rt.reserve(trips);
    bool ok = true;
    for (uint32_t seq = 1; seq <= trips && ok; ++seq) {
        double t0 = now_us();
        *bell_host = seq;
        _mm_sfence(); // a store through a write-combining mapping leaves the core here
        while (*(volatile uint32_t *)ack_h != seq) {
            if (now_us() - t0 > 1e6) {
                ok = false;
                break;
            }
        }
        rt.push_back(now_us() - t0);
    }
    *bell_host = 0xffffffffu;
    _mm_sfence();
    CK(cudaStreamSynchronize(s));
    if (*to || !ok) rt.clear();
    CK(cudaStreamDestroy(s));
    CK(cudaFreeHost(ack_h));
    CK(cudaFree(to));
    std::sort(rt.begin(), rt.end());
    return rt;
}

static void print_row(const char *name, std::vector<double> rt) {
    if (rt.empty()) {
        printf("%-6s doorbell: timed out\n", name);
        return;
    }
    auto q = [&](double f) { return rt[std::min(rt.size() - 1, (size_t)(f * rt.size()))]; };
    printf("%-6s doorbell round trip us: p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  (%zu trips)\n",
           name, q(0.5), q(0.99), q(0.999), rt.back(), rt.size());
}

static const char *cu_err(CUresult r) {
    const char *s = nullptr;
    cuGetErrorName(r, &s);
    return s ? s : "?";
}

int main(int argc, char **argv) {
    uint32_t trips = argc > 1 ? (uint32_t)strtoul(argv[1], nullptr, 10) : 20000;
    CK(cudaSetDevice(0));
    CK(cudaFree(nullptr));
    CUdevice dev;
    cuDeviceGet(&dev, 0);
    struct {
        const char *name;
        CUdevice_attribute a;
    } attrs[] = {
        {"DMA_BUF_SUPPORTED", CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED},
        {"GPU_DIRECT_RDMA_SUPPORTED", CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED},
        {"PAGEABLE_MEMORY_ACCESS", CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS},
        {"HOST_NATIVE_ATOMIC_SUPPORTED", CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED},
        {"CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM",
         CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM},
    };
    for (auto &a : attrs) {
        int v = -1;
        CUresult r = cuDeviceGetAttribute(&v, a.a, dev);
        printf("attribute %s = %d (%s)\n", a.name, v, cu_err(r));
    }
    int gdr = open("/dev/gdrdrv", O_RDWR);
    printf("/dev/gdrdrv: %s\n", gdr >= 0 ? "present" : strerror(errno));
    if (gdr >= 0) close(gdr);

    // The host-memory doorbell first: the figure to beat.
    uint32_t *bell_h, *bell_hd;
    CK(cudaHostAlloc(&bell_h, 64, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&bell_hd, bell_h, 0));
    print_row("host", time_doorbell(bell_h, bell_hd, trips));

    void *d = nullptr;
    CK(cudaMalloc(&d, 2 * SPAN));
    // Round up inside the allocation to a SPAN boundary so both ends are page-aligned.
    CUdeviceptr base = ((CUdeviceptr)d + SPAN - 1) & ~(CUdeviceptr)(SPAN - 1);
    const struct {
        const char *name;
        unsigned long long flags;
    } tries[] = {{"dma-buf", 0},
                 {"dma-buf (PCIe mapping type)", CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE}};
    void *map = MAP_FAILED;
    for (auto &t : tries) {
        int fd = -1;
        CUresult r = cuMemGetHandleForAddressRange(&fd, base, SPAN,
                                                   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, t.flags);
        printf("%s export of %zu bytes: %s, fd %d\n", t.name, SPAN, cu_err(r), fd);
        if (r != CUDA_SUCCESS) continue;
        void *m = mmap(nullptr, SPAN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        // errno 524 is the kernel's ENOTSUPP (the exporter has no mmap for this memory).
        printf("%s mmap read/write: %s (errno %d)\n", t.name, m == MAP_FAILED ? strerror(errno) : "mapped",
               m == MAP_FAILED ? errno : 0);
        if (m == MAP_FAILED) {
            void *ro = mmap(nullptr, SPAN, PROT_READ, MAP_SHARED, fd, 0);
            printf("%s mmap read-only: %s (errno %d)\n", t.name, ro == MAP_FAILED ? strerror(errno) : "mapped",
                   ro == MAP_FAILED ? errno : 0);
            if (ro != MAP_FAILED) munmap(ro, SPAN);
        }
        close(fd);
        if (m != MAP_FAILED) {
            map = m;
            break;
        }
    }
    if (map == MAP_FAILED) {
        printf("result: the CPU cannot store into device memory here (no gdrdrv, no dma-buf mmap)\n");
        return 0;
    }
    // Check the mapping is the device range: CPU stores, a device-to-host copy reads them back.
    volatile uint32_t *w = (volatile uint32_t *)map;
    for (uint32_t i = 0; i < 1024; ++i) w[i] = 0x5a5a0000u + i;
    _mm_sfence();
    std::vector<uint32_t> back(1024);
    CK(cudaMemcpy(back.data(), (void *)base, 4096, cudaMemcpyDeviceToHost));
    uint32_t bad = 0;
    for (uint32_t i = 0; i < 1024; ++i) bad += back[i] != 0x5a5a0000u + i;
    printf("mapping check: %u of 1024 words wrong\n", bad);
    if (bad) return 1;
    print_row("bar1", time_doorbell(w, (const uint32_t *)base, trips));
    print_row("host", time_doorbell(bell_h, bell_hd, trips));
    munmap(map, SPAN);
    return 0;
}
