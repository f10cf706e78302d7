// Device code of the CUDA backend (cuda.c holds the descriptor): weights stay in their
// GGUF blocks on the device and are dequantized inside the matrix-vector kernel.
// Plain C entry points, so the C side needs no CUDA headers. Built only with `make CUDA=1`.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

// ggml type ids (include/llambda.h)
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q8_0 = 8, T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_BF16 = 30 };

__device__ __forceinline__ float f16(const uint8_t *p) {
    uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
    return __half2float(__ushort_as_half(h));
}

// the 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (12 packed bytes)
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else { *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

// Element e of a row, dequantized. Block layouts as in src/internal.h.
__device__ float dequant(int type, const uint8_t *row, int64_t e) {
    switch (type) {
    case T_F32: return ((const float *)row)[e];
    case T_F16: return f16(row + 2 * e);
    case T_BF16: { uint32_t u = (uint32_t)(row[2 * e] | (row[2 * e + 1] << 8)) << 16; return __uint_as_float(u); }
    case T_Q8_0: { const uint8_t *b = row + (e / 32) * 34; return f16(b) * (float)(int8_t)b[2 + e % 32]; }
    case T_Q4_0: {
        const uint8_t *b = row + (e / 32) * 18;
        int j = (int)(e % 32), q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
        return f16(b) * (float)(q - 8);
    }
    case T_Q4_K: case T_Q5_K: {
        int k5 = type == T_Q5_K;
        const uint8_t *b = row + (e / 256) * (k5 ? 176 : 144);
        int i = (int)(e % 256), sb = i / 32, l = i % 32, sc, mn;
        scale_min_k4(sb, b + 4, &sc, &mn);
        const uint8_t *qs = b + (k5 ? 48 : 16);
        int q = (sb & 1) ? (qs[32 * (sb / 2) + l] >> 4) : (qs[32 * (sb / 2) + l] & 0xF);
        if (k5) q += ((b[16 + l] >> sb) & 1) << 4;
        return f16(b) * (float)sc * (float)q - f16(b + 2) * (float)mn;
    }
    case T_Q6_K: {
        const uint8_t *b = row + (e / 256) * 210, *ql = b, *qh = b + 128;
        const int8_t *scales = (const int8_t *)(b + 192);
        int i = (int)(e % 256), h = i / 128, t = (i % 128) / 32, l = i % 32;
        int lb = ql[64 * h + l + 32 * (t & 1)], nib = t < 2 ? (lb & 0xF) : (lb >> 4);
        int q = (nib | (((qh[32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
        return f16(b + 208) * (float)scales[8 * h + 2 * t + l / 16] * (float)q;
    }
    }
    return 0.f;
}

// y[t][r] = sum_e W[r][e] x[t][e]: one block of 128 threads per (row, token).
__global__ void matvec(int type, const uint8_t *w, size_t row_bytes, int64_t cols, int64_t rows,
                       const float *x, float *y) {
    int64_t r = blockIdx.x, t = blockIdx.y;
    const uint8_t *row = w + (size_t)r * row_bytes;
    const float *xt = x + (size_t)t * (size_t)cols;
    float s = 0.f;
    for (int64_t e = threadIdx.x; e < cols; e += blockDim.x) s += dequant(type, row, e) * xt[e];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    __shared__ float part[4];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) y[(size_t)t * (size_t)rows + (size_t)r] = part[0] + part[1] + part[2] + part[3];
}

extern "C" {

const char *llcu_error_string(int err) { return cudaGetErrorString((cudaError_t)err); }

int llcu_device_count(int *n) { return (int)cudaGetDeviceCount(n); }

int llcu_device_info(int dev, char *name, size_t name_size, uint64_t *memory, int *runtime_version) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) return (int)e;
    strncpy(name, p.name, name_size - 1);
    name[name_size - 1] = 0;
    *memory = (uint64_t)p.totalGlobalMem;
    return (int)cudaRuntimeGetVersion(runtime_version);
}

int llcu_set_device(int dev) { return (int)cudaSetDevice(dev); }

int llcu_upload(const void *host, size_t len, void **dev) {
    cudaError_t e = cudaMalloc(dev, len);
    if (e != cudaSuccess) return (int)e;
    e = cudaMemcpy(*dev, host, len, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) { cudaFree(*dev); *dev = NULL; }
    return (int)e;
}

int llcu_alloc(size_t len, void **dev) { return (int)cudaMalloc(dev, len); }
void llcu_free(void *dev) { if (dev) cudaFree(dev); }

int llcu_type_supported(int type) {
    return type == T_F32 || type == T_F16 || type == T_BF16 || type == T_Q8_0 || type == T_Q4_0 ||
           type == T_Q4_K || type == T_Q5_K || type == T_Q6_K;
}

// x (host) -> dx, kernel, dy -> y (host); synchronous.
int llcu_matmul(int type, const void *w, size_t row_bytes, int64_t rows, int64_t cols, const float *x, int n_tok,
                float *y, void *dx, void *dy) {
    cudaError_t e = cudaMemcpy(dx, x, (size_t)n_tok * (size_t)cols * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return (int)e;
    dim3 grid((unsigned)rows, (unsigned)n_tok);
    matvec<<<grid, 128>>>(type, (const uint8_t *)w, row_bytes, cols, rows, (const float *)dx, (float *)dy);
    if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    return (int)cudaMemcpy(y, dy, (size_t)n_tok * (size_t)rows * sizeof(float), cudaMemcpyDeviceToHost);
}

}  // extern "C"
