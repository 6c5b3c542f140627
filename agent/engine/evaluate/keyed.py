"""Timed calls' inputs and their outputs' check, both keyed by a number the parent draws as the batch starts.

Every timed call gets inputs no process could know before its batch began: each floating (and integer)
tensor is an elementwise mix of two of the problem's own input sets, drawn from the call's key (`derive`):
floating tensors a convex combination with a coefficient per element (on a GPU drawn fresh for the call, on the
CPU a keyed roll of pooled draws), integer tensors a keyed choice per element. The values stay between two valid
inputs, every call differs from every other in (nearly) every element, and the draw has as many random values as
the tensor has elements, so no result can be prepared for it, whether cached by pointer, by sampled fingerprint,
by structure (a product of a mixed matrix is a full product again) or element by element.

Every timed call's outputs are checked without moving them: each output is reduced to one keyed projection,
the dot product with Gaussian weights drawn from the same key (`project`). The reference's job computes the
same projection of the reference's outputs for the same key, and a bound on what outputs within the
tolerance could change it (`projection_bound`): with weights w and elementwise errors |e_i| <= tol_i,
sum(w_i e_i) is a sum of independent terms of spread |w_i| tol_i, so it exceeds six times
sqrt(sum(w_i^2 tol_i^2)) with probability under 1e-8 (Hoeffding), while an output that is wrong in a
fraction f of its elements by about its own magnitude moves it by about sqrt(f n) |y|: a few elements
wrong in a million already fail.

On a GPU, floating float32, float16 and bfloat16 tensors are mixed and projected by single kernels (keyed_cuda.py:
the same mix and the same kind of projection, with the harness's traffic cut to the least), wherever the reference's
job can compile them; it tells the candidate's job to do alike (Pools.fused).

Both jobs run this module's code, the candidate's with whatever its own code changed in it: a wrong mix or
projection there only makes its own outputs disagree with the reference's.
One timed call in every WIDE_EVERY is wide (`is_wide`, `wide_sign`): its floating inputs are the mix times
+-WIDE_SCALE, the scale of the checked calls' scaled_large distribution, wherever the reference stays finite there
(the reference's job finds which signs, Pools.wide). Mixes of the problem's own inputs alone stay inside the
problem's own distribution, so a forward that tells timed calls from checked ones (by counting them, or by the
harness's frames) could time a kernel right only there: a clamp that never reaches its bounds returned as a copy, a
softmax without its max shift. The parent puts one wide key at a random place in every run of WIDE_EVERY keys
(session._keys): no call can know it is not the wide one without reading its inputs.
"""
from __future__ import annotations

import math
from typing import Any, Iterator

from agent.engine.evaluate.pristine import torch  # PyTorch as it was before the import

import agent.engine.evaluate.keyed_cuda as keyed_cuda
from agent.engine.evaluate.compare import NOISE_FACTOR, as_real, tolerances
from agent.engine.evaluate.inputs import SCALED_LARGE

SIGMAS = 6.0
# The CPU's projections are float64 dot products taken this many elements at a time (a float64 copy of each piece). Small
# enough that the two copies stay in a core's cache and their memory is reused call after call: at 1 << 20 (two 8 MiB
# copies, a fresh allocation each) a 1M-element projection took 4-16 ms on the 2-core box, at 1 << 17 about 1.6 ms.
DOT_CHUNK = 1 << 17


# GPU floating tensors get a fresh draw per call whatever their size (_lerped: one Philox launch per piece). Otherwise
# tensors up to this size get a fresh draw per call; larger ones combine two of POOL draws made once per
# evaluation, with a keyed roll: K*(K-1)*n combinations are as unpredictable per call as a fresh draw, and cost a
# few copies instead of a random-number generator (which on a CPU is several times the cost of a small kernel).
# Floating tensors on the CPU take one of the K draws, rolled, and a keyed choice of which base set the mask picks
# from: 2*K*n combinations (K from pool_size: at least MIN_MIXES in all), mixed with no copy at all
# (Pools.mixed_cpu), since there the mix's copies were most of a memory-bound call's time and their noise became the
# figure's.
FRESH_BELOW = 1 << 16
POOL = 4
# Tensors of PIECE elements or more keep POOL_LARGE draws (still n * POOL_LARGE * (POOL_LARGE - 1) combinations, each
# as unpredictable per call), and are mixed and projected PIECE elements at a time: the timing's buffers stay a few
# bytes per element plus pieces of bounded size (agent/engine/evaluate/memory.py counts them).
PIECE = 1 << 26
POOL_LARGE = 2
# The fewest pooled mixes a tensor has (draws times shifts), whatever its size. The candidate's job has the pool
# seed and the bases before any timed call (it derives its own inputs), so it could run every possible mix ahead, in
# its untimed set-up, and only look the outputs up in the timed calls: with 4 draws a 65536-element input has ~786k
# mixes (524k on the CPU), a few seconds at a GPU's launch cost and a small table for a reduction. With draws * n of
# at least 2^24, running them all takes minutes even at 10 us a call: past any job's wall-clock limit.
MIN_MIXES = 1 << 24
POOL_MOST = 256  # 65536 elements (FRESH_BELOW): 256 draws, 64 MiB of float32 masks on the CPU, 16 MiB of bool on a GPU
# Where an output is linear in an input (a sum, a matrix-vector product), the outputs of every rolled draw at once are
# one FFT correlation per draw (or pair of draws), not one call per mix: a table of 2*K*n floats per output element on
# the CPU's one-draw mix, K*(K-1)*n on the two-draw one (GPUs, integer tensors), at least 2^24 * 3 floats (200 MB) an
# output element either way. Problems with fewer output elements than this in all would make that table affordable
# (under 2^25 * 8192 * 4 bytes = 1 TiB), so their mixes are fresh draws per call instead, on every device.
FEW_OUTPUTS = 8192


# Wide timed calls: one in WIDE_EVERY, its floating inputs scaled by WIDE_SCALE (inputs.redistribute's scaled_large).
WIDE_EVERY = 8
WIDE_SCALE = SCALED_LARGE


def is_wide(key: int) -> bool:
    """Whether a timed call's key makes it a wide call, where the problem allows one (1 in WIDE_EVERY keys)."""
    return (_seed(key, 4000) * 0x9E3779B97F4A7C15 % (1 << 64)) % WIDE_EVERY == 0


def wide_sign(key: int, allowed: tuple[int, ...]) -> int:
    """The factor's sign of a timed call (+1 or -1, keyed), or 0 for a call on the mix as it is: wide keys only, and only
    a sign the reference's job found allowed."""
    if not allowed or not is_wide(key):
        return 0
    preferred = 1 if _bit(key, 4001) else -1
    return preferred if preferred in allowed else allowed[0]


def few_outputs(outputs: list[Any]) -> bool:
    """Whether a problem's outputs are few enough that its mixes are drawn fresh per call (FEW_OUTPUTS)."""
    return sum(o.numel() for o in outputs if isinstance(o, torch.Tensor)) < FEW_OUTPUTS


def pool_size(numel: int) -> int:
    if numel >= PIECE:
        return POOL_LARGE
    return max(POOL, min(POOL_MOST, -(-MIN_MIXES // max(numel, 1))))


def weight_pool_size(numel: int) -> int:
    """The projection's weight draws: one for a tensor that large (n rolls of one Gaussian draw: no error vector but
    zero is orthogonal to all of them), where 4 bytes an element cost most."""
    return POOL if numel < PIECE else 1


def _seed(key: int, salt: int) -> int:
    return (key * 1_000_003 + salt) % (1 << 63)


def _generator(device: torch.device, key: int, salt: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(_seed(key, salt))


class Pools:
    """The draws the keyed inputs and projections are made from, per tensor shape; identical in every job that
    gets the same seed (the parent sends it with the base sets)."""

    def __init__(self, seed: int, fresh: bool = False, fused: bool = False) -> None:
        self.seed = seed
        self.fresh = fresh  # mixes drawn per call (FEW_OUTPUTS), decided by the reference's job, handed to both alike
        # GPU floating mixes and projections as single kernels (keyed_cuda.py), where the reference's job could
        # compile them; decided there and handed to both jobs alike, like `fresh`.
        self.fused = fused
        # The signs a wide call's factor may take (wide_sign): found by the reference's job, handed to both alike.
        self.wide: tuple[int, ...] = ()
        self._masks: dict[tuple[Any, ...], list[torch.Tensor]] = {}
        self._weights: dict[tuple[Any, ...], list[torch.Tensor]] = {}
        self._differences: dict[int, torch.Tensor] = {}
        self._kept: dict[int, torch.Tensor | None] = {}
        self._kept_device: dict[int, torch.device] = {}
        self._buffers: dict[int, torch.Tensor] = {}  # the fused mix's inputs, one per input (_input_buffer)
        self._released: tuple[list[Any], list[Any]] = ([], [])

    def mask(self, shape: torch.Size, device: torch.device, key: int, j: int) -> torch.Tensor:
        """A keyed elementwise choice between the base sets (bool, for torch.where): the mix of integer (and other
        non-floating) tensors. Floating ones are weighed instead (mixed_cpu on the CPU, _lerped on a GPU)."""
        numel = math.prod(shape)
        if numel < FRESH_BELOW:
            return _draw(numel, device, _generator(device, key, j), torch.bool).view(shape)
        pool = self._mask_pool(numel, device, torch.bool)
        first, second, shift = _pick(key, j, numel)
        return (pool[first] ^ _roll(pool[second], shift)).view(shape)

    def _mask_pool(self, numel: int, device: torch.device, dtype: torch.dtype) -> list[torch.Tensor]:
        pool = self._masks.get((numel, str(device), dtype))
        if pool is None:
            pool = [_draw(numel, device, _generator(device, self.seed, 7000 + i), dtype) for i in range(pool_size(numel))]
            self._masks[(numel, str(device), dtype)] = pool
        return pool

    def mixed(self, j: int, a: torch.Tensor, b: torch.Tensor, key: int, factor: float = 0.0) -> torch.Tensor:
        """The mix of GPU tensors and of integer tensors anywhere. Floating ones: a convex combination with a coefficient
        per element drawn fresh for the call (_lerped), times `factor` where it is not 0 (a wide call: derive), in the
        fused kernel's one pass where it runs. Others: torch.where(mask, a, b) with the keyed mask (bool), made PIECE
        elements at a time: no mask or roll of the whole tensor is ever made."""
        if a.is_floating_point():
            if self.fused and keyed_cuda.supported(a):
                return keyed_cuda.Kernels.load().mix(a, b, _seed(key, j), self.kept(j, a, b), self._input_buffer(j, a),
                                                     scale=factor or 1.0)
            mixed = _lerped(a, b, _generator(a.device, key, j), self.kept(j, a, b))
            return mixed.mul_(factor) if factor else mixed
        numel = a.numel()
        if numel < FRESH_BELOW:
            return torch.where(self.mask(a.shape, a.device, key, j), a, b)
        out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
        flat, a_flat, b_flat = out.view(-1), a.reshape(-1), b.reshape(-1)
        if self.fresh:  # few outputs (FEW_OUTPUTS): a fresh draw per call, a piece at a time from one keyed generator
            generator = _generator(a.device, key, j)
            piece_mask = lambda start, stop: torch.empty(  # noqa: E731
                stop - start, dtype=torch.bool, device=a.device).bernoulli_(0.5, generator=generator)
        else:
            pool = self._mask_pool(numel, a.device, torch.bool)
            first, second, shift = _pick(key, j, numel)
            piece_mask = lambda start, stop: pool[first][start:stop] ^ _rolled(pool[second], shift, start, stop)  # noqa: E731
        for start in range(0, numel, PIECE):
            stop = min(start + PIECE, numel)
            torch.where(piece_mask(start, stop), a_flat[start:stop], b_flat[start:stop], out=flat[start:stop])
        return out

    def mixed_cpu(self, j: int, a: torch.Tensor, b: torch.Tensor, key: int) -> torch.Tensor:
        """The mix of floating CPU tensors as multiply-adds with no temporary: b + m * (a - b), or a - m * (a - b)
        (which base the coefficients weigh is keyed), where m is one pool draw (uniform in [0, 1): _draw) rolled by
        the key's shift. Two addcmuls on the two sides of the roll read the draw in place. On a 2-core box this took
        a 1M-element mix from ~1.4 ms (a roll's copy, a subtraction, an absolute value, then the multiply-add) to
        ~0.5 ms: the harness's share that the null batch takes off, and whose noise would otherwise swamp the
        kernel's."""
        difference = self.difference(j, a, b)
        numel = a.numel()
        if numel < FRESH_BELOW or self.fresh:
            out = torch.addcmul(b, _draw(numel, a.device, _generator(a.device, key, j), a.dtype).view(a.shape), difference)
            return _keep(out, a, self.kept(j, a, b))
        pool = self._mask_pool(numel, a.device, a.dtype)
        first, _, shift = _pick(key, j, numel)
        from_a = _bit(key, 5000 + j)
        base, sign = (a, -1.0) if from_a else (b, 1.0)
        out = torch.empty(a.shape, dtype=a.dtype)
        flat, base_flat, diff_flat, draw = out.view(-1), base.reshape(-1), difference.reshape(-1), pool[first]
        # out[i] = base[i] + sign * draw[(i - shift) mod n] * difference[i]
        torch.addcmul(base_flat[:shift], draw[numel - shift:], diff_flat[:shift], value=sign, out=flat[:shift])
        torch.addcmul(base_flat[shift:], draw[:numel - shift], diff_flat[shift:], value=sign, out=flat[shift:])
        return _keep(out, a, self.kept(j, a, b))

    def _input_buffer(self, j: int, a: torch.Tensor) -> torch.Tensor:
        """Where the fused mix writes input j, the same tensor every call: no allocation (and no allocator state that
        could differ between the two jobs) per call; the caching allocator handed back the same block every call anyway.
        Each call's inputs are written after the previous call's work on the stream, and a forward that keeps them
        across calls (a cache by address) only ever sees new values there (exploit_cuda_pointer_cache stays caught)."""
        found = self._buffers.get(j)
        if found is None or found.shape != a.shape or found.dtype != a.dtype or found.device != a.device:
            found = self._buffers[j] = torch.empty(a.shape, dtype=a.dtype, device=a.device)
        return found

    def kept(self, j: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
        """Where the floating mix of input j must keep the first base's value (flat bool), or None where it need not
        anywhere: elements whose difference is not finite (an infinity in either base, the same -inf of an attention
        mask in both, or an overflow), where a weighed mix would be NaN. NaN inputs would make the reference's outputs
        NaN, which the projections count as zero, so that any answer would agree with them. Found once per base sets,
        a piece at a time; most problems have none, and pay one pass over the bases per evaluation."""
        if j not in self._kept:
            a_flat, b_flat, n = a.reshape(-1), b.reshape(-1), a.numel()

            def bad(i: int) -> torch.Tensor:
                return ~torch.isfinite(a_flat[i:i + PIECE] - b_flat[i:i + PIECE])

            # A piece at a time, and the mask kept only where it is needed: no n-byte temporary for finite bases.
            needed = any(bool(bad(i).any()) for i in range(0, n, PIECE))
            self._kept[j] = torch.cat([bad(i) for i in range(0, n, PIECE)]) if needed else None
        return self._kept[j]

    def difference(self, j: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a - b for input j of the base sets, computed once."""
        found = self._differences.get(j)
        if found is None:
            found = self._differences[j] = a - b
        return found

    def weight_pieces(self, numel: int, device: torch.device, key: int, j: int) -> Iterator[tuple[int, int, torch.Tensor]]:
        """The projection's keyed weights for an output of `numel` elements, as (start, stop, weights[start:stop])
        pieces of at most PIECE elements."""
        if numel < FRESH_BELOW:
            yield 0, numel, torch.randn(numel, generator=_generator(device, key, 1000 + j), device=device, dtype=torch.float32)
            return
        pool = self._weight_pool(numel, device)
        first = _pick(key, 1000 + j, numel)[0] % len(pool)
        shift, other = weight_shifts(key, j, numel)
        # Each weight is the product of two elements of the pooled draw, at two keyed shifts. One keyed roll of it, as
        # until session 41, commutes with a linear map: the draw pulled back through W for every roll is one table,
        # built once, and each timed call of an nn.Linear was then answered with one dot product and no GEMM (the
        # seventh red team's F4, accepted at 3.81x). With two independent shifts there is a table per pair, and
        # pulling the call's own weights back costs the GEMM itself.
        # Pieces also end where either roll wraps, so that each factor is a view of the pooled draw: no copy of the
        # weights per call (on the CPU a copy of a few MiB was a fresh allocation, its pages faulted in, every call),
        # only the piece's product, which stays in cache.
        ends = sorted({*range(PIECE, numel, PIECE), shift, other, numel} - {0})  # _pick's shifts are below numel
        for start, stop in zip([0, *ends], ends):
            yield start, stop, _rolled(pool[first], shift, start, stop) * _rolled(pool[first], other, start, stop)

    def _weight_pool(self, numel: int, device: torch.device) -> list[torch.Tensor]:
        pool = self._weights.get((numel, str(device)))
        if pool is None:
            pool = [torch.randn(numel, generator=_generator(device, self.seed, 9000 + i), device=device, dtype=torch.float32)
                    for i in range(weight_pool_size(numel))]
            self._weights[(numel, str(device))] = pool
        return pool

    def release(self) -> None:
        """Drop the device draws (the sequential fallback parks the job: memory.py), remembering which were made. (The
        differences are made on the CPU only, where parking moves nothing.)"""
        self._released = ([*self._masks], [*self._weights])
        self._masks, self._weights, self._buffers = {}, {}, {}
        # The few masks of elements the mix keeps (kept) are found from the bases, which a park moves too: to the host
        # with them, so that no batch after the park pays for finding them again.
        self._kept_device = {j: m.device for j, m in self._kept.items() if m is not None}
        self._kept = {j: (m.cpu() if m is not None else None) for j, m in self._kept.items()}

    def restore(self) -> None:
        """Draw again, identically, what release() dropped: here, before any batch, so that the first batch after a
        park does not pay for draws that the other batches (and the null batch taken off them) do not."""
        masks, weights = self._released
        self._kept = {j: (m.to(self._kept_device.get(j, m.device)) if m is not None else None) for j, m in self._kept.items()}
        for numel, device, dtype in masks:
            self._mask_pool(numel, torch.device(device), dtype)
        for numel, device in weights:
            self._weight_pool(numel, torch.device(device))
        self._released = ([], [])


_WORD_BITS = 31  # torch.randint's int32 words hold 31 random bits
_BITS_AT_ONCE = 1 << 22  # elements unpacked at a time: the int32 temporary stays 16 MiB, whatever the tensor


def _bits(numel: int, device: torch.device, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """numel fair coin flips (0/1 in `dtype`) from the generator, the same in every job that seeds it alike. Unpacked
    from random words: on a CPU ~10x faster than bernoulli_ (1M flips: 2.4 ms against 24 ms), which is what lets every
    tensor have MIN_MIXES mixes without a slow set-up, and a small tensor's fresh per-call draw stay cheap."""
    out = torch.empty(numel, dtype=dtype, device=device)
    shifts = torch.arange(_WORD_BITS, dtype=torch.int32, device=device)
    for start in range(0, numel, _BITS_AT_ONCE):
        stop = min(start + _BITS_AT_ONCE, numel)
        words = torch.randint(0, 1 << _WORD_BITS, (-(-(stop - start) // _WORD_BITS),), dtype=torch.int32,
                              device=device, generator=generator)
        out[start:stop] = words.unsqueeze(1).bitwise_right_shift(shifts).bitwise_and_(1).view(-1)[:stop - start]
    return out


def _draw(numel: int, device: torch.device, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """One pool draw. On the CPU a floating draw is uniform in [0, 1): the CPU's floating mix (mixed_cpu) is then a
    convex combination of the two bases with a coefficient of its own for every element, not a choice between them.
    A choice leaves each timed input element one of two values the candidate's process knows before any timed call,
    so that for an elementwise problem it could compute f on both base sets once and answer every timed call by
    picking per element, with no f at all (docs/threat-model.md, "Run every keyed input ahead"). A convex combination
    stays between the two valid values (in any interval domain: positive, [0, 1], zeros of a triangle kept). Other
    draws: 0/1 unpacked from random words on the CPU (_bits), bernoulli_ on a GPU, where it is one fast launch."""
    if device.type == "cpu":
        if dtype.is_floating_point:
            return torch.rand(numel, dtype=dtype, device=device, generator=generator)
        return _bits(numel, device, generator, dtype)
    return torch.empty(numel, dtype=torch.bool, device=device).bernoulli_(0.5, generator=generator).to(dtype)


def _keep(out: torch.Tensor, a: torch.Tensor, kept: torch.Tensor | None) -> torch.Tensor:
    """out, with a's values where `kept` (Pools.kept) says the mix must keep them."""
    if kept is not None:
        torch.where(kept.view(a.shape), a, out, out=out)
    return out


def _lerped(a: torch.Tensor, b: torch.Tensor, generator: torch.Generator, kept: torch.Tensor | None = None) -> torch.Tensor:
    """a + u * (b - a) with u uniform in [0, 1), a coefficient of its own per element drawn for this call from the
    keyed generator, PIECE elements at a time (one piece of draws is the only temporary). The GPU's floating mix: a
    choice between the bases would leave every timed element one of two values the candidate's job knows ahead, so
    that an elementwise f could be computed on both bases once and each call answered by picking (docs/threat-model.md,
    "Pick each element's answer from two computed ahead"); fresh per call, there is no pool to run ahead either. On a
    GPU the draw is one Philox launch that writes the piece, and lerp reads three tensors and writes one: about a
    quarter more traffic than the bool choice it replaces, and no pool in device memory. Alike in every job that
    draws with the same key (the same kernels on the same device)."""
    out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    flat, a_flat, b_flat = out.view(-1), a.reshape(-1), b.reshape(-1)
    numel = flat.numel()
    for start in range(0, numel, PIECE):
        stop = min(start + PIECE, numel)
        weight = torch.rand(stop - start, generator=generator, device=a.device, dtype=a.dtype)
        torch.lerp(a_flat[start:stop], b_flat[start:stop], weight, out=flat[start:stop])
        if kept is not None:
            torch.where(kept[start:stop], a_flat[start:stop], flat[start:stop], out=flat[start:stop])
    return out


def _roll(flat: torch.Tensor, shift: int) -> torch.Tensor:
    """flat.roll(shift) of a 1-D tensor as one copy of two slices (torch.roll is ~40x slower on a CPU)."""
    return torch.cat([flat[-shift:], flat[:-shift]]) if shift else flat


def _rolled(flat: torch.Tensor, shift: int, start: int, stop: int) -> torch.Tensor:
    """_roll(flat, shift)[start:stop] without the whole roll: element i is flat[(i - shift) mod n]."""
    n = flat.numel()
    begin, length = (start - shift) % n, stop - start
    if begin + length <= n:
        return flat[begin:begin + length]
    return torch.cat([flat[begin:], flat[:length - (n - begin)]])


def weight_shifts(key: int, j: int, numel: int) -> tuple[int, int]:
    """The two keyed rolls of the pooled weight draw whose product weighs output j of `numel` elements: two different
    shifts (Pools.weight_pieces)."""
    shift, other = _pick(key, 1000 + j, numel)[2], _pick(key, 2000 + j, numel)[2]
    return shift, other if other != shift else (shift + 1) % numel


def _bit(key: int, salt: int) -> bool:
    """A keyed coin, independent of _pick's choices (another salt)."""
    return (_seed(key, salt) * 0x9E3779B97F4A7C15 % (1 << 64)) >> 63 == 1


def _pick(key: int, salt: int, numel: int) -> tuple[int, int, int]:
    """Two different pool entries and a shift, from the call's key."""
    size = pool_size(numel)
    mixed = _seed(key, salt) * 0x9E3779B97F4A7C15 % (1 << 64)
    first = mixed % size
    second = (first + 1 + (mixed >> 8) % (size - 1)) % size
    return first, second, int((mixed >> 16) % numel)


def derive(bases: list[list[Any]], key: int, pools: Pools, sign: int | None = None) -> list[Any]:
    """Inputs for one timed call: every tensor of more than one element is mixed elementwise from the two
    base sets by draws keyed by `key` (floating: weighed, others: chosen); anything else is the first set's. A wide
    call's floating mixes are then scaled by sign * WIDE_SCALE (`sign`: the key's own, wide_sign, unless given)."""
    first, second = bases[0], bases[-1]
    factor = (wide_sign(key, pools.wide) if sign is None else sign) * WIDE_SCALE
    out: list[Any] = []
    for j, (a, b) in enumerate(zip(first, second)):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.numel() > 1 and a.shape == b.shape \
                and a.dtype == b.dtype:
            if a.device.type == "cpu" and a.is_floating_point():
                # b + m * (a - b) with m in [0, 1) per element: between the two bases, alike in every job
                mixed = pools.mixed_cpu(j, a, b, key)
                if factor:
                    mixed.mul_(factor)  # the mix is this call's own tensor (never a base), so in place
            else:
                mixed = pools.mixed(j, a, b, key, factor)  # integer mixes are never scaled
            out.append(mixed)
        else:
            out.append(a)
    return out


def scaled(inputs: list[Any], factor: float) -> list[Any]:
    """One input set with its floating tensors of more than one element times `factor`, as `derive` scales a wide
    call's mixes (the rest as it is): the inputs on which the reference's noise at a wide call's scale is measured."""
    return [v * factor if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() > 1 else v for v in inputs]


def _values(out: torch.Tensor) -> torch.Tensor:
    """An output's values as float32, with non-finite values counted as zero (in both jobs alike)."""
    return out.detach().reshape(-1).to(torch.float32).nan_to_num(0.0, 0.0, 0.0)


def project(outputs: list[torch.Tensor], key: int, pools: Pools) -> torch.Tensor:
    """One keyed projection per output, non-finite terms counted as zero (project_rows' first figures)."""
    rows = project_rows(outputs, key, pools)
    return rows[:, 0] if rows.dim() == 2 else rows


def project_rows(outputs: list[torch.Tensor], key: int, pools: Pools) -> torch.Tensor:
    """One keyed projection per output. On a GPU a device tensor, so that a batch synchronises only once, at its end;
    where the fused kernels run, one row per output: the projection, then the bound's sums over the same weights
    (keyed_cuda.FIGURES, from the same pass: bound_of_figures turns them into projection_bound's figure). On the CPU a
    plain dot product (non-finite results redone). A complex output is projected as its real and imaginary parts."""
    outputs = [as_real(o) for o in outputs]
    if outputs and pools.fused and all(keyed_cuda.supported(o) for o in outputs):
        # One launch per output, each writing its figures into one float64 tensor: no other allocation or launch per call.
        kernels = keyed_cuda.Kernels.load()
        figures = keyed_cuda.FIGURES
        fused = torch.empty((len(outputs), figures), dtype=torch.float64, device=outputs[0].device)
        for j, o in enumerate(outputs):
            kernels.project(o, _seed(key, 1000 + j), fused.data_ptr() + 8 * figures * j)
        return fused
    sums = []
    for j, o in enumerate(outputs):
        total = torch.zeros((), dtype=torch.float64, device=o.device)
        flat = o.detach().reshape(-1)
        for start, stop, weights in pools.weight_pieces(o.numel(), o.device, key, j):
            piece = flat[start:stop]
            if o.device.type == "cpu":
                value = _dot64(weights, piece)
                total += value if math.isfinite(value) else _dot64(weights, _values(piece))
            else:
                total += weights.mul(piece).nan_to_num_(0.0, 0.0, 0.0).sum(dtype=torch.float64)
        sums.append(total)
    return torch.stack(sums)


def _dot64(weights: torch.Tensor, piece: torch.Tensor) -> float:
    """sum w_i y_i in float64: a float32 weight times a float32 (or narrower) value is exact in float64, so the only
    rounding is the sum's (rounding() bounds it). A float32 dot product's own rounding had to be allowed for in the
    bound, and over millions of elements it outgrew the tolerance's spread many times over: an output wrong by far more
    than the tolerance in every element (a bfloat16 GEMM's) passed every timed check."""
    total = 0.0
    for start in range(0, piece.numel(), DOT_CHUNK):
        stop = start + DOT_CHUNK
        total += float(torch.dot(weights[start:stop].double(), piece[start:stop].double()))
    return total


def rounding(numel: int, float32_products: bool) -> float:
    """How far the two jobs' projections of one output may differ by their own arithmetic alone, relative to
    sum |w_i y_i|: each product rounded once (2^-24 where they are float32 products, as on a GPU; 2^-53 on the CPU, where
    a float64 output's are the only inexact ones) and a float64 sum of numel terms (numel 2^-53 at most, in any order),
    twice (both projections). A worst case, not an estimate: an honest output's projection can never leave the bound
    by rounding; it is 1.2e-7 for a million elements and 3.6e-7 for 2^30."""
    return 2.0 * ((2.0 ** -24 if float32_products else 2.0 ** -53) + numel * 2.0 ** -53)


def projection_bound(refs: list[torch.Tensor], key: int, pools: Pools, rtol: float | None,
                     atol_scale: float | None, noise: list[float] | None = None) -> list[float]:
    """For each reference output: how far a candidate's projection may be from the reference's and still come
    from outputs within the tolerance the checked calls use (compare.py). `noise`: per output, the reference's own
    root-mean-square error from float64 where a checked call found it ill-conditioned (exact.Float64Reference.noise); a
    candidate held to NOISE_FACTOR times it may differ from the reference by (NOISE_FACTOR + 1) times it."""
    bounds = []
    for j, ref in enumerate(map(as_real, refs)):
        if ref.numel() == 0:
            bounds.append(0.0)
            continue
        r_tol, scale = tolerances(ref.dtype, rtol, atol_scale)
        own = noise[j] if noise and j < len(noise) else 0.0
        if pools.fused and keyed_cuda.supported(ref):
            bounds.append(_bound(keyed_cuda.Kernels.load().bound_sums(ref, _seed(key, 1000 + j)), r_tol, scale, ref.numel(),
                                 own))
            continue
        flat = ref.detach().reshape(-1)
        magnitude = max(float(_values(flat[i:i + PIECE]).abs().max()) for i in range(0, flat.numel(), PIECE))
        variance = absolute_sum = squared_weights = 0.0
        for start, stop, weights in pools.weight_pieces(ref.numel(), ref.device, key, j):
            values = _values(flat[start:stop])
            tol = values.abs().mul_(r_tol).add_(scale * magnitude)
            variance += float(torch.dot(weights.square(), tol.square()).clamp_min(0.0))
            absolute_sum += float(torch.dot(weights.abs(), values.abs()))
            squared_weights += float(weights.square().sum()) if own else 0.0
        arithmetic = rounding(ref.numel(), float32_products=ref.device.type != "cpu")
        bounds.append(_widened(variance, squared_weights, own) + arithmetic * absolute_sum + 1e-30)
    return bounds


def bound_of_figures(sums: list[float], dtype: torch.dtype, numel: int, rtol: float | None, atol_scale: float | None,
                     noise: float = 0.0) -> float:
    """projection_bound's figure for one output of `dtype` and `numel` elements from the fused projection's bound sums
    (project_rows)."""
    return _bound(sums, *tolerances(dtype, rtol, atol_scale), numel, noise)


def _bound(sums: Any, r_tol: float, scale: float, numel: int, noise: float = 0.0) -> float:
    """projection_bound's figure for one output from the fused kernels' one pass (the same weights as the projection):
    with tol_i = r |y_i| + s M, sum w_i^2 tol_i^2 = r^2 sum w^2 y^2 + 2 r s M sum w^2 |y| + s^2 M^2 sum w^2. The fused
    kernels multiply in float32 and sum in float64 (keyed_cuda.py)."""
    squares, weighed, weights, absolute_sum, magnitude = sums
    absolute = scale * magnitude
    variance = r_tol * r_tol * squares + 2.0 * r_tol * absolute * weighed + absolute * absolute * weights
    return _widened(variance, weights, noise) + rounding(numel, float32_products=True) * absolute_sum + 1e-30


def _widened(variance: float, squared_weights: float, noise: float) -> float:
    """SIGMAS deviations of the projection of errors within the tolerance, and of an ill-conditioned reference's noise:
    a difference of root-mean-square (NOISE_FACTOR + 1) * noise per element projects with spread that times the
    weights' norm."""
    spread = (NOISE_FACTOR + 1.0) * noise
    return SIGMAS * (max(variance, 0.0) + spread * spread * squared_weights) ** 0.5


def agree(got: list[float], expected: list[float], bounds: list[float]) -> bool:
    """Whether a call's projections, as the candidate's job reported them (any JSON), are each within its bound of the
    reference's. Only a real number agrees: a bool, a string or an integer past float's range (OverflowError in the
    arithmetic, the seventh red team) is a disagreement, never an exception."""
    if not len(got) == len(expected) == len(bounds):
        return False
    for g, e, b in zip(got, expected, bounds):
        figure = _figure(g)
        if figure is None or not abs(figure - e) <= b:
            return False
    return True


def _figure(value: Any) -> float | None:
    if type(value) not in (int, float):
        return None
    try:
        figure = float(value)
    except OverflowError:
        return None
    return figure if math.isfinite(figure) else None
