"""One-off probe of the H100 box: where cold load_inline time goes, fork+CUDA init cost,
namespace support. Output is a table; used to choose the build fast path (see docs/benchmarks.md)."""
import ctypes, os, subprocess, sys, tempfile, time, shutil

def t(label, fn):
    t0 = time.perf_counter(); r = fn(); dt = time.perf_counter() - t0
    print(f"{label:60s} {dt:8.2f} s", flush=True); return r

ADD_CU = r'''
#include <torch/extension.h>
__global__ void add_k(const float* a, const float* b, float* o, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n) o[i]=a[i]+b[i];}
torch::Tensor add(torch::Tensor a, torch::Tensor b){ auto o=torch::empty_like(a); int n=a.numel();
 add_k<<<(n+255)/256,256>>>(a.data_ptr<float>(), b.data_ptr<float>(), o.data_ptr<float>(), n); return o;}
'''
CPP = "torch::Tensor add(torch::Tensor a, torch::Tensor b);"

def load(tag, **kw):
    from torch.utils.cpp_extension import load_inline
    d = tempfile.mkdtemp(prefix=tag)
    return load_inline(name="add_"+tag, cpp_sources=CPP, cuda_sources=ADD_CU, functions=["add"], build_directory=d, **kw)

import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0])
print("nproc", os.cpu_count(), "ccache", shutil.which("ccache"), "bwrap", shutil.which("bwrap"), "ncu", shutil.which("ncu"))
print(subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.splitlines()[-1])
print(subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0])
mode = sys.argv[1] if len(sys.argv) > 1 else "all"
if mode in ("all", "build"):
    t("load_inline default (all visible archs)", lambda: load("a"))
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
    t("load_inline arch 9.0", lambda: load("b"))
    t("load_inline arch 9.0 use_pch (1st, builds pch)", lambda: load("c", use_pch=True))
    t("load_inline arch 9.0 use_pch (2nd)", lambda: load("d", use_pch=True))
    inc = " ".join("-I" + p for p in __import__("torch.utils.cpp_extension", fromlist=["x"]).include_paths(device_type="cuda"))
    d = tempfile.mkdtemp()
    for hdr in ["torch/extension.h", "torch/types.h", "ATen/ATen.h", "ATen/core/Tensor.h"]:
        src = ADD_CU.replace("torch/extension.h", hdr)
        open(f"{d}/k.cu", "w").write(src)
        t(f"nvcc -c .cu with <{hdr}>", lambda: subprocess.run(f"nvcc -c {d}/k.cu -o {d}/k.o -std=c++17 -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -O3 {inc}", shell=True, capture_output=True))
        src2 = f"#include <{hdr}>\n" + CPP
        open(f"{d}/m.cpp", "w").write(src2)
        t(f"g++ -c .cpp with <{hdr}>", lambda: subprocess.run(f"g++ -c {d}/m.cpp -o {d}/m.o -std=c++17 -fPIC -O2 {inc} -I{sys.prefix}/include/python3.12", shell=True, capture_output=True))
if mode in ("all", "fork"):
    def child_cuda():
        pid = os.fork()
        if pid == 0:
            t0 = time.perf_counter(); torch.ones(1, device="cuda"); torch.cuda.synchronize()
            print(f"{'  forked child: first CUDA op':60s} {time.perf_counter()-t0:8.2f} s", flush=True); os._exit(0)
        os.waitpid(pid, 0)
    for i in range(3): t(f"fork + CUDA init + exit #{i}", child_cuda)
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:
        r = libc.unshare(0x10000000 | 0x00020000 | 0x20000000 | 0x40000000)
        print("unshare user|ns|pid|net:", r, os.strerror(ctypes.get_errno()), flush=True)
        if r == 0:
            open("/proc/self/setgroups","w").write("deny"); open("/proc/self/uid_map","w").write("0 0 1"); open("/proc/self/gid_map","w").write("0 0 1")
            p2 = os.fork()
            if p2 == 0:
                libc.mount(b"none", b"/", None, 0x4000 | (1 << 18), None)
                print("mount proc:", libc.mount(b"proc", b"/proc", b"proc", 14, None), flush=True)
                t0 = time.perf_counter(); x = torch.ones(1, device="cuda") + 1; torch.cuda.synchronize()
                print("CUDA inside namespaces OK", x.item(), f"{time.perf_counter()-t0:.2f}s", flush=True); os._exit(0)
            os.waitpid(p2, 0)
        os._exit(0)
    os.waitpid(pid, 0)
    t0 = time.perf_counter(); subprocess.run([sys.executable, "-c", "import torch; torch.ones(1,device='cuda'); torch.cuda.synchronize()"]); print(f"{'fresh python: import torch + CUDA init':60s} {time.perf_counter()-t0:8.2f} s")
