"""A labelled set of free-text searches (what the model types into search_knowledge), phrased the way an engineer
asks, not in the words the entries use: "avoid bank conflicts" is meant to find the entries that padded a
shared-memory tile, though none of them says "bank" (all-MiniLM-L6-v2 does not make that leap: docs/benchmarks.md,
"Knowledge retrieval by meaning"). Each entry reads as a distilled or curated lesson does (a title, a plain lesson,
what was tried and what it did) and is labelled with its topic; each topic has three entries, so precision@3 can
reach 1 on every query, and each query is labelled with the topic a performance engineer would want."""
from __future__ import annotations

# (topic, title, body): the stored entries.
ENTRIES: list[tuple[str, str, str]] = [
    ("padding", "transpose through a shared-memory tile, cuda on GPU: accepted, 3.10x vs eager",
     "Lesson: When a warp reads a column of a staged tile, its reads queue up one behind another; a spare element "
     "at the end of each row lets them all proceed together. Tried: a 32x32 tile in __shared__ memory declared "
     "[32][33]. Reasoning: with rows of exactly 32 floats every thread reading down a column hit the same memory "
     "module, one after another; one spare element per row spreads them out. Result: accepted; 3.10x vs eager."),
    ("padding", "matmul with padded tiles, cuda on GPU: accepted, 1.40x vs eager",
     "Lesson: Reading a square tile column-wise was 32 times slower than row-wise until each row got one extra "
     "float. Tried: A and B tiles in shared memory, the B tile padded by one float per row. Reasoning: the "
     "profiler showed the column reads of the unpadded tile replayed 32 times; padded, each is a single access."),
    ("padding", "lesson: pad or swizzle shared arrays read by column",
     "Lesson: Rows whose length is a multiple of 32 floats make a warp's column reads collide. A shared array of "
     "32-float rows indexed tile[threadIdx.x][k] serializes a warp's accesses. Add one element of padding per row,"
     " or XOR-swizzle the column index."),

    ("fusion", "linear + bias + GELU in one kernel, cuda on GPU: accepted, 1.80x vs eager",
     "Lesson: Doing the bias and the activation right after the product, in one kernel, avoids writing the big "
     "output and reading it back twice. Tried: the bias and the GELU applied in registers in the GEMM's epilogue, "
     "before the single store. Reasoning: eager writes the product, reads it back for the bias, writes it, reads "
     "it again for the activation; done in one kernel the output is written to DRAM once."),
    ("fusion", "residual add + layer norm fused, triton on GPU: accepted, 2.20x vs eager",
     "Lesson: Doing both steps in one kernel keeps the sum in registers: one read and one write of each row "
     "instead of three. Tried: the residual add and the layer norm in one Triton program per row. Reasoning: the "
     "sum never goes to global memory; each row is loaded once and stored once instead of three round trips."),
    ("fusion", "conv + batch norm + relu folded, cuda on GPU: accepted, 1.30x vs eager",
     "Lesson: Three kernels with two temporary tensors between them became one kernel that touches memory once. "
     "Tried: folding the batch-norm scale and shift into the convolution's weights and bias, and the ReLU into the"
     " same kernel. Reasoning: three kernels and two temporary tensors became one kernel."),

    ("vector", "relu with float4 loads, cuda on GPU: accepted, 1.60x vs eager",
     "Lesson: Moving four floats per memory instruction made a bandwidth-bound kernel faster. Tried: each thread "
     "handles four consecutive floats through a float4 pointer cast. Reasoning: one 128-bit load instead of four "
     "32-bit ones; the tail handled by a scalar loop."),
    ("vector", "half2 elementwise, cuda on GPU: accepted, 1.50x vs eager",
     "Lesson: Operating on pairs of half values per instruction doubled the throughput of the arithmetic. Tried: "
     "half2 arithmetic on pairs of values and 16-byte loads. Reasoning: each instruction moves and computes more "
     "data; alignment is checked before taking the vectorized path."),
    ("vector", "sigmoid with AVX2, cpp on CPU: accepted, 2.90x vs eager",
     "Lesson: Hand-written 256-bit vector code handled eight floats per instruction where the compiler produced "
     "scalar code. Tried: AVX2 intrinsics (_mm256 loads, eight floats per instruction) and OpenMP over chunks. "
     "Reasoning: the compiler did not vectorize the loop by itself because of the exp call."),

    ("warp", "row sum with warp shuffles, cuda on GPU: accepted, 2.40x vs eager",
     "Lesson: The last stage of a sum is done by the 32 lanes of a warp trading registers, with no barrier. Tried:"
     " each warp adds up its 32 partial sums with __shfl_down_sync in five steps, then one atomicAdd per warp. "
     "Reasoning: no __syncthreads and no shared array for the last stage of the sum."),
    ("warp", "softmax, one warp per row, cuda on GPU: accepted, 1.90x vs eager",
     "Lesson: Each row is owned by one warp, whose lanes combine their maxima and totals among themselves. Tried: "
     "the row max and the row total computed with __shfl_xor_sync butterflies, so every lane of the warp ends with"
     " the result without going through shared memory."),
    ("warp", "layer norm with warp shuffles, cuda on GPU: incorrect",
     "Lesson: A wrong participation mask in the register exchange silently dropped half the lanes. Tried: mean and"
     " variance summed across the lanes of a warp with __shfl_xor_sync, but with the mask 0xffff: half the lanes "
     "were left out and the variance came out wrong. Use 0xffffffff."),

    ("tensorcore", "matmul with WMMA, cuda on GPU: accepted, 2.10x vs eager",
     "Lesson: Tensor cores multiply a 16x16 tile per instruction, an order of magnitude beyond plain FMA loops. "
     "Tried: WMMA fragments of 16x16x16 in fp16 with float accumulators. Reasoning: tensor cores compute a whole "
     "tile per instruction; the plain FMA loop reached a tenth of that."),
    ("tensorcore", "bmm with tl.dot in bf16, triton on GPU: accepted, 1.20x vs eager",
     "Lesson: Letting Triton's tl.dot run on tensor cores in bf16 beat the fp32 cuBLAS batched product. Tried: "
     "tl.dot on bf16 blocks of 128x128; the autotuner chose num_warps=8. Reasoning: tl.dot lowers to mma "
     "instructions that run on the tensor cores of sm_80 and newer GPUs."),
    ("tensorcore", "linear with mma.sync, cuda on GPU: incorrect",
     "Lesson: Feeding tensor cores fp16 copies of fp32 data failed the accuracy check. Tried: mma.sync on fp16 "
     "copies of float32 operands. Converting to fp16 inside the kernel lost too much: max abs error 0.03 at "
     "tolerance 0.01. Use TF32 or keep the inputs' precision."),

    ("stability", "naive softmax, cuda on GPU: incorrect",
     "Lesson: Exponentiating raw values overflows to inf for big logits, and inf/inf gives NaN. Tried: exp(x) / "
     "sum(exp(x)) directly. Result: inf once values pass 88, then NaN after the division; the checker's large-"
     "magnitude inputs caught it. Subtract the row maximum before exponentiating."),
    ("stability", "log_softmax with the log-sum-exp trick, triton on GPU: accepted, 1.70x vs eager",
     "Lesson: Shifting by the maximum before exp keeps every intermediate finite. Tried: m = max(x), then m + "
     "log(sum(exp(x - m))). Reasoning: stays finite however large the logits."),
    ("stability", "cross entropy, cuda on GPU: incorrect",
     "Lesson: log(softmax) in two steps underflows to 0 and then gives -inf; work in the log domain. Tried: "
     "log(softmax(x)) in two steps; the softmax underflowed to 0 and the log gave -inf on confident rows. Compute "
     "log-softmax directly from the shifted values."),

    ("occupancy", "conv2d with launch bounds, cuda on GPU: accepted, 1.10x vs eager",
     "Lesson: High register use per thread left only a few warps per multiprocessor; capping it doubled them. "
     "Tried: __launch_bounds__(256, 2) after the profile showed 128 registers per thread and 12% occupancy. "
     "Reasoning: capping registers let two blocks share each multiprocessor."),
    ("occupancy", "matmul with 128x128 tiles, cuda on GPU: slower_than_pytorch, 0.70x vs eager",
     "Lesson: A big shared-memory footprint per block allowed just one block per SM, too little to hide memory "
     "latency. Tried: 48 KB of shared memory per block: only one block fit on each SM and the warps sat idle "
     "waiting on memory. Smaller tiles let more blocks stay resident."),
    ("occupancy", "gelu block size, cuda on GPU: accepted, 1.30x vs eager",
     "Lesson: Smaller blocks fit more warps on each SM than the largest block size. Tried: 1024 threads per block "
     "kept fewer warps resident than 256 because of register use; 256 threads per block ran best."),

    ("coalescing", "transpose, one thread per row, cuda on GPU: slower_than_pytorch, 0.40x vs eager",
     "Lesson: Adjacent threads touching addresses far apart turned each load into a separate memory transaction. "
     "Tried: thread i reads row i, so consecutive threads touch addresses 4096 bytes apart and every load is its "
     "own 32-byte sector. Map threadIdx.x to the innermost, contiguous dimension instead."),
    ("coalescing", "column sum, cuda on GPU: accepted, 2.00x vs eager",
     "Lesson: Giving adjacent threads adjacent columns lets a warp fetch one contiguous line per step. Tried: "
     "threadIdx.x walks the contiguous dimension, so the 32 threads of a warp read one 128-byte line per step; "
     "each thread keeps a running total of its column."),
    ("coalescing", "permute through a staging tile, cuda on GPU: accepted, 1.50x vs eager",
     "Lesson: Both the loads and the stores of a warp were made contiguous by going through a staging tile. Tried:"
     " reading in the source's contiguous order and writing through a staging tile, so the reads and the writes of"
     " a warp are both contiguous runs of addresses."),

    ("launch", "relu on a 256-element tensor, cuda on GPU: slower_than_pytorch, 0.90x vs eager",
     "Lesson: For a very small tensor the fixed cost of calling a kernel from Python outweighs any kernel. Tried: "
     "a kernel for a tiny input. The kernel itself ran 2 us; the Python wrapper and the launch took 8 us, so no "
     "kernel could win. For very small inputs the host-side cost is all there is."),
    ("launch", "add, mul, relu in one launch, cuda on GPU: accepted, 1.40x vs eager",
     "Lesson: At 4 KB the cost of starting each kernel exceeded its work, so one launch instead of three was the "
     "whole gain. Tried: three elementwise steps in a single kernel for a 4 KB tensor. Reasoning: at that size "
     "starting a kernel costs more than its arithmetic; cutting three launches to one was the whole speedup."),
    ("launch", "small matmul in a CUDA graph, cuda on GPU: accepted, 1.20x vs eager",
     "Lesson: Replaying a captured CUDA graph removed the per-call CPU dispatch that dominated small operands. "
     "Tried: capturing the forward in a CUDA graph and replaying it. Reasoning: per-call CPU dispatch time "
     "dominated for 64x64 operands."),

    ("library", "hand-written sgemm, cuda on GPU: slower_than_pytorch, 0.35x vs eager",
     "Lesson: A custom tiled GEMM reached only a third of cuBLAS on a large fp32 product. Tried: a tiled FMA "
     "kernel for a 4096x4096 fp32 product. cuBLAS is close to peak at this size; keep cublasSgemm (or at::matmul) "
     "and spend the effort on what surrounds it."),
    ("library", "direct convolution, cuda on GPU: slower_than_pytorch, 0.50x vs eager",
     "Lesson: cuDNN picks the best algorithm per shape; a hand-rolled direct loop ran at half its speed. Tried: a "
     "direct convolution loop against cuDNN, which picks among many algorithms per shape. Calling cuDNN and fusing"
     " only the epilogue beat rewriting the convolution."),
    ("library", "at::addmm plus a custom epilogue, cuda on GPU: accepted, 1.25x vs eager",
     "Lesson: Keeping cuBLAS for the product and replacing only the activation gave the speedup. Tried: at::addmm "
     "for the product and a small kernel for the ReLU instead of a custom GEMM. Reasoning: the cuBLAS GEMM is the "
     "fast part; only the epilogue was worth replacing."),

    ("precision", "layer norm with half accumulators, cuda on GPU: incorrect",
     "Lesson: Summing thousands of fp16 values in fp16 drifted far from the reference. Tried: the variance "
     "accumulated in __half over 8192 elements. Max abs error 0.2 against the reference; accumulate in float even "
     "when the data is fp16."),
    ("precision", "matmul with fp16 accumulators, triton on GPU: incorrect",
     "Lesson: Accumulating a long dot product in fp16 exceeded the tolerance; fp32 accumulators passed. Tried: "
     "out_dtype=tl.float16 in tl.dot for a long K dimension. The sums drifted past the checker's tolerance; keep "
     "float32 accumulators."),
    ("precision", "sum of 16M values in one running total, cuda on GPU: incorrect",
     "Lesson: A single running total loses accuracy as it grows; tree summation keeps it small. Tried: one float "
     "running total per thread over very long rows. Rounding error grew with the length; pairwise (tree) summation"
     " stayed within tolerance."),
]

# (topic, query): searches worded unlike the entries they should find.
QUERIES: list[tuple[str, str]] = [
    ("padding", "avoid bank conflicts"),
    ("padding", "threads reading down a column of a shared tile wait for each other"),
    ("fusion", "fewer passes over memory"),
    ("fusion", "merge several operations so the intermediate result never leaves the chip"),
    ("vector", "wider loads per thread"),
    ("vector", "process several numbers with a single instruction"),
    ("warp", "fast reduction inside a warp"),
    ("warp", "lanes swap values directly instead of going through shared memory"),
    ("tensorcore", "use the dedicated matrix multiply hardware"),
    ("tensorcore", "half precision GEMM on Ampere"),
    ("stability", "outputs become NaN for large inputs"),
    ("stability", "exponentials blow up to infinity"),
    ("occupancy", "too many registers, few warps resident"),
    ("occupancy", "the multiprocessors are mostly idle"),
    ("coalescing", "neighbouring threads should read neighbouring addresses"),
    ("coalescing", "strided memory access wastes bandwidth"),
    ("launch", "tiny inputs where overhead dominates"),
    ("launch", "kernel launch latency"),
    ("library", "should I just call the vendor library"),
    ("library", "my handwritten kernel loses to the library implementation"),
    ("precision", "rounding error grows over long sums"),
    ("precision", "results slightly wrong in half precision"),
]
