"""The keyed mix and projections of keyed.py as single CUDA kernels (floating float32, float16 and bfloat16 tensors).

Why: on a GPU the harness's share of a timed call was several of torch's kernels per tensor (a Philox draw, a lerp,
a where for kept elements; a rolled weight draw, a multiply, a nan_to_num, a sum per output), about 44 bytes of
traffic per element against the 8 of a memory-bound kernel under test: the null batch took it off, but its noise
stayed in the figure (docs/benchmarks.md §15, session 17), and a candidate that rewrites the harness in its own
process could gain up to that share (docs/threat-model.md, "Optimise our harness away"). Here the mix reads the two
bases (and the kept mask, where there is one) and writes the input: 12 bytes per float32 element; the projection
reads the output once and makes its weights in registers: 4 bytes per element. Each is one launch.

Random numbers are a counter-based hash (splitmix64's finaliser) of the call's seed (keyed._seed) and the element's
index: nothing is pooled, every call's draws are fresh, and every job that runs this code on the same device makes
the same ones. The projection's weights are Gaussian (Box-Muller of one hash), and the reference's job computes the
bound's sums with the same weights in one pass (bound_sums), so that keyed.projection_bound's formula holds as it is.

The kernels are compiled by NVRTC (no headers; about 0.4 s, most of it ptxas) in the reference's job, in a thread
started with the job, and only ever used where that job could compile and load them: it decides (`fused_mix` in its
reply to "bases") and hands the CUBIN to the candidate's job through the parent, so that both mix and project alike
and the candidate's job compiles nothing; a candidate's job that does otherwise only gets its own outputs wrong.
"""
from __future__ import annotations

import ctypes
import threading
from concurrent.futures import Future
from typing import Any

import torch

SOURCE = r"""
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

__device__ __forceinline__ u64 hash64(u64 seed, u64 i) {
    u64 z = seed + (i + 1ull) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// Two uniforms in [0, 1) of 24 bits each from one hash: elements 2m and 2m + 1 share hash m.
__device__ __forceinline__ void uniform2(u64 seed, u64 pair, float& u0, float& u1) {
    u64 h = hash64(seed, pair);
    u0 = (float)(h >> 40) * 5.9604645e-8f;
    u1 = (float)((h >> 16) & 0xFFFFFFull) * 5.9604645e-8f;
}
__device__ __forceinline__ float uniform(u64 seed, u64 i) {
    float u0, u1; uniform2(seed, i >> 1, u0, u1); return (i & 1ull) ? u1 : u0;
}
// Two standard normals from one hash (Box-Muller, both of its outputs), for elements 2m and 2m + 1.
__device__ __forceinline__ void gaussian2(u64 seed, u64 pair, float& g0, float& g1) {
    u64 h = hash64(seed, pair);
    float u1 = (float)((h >> 40) + 1ull) * 5.9604645e-8f;  // (0, 1]
    float u2 = (float)(h & 0xFFFFFFull) * 5.9604645e-8f;
    float r = sqrtf(-2.0f * __logf(u1)), s, c;
    __sincosf(6.2831853f * u2, &s, &c);  // fast intrinsics: the projection stays memory-bound
    g0 = r * c; g1 = r * s;
}
__device__ __forceinline__ float gaussian(u64 seed, u64 i) {
    float g0, g1; gaussian2(seed, i >> 1, g0, g1); return (i & 1ull) ? g1 : g0;
}

__device__ __forceinline__ float load_f32(const float* p, u64 i) { return p[i]; }
__device__ __forceinline__ void store_f32(float* p, u64 i, float v) { p[i] = v; }
__device__ __forceinline__ float load_f16(const u16* p, u64 i) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(p[i])); return f;
}
__device__ __forceinline__ void store_f16(u16* p, u64 i, float v) {
    u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v)); p[i] = h;
}
__device__ __forceinline__ float load_bf16(const u16* p, u64 i) { return __uint_as_float(((u32)p[i]) << 16); }
__device__ __forceinline__ void store_bf16(u16* p, u64 i, float v) {
    u32 u = __float_as_uint(v);
    p[i] = (v != v) ? (u16)0x7FC0 : (u16)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
}

// Groups of four consecutive elements (group g: elements 4g..4g+3), one 16-byte (float) or 8-byte (half) access where
// the tensor is aligned for it, four single ones where not: the same values and order either way. Four elements per
// access keep enough bytes in flight to run at the memory's speed (one float per thread ran the mix at ~1.1 TB/s and
// the projection at ~1.1 TB/s on the H100, most of every memory-bound batch: docs/benchmarks.md §15, session 19).
__device__ __forceinline__ void load4_f32(const float* p, u64 g, bool vec, float v[4]) {
    if (vec) { float4 t = reinterpret_cast<const float4*>(p)[g]; v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w; }
    else { for (int k = 0; k < 4; ++k) v[k] = p[4 * g + k]; }
}
__device__ __forceinline__ void store4_f32(float* p, u64 g, bool vec, const float v[4]) {
    if (vec) { reinterpret_cast<float4*>(p)[g] = make_float4(v[0], v[1], v[2], v[3]); }
    else { for (int k = 0; k < 4; ++k) p[4 * g + k] = v[k]; }
}
#define HALF4(SUFFIX) \
__device__ __forceinline__ void load4_##SUFFIX(const u16* p, u64 g, bool vec, float v[4]) { \
    if (vec) { \
        uint2 t = reinterpret_cast<const uint2*>(p)[g]; \
        u16 h[4] = {(u16)(t.x & 0xFFFFu), (u16)(t.x >> 16), (u16)(t.y & 0xFFFFu), (u16)(t.y >> 16)}; \
        for (int k = 0; k < 4; ++k) v[k] = load_##SUFFIX(h, k); \
    } else { for (int k = 0; k < 4; ++k) v[k] = load_##SUFFIX(p, 4 * g + k); } \
} \
__device__ __forceinline__ void store4_##SUFFIX(u16* p, u64 g, bool vec, const float v[4]) { \
    u16 h[4]; \
    for (int k = 0; k < 4; ++k) store_##SUFFIX(h, k, v[k]); \
    if (vec) { reinterpret_cast<uint2*>(p)[g] = make_uint2((u32)h[0] | ((u32)h[1] << 16), (u32)h[2] | ((u32)h[3] << 16)); } \
    else { for (int k = 0; k < 4; ++k) p[4 * g + k] = h[k]; } \
}
HALF4(f16)
HALF4(bf16)

#define FIGURES 6  // keep in step with FIGURES below

__device__ __forceinline__ bool finite(float v) { return (__float_as_uint(v) & 0x7F800000u) != 0x7F800000u; }

__device__ __forceinline__ double block_sum(double v, double* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xFFFFFFFFu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? shared[threadIdx.x] : 0.0;
    if (warp == 0) for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xFFFFFFFFu, v, o);
    __syncthreads();
    return v;
}

// out[i] = scale (a[i] + u_i (b[i] - a[i])), u_i uniform in [0, 1) fresh for the seed; scale a[i] where kept[i]. Computed
// in float32 and held between the two bases (rounding could step past the nearer one) before the scale: 1 for a plain
// call, +-keyed.WIDE_SCALE for a wide one, in the same pass (a second pass over a 256 MiB input had cost a tenth of a
// silu's call and widened the harness's share that the null batch takes off). Groups of four elements are visited from a
// keyed start (as the projection's are): work a forward leaves running on a stream of its own, in the elements' order,
// overlaps the harness's kernels only by reading inputs not yet written or writing outputs already read. The last
// n mod 4 elements are block 0's. `vec`: every pointer is aligned for the group's single access.
#define MIX(NAME, T, SUFFIX) \
extern "C" __global__ void NAME(const T* a, const T* b, const unsigned char* kept, T* out, u64 n, u64 seed, u64 vec, \
                                float scale) { \
    const u64 groups = n >> 2; \
    const u64 start = groups ? hash64(seed, n) % groups : 0ull;  /* no division by zero for a tiny tensor */ \
    for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k < groups; k += (u64)gridDim.x * blockDim.x) { \
        const u64 g = k + start < groups ? k + start : k + start - groups; \
        float x[4], y[4], u[4], v[4]; \
        load4_##SUFFIX(a, g, vec != 0, x); \
        load4_##SUFFIX(b, g, vec != 0, y); \
        uniform2(seed, 2 * g, u[0], u[1]); \
        uniform2(seed, 2 * g + 1, u[2], u[3]); \
        for (int j = 0; j < 4; ++j) { \
            float m = fmaf(u[j], y[j] - x[j], x[j]); \
            m = fminf(fmaxf(m, fminf(x[j], y[j])), fmaxf(x[j], y[j])); \
            v[j] = ((kept != 0 && kept[4 * g + j]) ? x[j] : m) * scale; \
        } \
        store4_##SUFFIX(out, g, vec != 0, v); \
    } \
    if (blockIdx.x == 0 && threadIdx.x < (n & 3ull)) { \
        const u64 i = 4 * groups + threadIdx.x; \
        float x = load_##SUFFIX(a, i), y = load_##SUFFIX(b, i); \
        float m = fmaf(uniform(seed, i), y - x, x); \
        m = fminf(fmaxf(m, fminf(x, y)), fmaxf(x, y)); \
        store_##SUFFIX(out, i, ((kept != 0 && kept[i]) ? x : m) * scale); \
    } \
}
MIX(keyed_mix_f32, float, f32)
MIX(keyed_mix_f16, u16, f16)
MIX(keyed_mix_bf16, u16, bf16)

// One element's share of the projection and, from the same load and the same weight, of the bound's sums
// (keyed.projection_bound): w y where finite, then with a = |y| (non-finite y counted as zero) w^2 a^2, w^2 a, w^2,
// |w| a, and the largest a. In double: a bound must not overflow where the outputs are large.
__device__ __forceinline__ void take(float w, float y, double s[FIGURES - 1], float& most) {
    const float p = w * y;
    if (finite(p)) s[0] += (double)p;
    const float a = finite(y) ? fabsf(y) : 0.0f;
    const double w2 = (double)w * (double)w, v = (double)a;
    s[1] += w2 * v * v; s[2] += w2 * v; s[3] += w2; s[4] += fabs((double)w) * v;
    most = fmaxf(most, a);
}

__device__ __forceinline__ float block_max(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xFFFFFFFFu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x >> 5)) ? shared[threadIdx.x] : 0.0f;
    if (warp == 0) for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xFFFFFFFFu, v, o));
    __syncthreads();
    return v;
}

// result[0..FIGURES) = the projection sum_i w_i y_i (non-finite terms counted as zero), then the bound's sums
// sum w^2 y^2, sum w^2 |y|, sum w^2, sum |w y| and max |y|: one pass over the output gives both, so that the
// reference's timed eager batch brings the bounds of its calls at no extra traffic, and every job's batches (the
// candidate's and the null ones included) do exactly the same work per call. Each block writes its figures to
// partials, and the last block to finish (counted in *done, which it sets back to zero) adds them up in block order,
// so that one launch gives the figures and every job reduces alike (groups of four from a keyed start, as the mix).
#define PROJECT(NAME, T, SUFFIX) \
extern "C" __global__ void NAME(const T* y, double* partials, unsigned int* done, double* result, u64 n, u64 seed, \
                                u64 vec) { \
    __shared__ double shared[32]; \
    __shared__ float mosts[32]; \
    __shared__ bool last; \
    double s[FIGURES - 1] = {0.0, 0.0, 0.0, 0.0, 0.0}; \
    float most = 0.0f; \
    const u64 groups = n >> 2; \
    const u64 start = groups ? hash64(seed, n) % groups : 0ull;  /* no division by zero for a tiny tensor */ \
    for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k < groups; k += (u64)gridDim.x * blockDim.x) { \
        const u64 g = k + start < groups ? k + start : k + start - groups; \
        float v[4], w[4]; \
        load4_##SUFFIX(y, g, vec != 0, v); \
        gaussian2(seed, 2 * g, w[0], w[1]); \
        gaussian2(seed, 2 * g + 1, w[2], w[3]); \
        for (int j = 0; j < 4; ++j) take(w[j], v[j], s, most); \
    } \
    if (blockIdx.x == 0 && threadIdx.x < (n & 3ull)) { \
        const u64 i = 4 * groups + threadIdx.x; \
        take(gaussian(seed, i), load_##SUFFIX(y, i), s, most); \
    } \
    for (int k = 0; k < FIGURES - 1; ++k) s[k] = block_sum(s[k], shared); \
    most = block_max(most, mosts); \
    if (threadIdx.x == 0) { \
        double* p = partials + FIGURES * (u64)blockIdx.x; \
        for (int k = 0; k < FIGURES - 1; ++k) p[k] = s[k]; \
        p[FIGURES - 1] = (double)most; \
        __threadfence(); \
        last = atomicAdd(done, 1u) == gridDim.x - 1; \
    } \
    __syncthreads(); \
    if (!last) return; \
    double t[FIGURES - 1] = {0.0, 0.0, 0.0, 0.0, 0.0}; \
    float m = 0.0f; \
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) { \
        const volatile double* p = partials + FIGURES * (u64)b; \
        for (int k = 0; k < FIGURES - 1; ++k) t[k] += p[k]; \
        m = fmaxf(m, (float)p[FIGURES - 1]); \
    } \
    for (int k = 0; k < FIGURES - 1; ++k) t[k] = block_sum(t[k], shared); \
    m = block_max(m, mosts); \
    if (threadIdx.x == 0) { \
        for (int k = 0; k < FIGURES - 1; ++k) result[k] = t[k]; \
        result[FIGURES - 1] = (double)m; \
        *done = 0u; \
    } \
}
PROJECT(keyed_project_f32, float, f32)
PROJECT(keyed_project_f16, u16, f16)
PROJECT(keyed_project_bf16, u16, bf16)

// The projection's weights themselves (tests, and anyone checking the kernels against torch).
extern "C" __global__ void keyed_weights(float* w, u64 n, u64 seed) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        w[i] = gaussian(seed, i);
}
"""

SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
# The projection kernel's figures per output: the projection, then the bound's five sums (bound_sums).
FIGURES = 6
THREADS = 256
# Blocks at most, whatever the size: enough to fill any current GPU several times over; a grid-stride loop does the
# rest. Fixed, so that every job reduces in the same order (the projections are then bitwise alike for alike outputs).
MOST_BLOCKS = 1024


def supported(t: torch.Tensor) -> bool:
    return t.is_cuda and t.dtype in SUFFIX


class Kernels:
    """This module's kernels, loaded on the current device from a CUBIN (compile_source). `Kernels.load()` gives the ones
    installed in this process, compiling them first where none are; it raises where NVRTC or the driver cannot."""

    def __init__(self, binary: bytes) -> None:
        names = [f"keyed_{kind}_{suffix}" for kind in ("mix", "project") for suffix in SUFFIX.values()]
        module = torch.cuda._utils._cuda_load_module(binary, [*names, "keyed_weights"])
        self.binary = binary
        self._functions = {name: kernel.func for name, kernel in module.items()}
        self._cuda = torch.cuda._utils._get_gpu_runtime_library()
        self._scratch: tuple[torch.Tensor, torch.Tensor] | None = None

    @staticmethod
    def load() -> Kernels:
        return _installed[0] if _installed else install(compile_source(SOURCE, _arch()))

    def _launch(self, name: str, n: int, *args: Any) -> None:
        """`n`: the threads' work items (elements, or groups of four for the mix and the projection)."""
        blocks = _blocks(n)
        c_args = [ctypes.c_void_p(a.data_ptr()) if isinstance(a, torch.Tensor)
                  else a if isinstance(a, ctypes.c_float) else ctypes.c_uint64(a) for a in args]
        pointers = (ctypes.c_void_p * len(c_args))(*(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in c_args))
        stream = torch.cuda.current_stream().cuda_stream
        result = self._cuda.cuLaunchKernel(self._functions[name], blocks, 1, 1, THREADS, 1, 1, 0,
                                           ctypes.c_void_p(stream), pointers, None)
        if result != 0:
            raise RuntimeError(f"launching the harness's {name} kernel failed (CUDA driver error {result})")

    def mix(self, a: torch.Tensor, b: torch.Tensor, seed: int, kept: torch.Tensor | None,
            out: torch.Tensor | None = None, scale: float = 1.0) -> torch.Tensor:
        """The mix, times `scale`, into `out` (a contiguous tensor like a), or into a new tensor."""
        a, b = a.contiguous(), b.contiguous()
        if out is None:
            out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
        n = a.numel()
        kept_ptr: Any = kept if kept is not None else 0
        if kept is not None and kept.dtype != torch.bool:
            raise TypeError("the kept mask must be bool")
        self._launch(f"keyed_mix_{SUFFIX[a.dtype]}", n // 4, a, b, kept_ptr, out, n, seed, _vector(a, b, out),
                     ctypes.c_float(scale))
        return out

    def project(self, y: torch.Tensor, seed: int, result: int) -> None:
        """The FIGURES doubles at device address `result`: sum_i w_i y_i, then the bound's sums (bound_sums); no
        synchronisation, no allocation: one launch."""
        flat = y.detach().reshape(-1)
        n = flat.numel()
        if self._scratch is None or self._scratch[0].device != flat.device:
            # Each block's figures and the blocks' count; kernels on a stream run one after another, so one scratch
            # serves every projection of the process.
            self._scratch = (torch.empty(MOST_BLOCKS * FIGURES, dtype=torch.float64, device=flat.device),
                             torch.zeros(1, dtype=torch.int32, device=flat.device))
        partials, done = self._scratch
        self._launch(f"keyed_project_{SUFFIX[flat.dtype]}", n // 4, flat, partials, done, result, n, seed, _vector(flat))

    def bound_sums(self, y: torch.Tensor, seed: int) -> tuple[float, float, float, float, float]:
        """(sum w^2 y^2, sum w^2 |y|, sum w^2, sum |w y|, max |y|), non-finite y counted as zero: the projection's pass."""
        figures = torch.empty(FIGURES, dtype=torch.float64, device=y.device)
        self.project(y, seed, figures.data_ptr())
        sums = figures.tolist()
        return sums[1], sums[2], sums[3], sums[4], sums[5]

    def weights(self, n: int, seed: int, device: torch.device) -> torch.Tensor:
        out = torch.empty(n, dtype=torch.float32, device=device)
        self._launch("keyed_weights", n, out, n, seed)
        return out


_installed: list[Kernels] = []  # this process's kernels, once loaded


def install(binary: bytes) -> Kernels:
    """Load a CUBIN of SOURCE (this job's own compile, or the one the reference's job made and the parent handed over)
    as this process's kernels."""
    kernels = Kernels(binary)
    _installed[:] = [kernels]
    return kernels


def start_compile() -> Future[bytes]:
    """compile_source for the current device, in a thread: NVRTC is CPU work that needs no CUDA context (a few tenths
    of a second, most of it ptxas), so the reference's job starts it first and collects it when the timing begins. A
    daemon thread: a job that ends before it is done (an upload's one-call check) does not wait for it."""
    arch = _arch()
    future: Future[bytes] = Future()

    def build() -> None:
        try:
            future.set_result(compile_source(SOURCE, arch))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever collects it (unavailable())
            future.set_exception(exc)

    threading.Thread(target=build, name="kstudio-harness-build", daemon=True).start()
    return future


def _arch() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def compile_source(source: str, arch: str) -> bytes:
    """The source's CUBIN for `arch`, from libnvrtc directly: torch's _nvrtc_compile would also import
    torch.utils.cpp_extension and look up CUDA include paths, which a header-less source does not need."""
    nvrtc = torch.cuda._utils._get_nvrtc_library()
    program = ctypes.c_void_p()
    _check(nvrtc, nvrtc.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"keyed.cu", 0, None, None))
    try:
        options = [f"--gpu-architecture={arch}".encode()]
        array = (ctypes.c_char_p * len(options))(*options)
        if nvrtc.nvrtcCompileProgram(program, len(options), array) != 0:
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(program, log)
            raise RuntimeError(f"NVRTC could not compile the harness's kernels:\n{log.value.decode(errors='replace')}")
        size = ctypes.c_size_t()
        _check(nvrtc, nvrtc.nvrtcGetCUBINSize(program, ctypes.byref(size)))
        binary = ctypes.create_string_buffer(size.value)
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(program, binary))
        return binary.raw
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))


def _check(nvrtc: Any, result: int) -> None:
    if result != 0:
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"NVRTC failed: {nvrtc.nvrtcGetErrorString(result)!r} ({result})")


def _blocks(n: int) -> int:
    return max(1, min(MOST_BLOCKS, -(-n // THREADS)))


def _vector(*tensors: torch.Tensor) -> int:
    """1 where every tensor's address allows the kernels' one access per group of four elements (16 bytes for float32,
    8 for the half types), else 0 (four single accesses: the same values, the same order)."""
    return int(all(t.data_ptr() % (4 * t.element_size()) == 0 for t in tensors))


def unavailable(build: Future[bytes] | None) -> str:
    """Why this process cannot load the kernels ("" where it can, from `build` (start_compile) or by compiling them now).
    The reference's job asks, then tells the candidate's job (handing it the CUBIN through the parent); the reason
    goes into the verdict's timing record (Timing.harness)."""
    try:
        if not _installed:
            install(build.result(timeout=300) if build is not None else compile_source(SOURCE, _arch()))
    except Exception as exc:  # noqa: BLE001 - no NVRTC, an old driver, a CPU build: the torch path stands
        return f"{type(exc).__name__}: {exc}"[:500]
    return ""
