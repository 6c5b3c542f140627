"""Keyed timed-call inputs and projections (agent/engine/evaluate/keyed.py): what makes every timed call checkable."""
import pytest
import torch

from agent.engine.evaluate.keyed import WIDE_SCALE, Pools, agree, derive, is_wide, project, projection_bound, wide_sign


def _bases(n=512):
    g = torch.Generator().manual_seed(0)
    return [[torch.randn(n, n, generator=g), torch.arange(7)], [torch.randn(n, n, generator=g), torch.arange(7) + 1]]


def test_each_key_gives_new_inputs_between_the_two_base_sets_alike_in_every_job():
    bases = _bases()
    a, b = bases[0][0], bases[1][0]
    first = derive(bases, 11, Pools(5))[0]
    again = derive(bases, 11, Pools(5))[0]  # another process with the same pool seed
    other = derive(bases, 12, Pools(5))[0]
    assert torch.equal(first, again)
    low, high = torch.minimum(a, b), torch.maximum(a, b)
    assert bool(((first >= low - 1e-6) & (first <= high + 1e-6)).all()), "every value lies between the two bases'"
    # A coefficient of its own per element, not a choice: nearly no value is either base's (a candidate that knows
    # both base sets cannot answer a timed call by picking between two precomputed outputs).
    either = torch.isclose(first, a, rtol=1e-6, atol=1e-6) | torch.isclose(first, b, rtol=1e-6, atol=1e-6)
    assert float(either.float().mean()) < 0.01
    weight = ((first - b) / (a - b))[(a - b).abs() > 1e-2]
    assert 0.45 < float(weight.mean()) < 0.55 and float(weight.std()) > 0.25, "spread over [0, 1], not two values"
    assert (first != other).float().mean() > 0.9, "another key mixes otherwise"
    ints = derive(bases, 11, Pools(5))[1]
    assert bool(((ints == bases[0][1]) | (ints == bases[1][1])).all()), "integers are still chosen: they stay valid"


def test_a_cpu_mix_is_one_rolled_draw_applied_in_place_picking_from_either_base_by_key():
    import agent.engine.evaluate.keyed as keyed

    bases = _bases()
    a, b = bases[0][0], bases[1][0]
    pools = Pools(5)
    n = a.numel()
    picked_a = set()
    for key in range(40):
        got = derive(bases, key, pools)[0]
        first, _, shift = keyed._pick(key, 0, n)
        draw = keyed._roll(pools._masks[(n, "cpu", torch.float32)][first], shift).view(a.shape)
        from_a = keyed._bit(key, 5000)
        base, sign = (a, -1.0) if from_a else (b, 1.0)
        # The definition, with the roll and the mask made whole: the in-place mix is the same to the last bit.
        assert torch.equal(got, torch.addcmul(base, draw, a - b, value=sign))
        picked_a.add(from_a)
    assert picked_a == {True, False}, "the key chooses which base set the mask picks from"
    assert len(pools._masks) == 1 and len(pools._masks[(n, "cpu", torch.float32)]) == keyed.pool_size(n)


def test_no_tensor_has_so_few_mixes_that_all_could_be_run_ahead_and_looked_up():
    import agent.engine.evaluate.keyed as keyed

    # The candidate's job knows the pool seed before the timed calls: what it could run ahead is draws x shifts.
    for numel in (keyed.FRESH_BELOW, 100_000, 1 << 20, 3 << 20, 1 << 24, keyed.PIECE - 1):
        assert keyed.pool_size(numel) * numel >= keyed.MIN_MIXES, numel
    assert keyed.pool_size(keyed.FRESH_BELOW) == keyed.POOL_MOST
    assert keyed.pool_size(1 << 24) == keyed.POOL, "a large tensor keeps the few draws its memory allows"


def test_a_projection_tolerates_errors_within_the_tolerance_and_catches_a_few_wrong_elements():
    torch.manual_seed(1)
    pools = Pools(3)
    ref = torch.randn(256, 1024)
    expected = project([ref], 7, pools).tolist()
    bound = projection_bound([ref], 7, pools, None, None)
    honest = ref * (1 + 9e-5 * torch.randn_like(ref).clamp(-1, 1))  # inside float32's rtol of 1e-4
    assert agree(project([honest], 7, pools).tolist(), expected, bound)
    wrong = ref.clone()
    wrong.view(-1)[torch.randperm(ref.numel())[:20]] += 3.0  # 20 of 262144 elements wrong
    assert not agree(project([wrong], 7, pools).tolist(), expected, bound)
    assert not agree(project([torch.zeros_like(ref)], 7, pools).tolist(), expected, bound)
    assert not agree(project([ref], 8, pools).tolist(), expected, bound), "a projection is for its own key only"


def test_an_output_rounded_to_bfloat16_in_every_element_fails_most_timed_checks_however_large():
    # Every element off by about 20 times float32's tolerance, as a GEMM in bfloat16 is: the errors are dense and small,
    # so they move a projection only like sqrt(n), and a projection whose own rounding were allowed for in proportion to
    # n (a float32 dot product's) let every call through at millions of elements. Honest outputs still pass every key.
    torch.manual_seed(3)
    pools = Pools(6)
    ref = torch.randn(2048, 2048) * 3.0
    downgraded = ref.to(torch.bfloat16).float()
    honest = ref * (1 + 5e-5 * torch.randn_like(ref).clamp(-1, 1))
    caught = 0
    for key in range(20):
        expected, bound = project([ref], key, pools).tolist(), projection_bound([ref], key, pools, None, None)
        assert agree(project([honest], key, pools).tolist(), expected, bound)
        caught += not agree(project([downgraded], key, pools).tolist(), expected, bound)
    assert caught >= 10, f"{caught} of 20 timed calls caught"


def test_an_ill_conditioned_references_noise_widens_the_bound_by_what_a_candidate_as_accurate_may_differ():
    torch.manual_seed(2)
    pools = Pools(4)
    noise = 1e-7
    ref = noise * torch.randn(256, 1024)  # the reference is its own rounding noise (exact answer 0)
    expected = project([ref], 7, pools).tolist()
    strict, widened = projection_bound([ref], 7, pools, None, None), projection_bound([ref], 7, pools, None, None, [noise])
    assert widened[0] > 10 * strict[0]
    other = noise * torch.randn(256, 1024)  # another rounding: 4x the reference's own error at most
    assert not agree(project([other], 7, pools).tolist(), expected, strict)
    assert agree(project([other], 7, pools).tolist(), expected, widened)
    # The projection resolves SIGMAS x (NOISE_FACTOR + 1) = 30 times the noise per element, as it resolves 6 tolerances.
    assert not agree(project([other + 500 * noise], 7, pools).tolist(), expected, widened)


def test_non_finite_values_count_as_zero_in_both_jobs_and_a_malformed_reply_never_agrees():
    pools = Pools(9)
    ref = torch.randn(300)
    ref[5] = float("nan")
    expected = project([ref], 1, pools).tolist()
    bound = projection_bound([ref], 1, pools, None, None)
    assert agree(project([ref.clone()], 1, pools).tolist(), expected, bound)
    for bad in ([], [float("nan")], ["1.0"], [1.0, 2.0]):
        assert not agree(bad, expected, bound)


def test_large_tensors_are_mixed_and_projected_in_pieces_exactly_as_whole(monkeypatch):
    import agent.engine.evaluate.keyed as keyed

    monkeypatch.setattr(keyed, "PIECE", 1 << 17)  # tensors of 2^17 elements or more: two draws, pieces of 2^17
    n = 3 * (1 << 17) + 5  # the last piece is short, and some pieces wrap around the roll
    g = torch.Generator().manual_seed(2)
    a = torch.randn(n, generator=g)
    ints_a, ints_b = torch.randint(0, 1000, (n,), generator=g), torch.randint(0, 1000, (n,), generator=g)
    pools = Pools(4)
    for key in (1, 2, 3):
        whole = torch.where(pools.mask(a.shape, a.device, key, 0), ints_a, ints_b)  # integers: a keyed choice
        assert torch.equal(pools.mixed(0, ints_a, ints_b, key), whole)
        projected = project([a], key, pools)[0]  # draws the weight pool
        shift, other = keyed.weight_shifts(key, 0, n)
        draw = pools._weights[(n, "cpu")][0]
        weights = keyed._roll(draw, shift) * keyed._roll(draw, other)  # the whole product of two rolls of the draw, at once
        # Equal to the whole float64 dot product but for the sum's rounding in another order, as the bound allows.
        exact = float(torch.dot(weights.double(), a.double()))
        assert abs(float(projected) - exact) <= keyed.rounding(n, float32_products=False) * float((weights * a).abs().sum())
    assert len(pools._weights[(n, "cpu")]) == 1 and len(pools._masks[(n, "cpu", torch.bool)]) == keyed.POOL_LARGE
    ref = a.clone()
    bound = projection_bound([ref], 5, pools, None, None)
    assert agree(project([ref * (1 + 5e-5)], 5, pools).tolist(), project([ref], 5, pools).tolist(), bound)
    wrong = ref.clone()
    wrong[n - 50:] += 3.0  # 50 elements, in the last (short) piece
    assert not agree(project([wrong], 5, pools).tolist(), project([ref], 5, pools).tolist(), bound)


def test_a_projections_weights_are_two_rolls_of_the_pooled_draw_multiplied_a_piece_at_a_time(monkeypatch):
    # One keyed roll commuted with a linear map: the draw pulled back through W for every roll was one table, and an
    # nn.Linear's timed calls were answered by a dot product each, no GEMM (the seventh red team's F4, 3.81x). With
    # the product of two rolls there is a table per pair of shifts. Each factor is a view of the draw (pieces end where
    # either roll wraps), and only a piece's product is made per call.
    import agent.engine.evaluate.keyed as keyed

    monkeypatch.setattr(keyed, "PIECE", 1 << 17)
    n = 3 * (1 << 17) + 5
    pools = Pools(4)
    for key in range(1, 9):  # rolls that wrap inside a piece and at its ends alike
        pieces = list(pools.weight_pieces(n, torch.device("cpu"), key, 0))
        draw = pools._weights[(n, "cpu")][0]
        shift, other = keyed.weight_shifts(key, 0, n)
        assert shift != other
        assert [start for start, _, _ in pieces] == [0, *[stop for _, stop, _ in pieces[:-1]]] and pieces[-1][1] == n
        assert all(weights.numel() == stop - start <= keyed.PIECE for start, stop, weights in pieces)
        for start, stop, _ in pieces:  # neither roll wraps inside a piece: both factors are views of the draw
            for roll in (shift, other):
                assert draw.data_ptr() <= keyed._rolled(draw, roll, start, stop).data_ptr() < draw.data_ptr() + 4 * n
        whole = torch.cat([w for _, _, w in pieces])
        assert torch.equal(whole, keyed._roll(draw, shift) * keyed._roll(draw, other))
        assert not torch.equal(whole, keyed._roll(draw, shift)), "no longer one roll of the draw"


def test_draws_dropped_at_a_park_are_drawn_again_identically_before_the_next_batch(monkeypatch):
    import agent.engine.evaluate.keyed as keyed

    monkeypatch.setattr(keyed, "PIECE", 1 << 17)  # large enough to use the pools
    n = 2 * (1 << 17)
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
    a, b = a.to(torch.int64), b.to(torch.int64)  # integers: the pooled choice (floating tensors draw no pool)
    pools = Pools(6)
    mixed, projected = pools.mixed(0, a, b, 21), project([a.float()], 21, pools)
    drawn = {k: [t.clone() for t in v] for k, v in (*pools._masks.items(), *pools._weights.items())}
    pools.release()
    assert not pools._masks and not pools._weights, "parked: no draw is held"
    pools.restore()
    # Drawn again before any call needs them (a batch after a park pays for nothing the others do not), and the same.
    assert {**pools._masks, **pools._weights}.keys() == drawn.keys()
    assert all(torch.equal(x, y) for k in drawn for x, y in zip({**pools._masks, **pools._weights}[k], drawn[k]))
    assert torch.equal(pools.mixed(0, a, b, 21), mixed) and torch.equal(project([a.float()], 21, pools), projected)


def test_a_problem_with_few_outputs_gets_fresh_cpu_mixes_no_table_of_rolled_draws_can_answer():
    import agent.engine.evaluate.keyed as keyed

    bases = _bases()
    a, b = bases[0][0], bases[1][0]
    assert keyed.few_outputs([torch.zeros(())]) and not keyed.few_outputs([torch.zeros(a.shape[0], 16)])
    pooled, fresh = Pools(5), Pools(5, fresh=True)
    first = derive(bases, 11, fresh)[0]
    assert torch.equal(first, derive(bases, 11, Pools(5, fresh=True))[0]), "alike in both jobs"
    assert not fresh._masks, "no pool is drawn for a fresh mix"
    low, high = torch.minimum(a, b), torch.maximum(a, b)
    assert bool(((first >= low - 1e-6) & (first <= high + 1e-6)).all())
    # Not a rolled pool draw: no shift of any pooled draw gives these coefficients.
    derive(bases, 11, pooled)
    n = a.numel()
    apart = (a - b).abs() > 1e-2
    weight = torch.where(apart, (first - b) / (a - b), torch.full_like(a, 0.5)).view(-1)
    assert 0.45 < float(weight[apart.view(-1)].mean()) < 0.55
    for draw in pooled._masks[(n, "cpu", torch.float32)]:
        spectrum = torch.fft.irfft(torch.fft.rfft(weight - 0.5) * torch.fft.rfft(draw - 0.5).conj(), n=n)
        # A draw and itself (or its roll) would reach n/12 (a uniform's variance, times n); fresh ones stay far below.
        assert float(spectrum.abs().max()) < 0.05 * n / 12, "fresh coefficients correlate with no roll of any draw"


def test_a_fresh_two_draw_mix_is_made_piece_by_piece_alike_in_both_jobs_and_draws_no_pool(monkeypatch):
    import agent.engine.evaluate.keyed as keyed

    monkeypatch.setattr(keyed, "PIECE", 1 << 17)  # the GPU's and integer tensors' mix, in pieces, with a short last one
    n = 3 * (1 << 17) + 5
    a, b = torch.arange(n), -torch.arange(n) - 1
    fresh = Pools(4, fresh=True)
    got = fresh.mixed(0, a, b, 9)
    assert torch.equal(got, Pools(4, fresh=True).mixed(0, a, b, 9)) and not fresh._masks
    from_a = got == a
    assert bool((from_a | (got == b)).all()) and 0.45 < from_a.float().mean() < 0.55
    assert not torch.equal(got, fresh.mixed(0, a, b, 10)), "another key, another draw"
    assert not torch.equal(got, Pools(4).mixed(0, a, b, 9)), "not the pooled mix"



def test_the_gpus_floating_mix_weighs_each_element_afresh_so_no_answer_computed_on_the_bases_can_be_picked(monkeypatch):
    import agent.engine.evaluate.keyed as keyed

    # Pools.mixed is the GPU's path for floating tensors (derive sends the CPU's to mixed_cpu); its torch ops run
    # alike on the CPU, so its properties are checked here, and on the H100 by the corpus's
    # exploit_cuda_per_element_precompute.
    monkeypatch.setattr(keyed, "PIECE", 1 << 15)  # in pieces, with a short last one
    n = 3 * (1 << 15) + 7
    g = torch.Generator().manual_seed(8)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        a, b = torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype)
        a[:10] = b[:10]  # where the bases agree (a triangle's zeros), the mix keeps the value
        pools = Pools(4)
        got = pools.mixed(0, a, b, 9)
        assert got.dtype == dtype and torch.equal(got, Pools(99).mixed(0, a, b, 9)), "alike in both jobs: the key decides"
        assert not pools._masks, "no pool: drawn per call"
        assert torch.equal(got[:10], a[:10])
        low, high = torch.minimum(a, b), torch.maximum(a, b)
        assert bool(((got >= low) & (got <= high)).all()), "between the two valid inputs"
        apart = (a - b).abs() > 0.5
        # None of the elements is either base's value: a table of f on the two bases answers none of them.
        assert float(((got == a) | (got == b))[apart].float().mean()) < 0.02
        again = pools.mixed(0, a, b, 10)
        assert float((again != got)[apart].float().mean()) > 0.98, "another key, other coefficients"


@pytest.mark.parametrize("fresh", [False, True])
def test_infinities_in_the_bases_are_kept_never_mixed_into_nan(monkeypatch, fresh):
    import agent.engine.evaluate.keyed as keyed

    # An attention mask's -inf in both bases, an inf in one, an overflowing difference: a weighed mix of any of them is
    # NaN, the reference's outputs would be NaN, and the projections (which count NaN as zero) would agree with any
    # answer. The mix keeps the first base's value there, on both devices' paths, and weighs the rest as usual.
    monkeypatch.setattr(keyed, "PIECE", 1 << 16)
    n = 3 * (1 << 16) + 3
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
    a[:100] = b[:100] = float("-inf")
    a[200], b[300] = float("inf"), float("-inf")
    a[400], b[400] = 3e38, -3e38
    special = torch.zeros(n, dtype=torch.bool)
    special[:100] = special[200] = special[300] = special[400] = True
    for mix in (lambda p: p.mixed(0, a, b, 17), lambda p: p.mixed_cpu(0, a, b, 17), lambda p: derive([[a], [b]], 17, p)[0]):
        pools = Pools(3, fresh=fresh)
        got = mix(pools)
        assert not bool(got.isnan().any()), "no NaN made by the mix"
        assert torch.equal(got[special], a[special]), "the first base's value where a weighed mix would be NaN"
        ordinary = ~special
        low, high = torch.minimum(a, b)[ordinary], torch.maximum(a, b)[ordinary]
        assert bool(((got[ordinary] >= low) & (got[ordinary] <= high)).all())
        assert float((got[ordinary] == a[ordinary]).float().mean()) < 0.02, "everything else weighed"
    finite = Pools(3)
    finite.mixed(0, b.nan_to_num(), b.nan_to_num() + 1, 1)
    assert finite._kept[0] is None, "finite bases keep nothing and pay no mask"


def test_a_wide_call_scales_only_its_own_floating_mixes_by_the_keyed_sign_alike_in_every_job():
    bases = _bases(256)
    kept = [t.clone() for t in bases[0] + bases[1]]
    pools = Pools(5)
    pools.wide = (1, -1)
    wide = next(k for k in range(1000) if is_wide(k))
    plain = derive(bases, wide, Pools(5))  # no sign allowed: the plain mix
    got = derive(bases, wide, pools)
    factor = wide_sign(wide, pools.wide) * WIDE_SCALE
    assert factor in (WIDE_SCALE, -WIDE_SCALE)
    assert torch.equal(got[0], plain[0] * factor) and torch.equal(got[0], derive(bases, wide, pools)[0])
    assert torch.equal(got[1], plain[1])  # integers keep valid values
    assert all(torch.equal(t, k) for t, k in zip(bases[0] + bases[1], kept)), "a base is never scaled in place"
    narrow = next(k for k in range(1000) if not is_wide(k))
    assert torch.equal(derive(bases, narrow, pools)[0], derive(bases, narrow, Pools(5))[0])


def test_a_wide_call_takes_only_a_sign_the_reference_allowed_and_none_where_it_allowed_none():
    wide = [k for k in range(4000) if is_wide(k)]
    assert 0.10 < len(wide) / 4000 < 0.15  # one key in WIDE_EVERY
    assert {wide_sign(k, (1, -1)) for k in wide} == {1, -1}
    assert {wide_sign(k, (1,)) for k in wide} == {1} and {wide_sign(k, (-1,)) for k in wide} == {-1}
    assert {wide_sign(k, ()) for k in wide} == {0}
    assert {wide_sign(k, (1, -1)) for k in range(4000) if not is_wide(k)} == {0}


def test_wide_timed_calls_are_on_wherever_scaled_large_is_checked_on_every_device():
    from agent.engine.evaluate import EvalConfig

    assert EvalConfig(device="cpu").wide_calls and EvalConfig(device="cuda").wide_calls
    assert not EvalConfig(device="cuda", wide_timed_calls=False).wide_calls
    assert not EvalConfig(device="cpu", wide_timed_calls=False).wide_calls
    # Never at a scale no checked call compared element by element.
    assert not EvalConfig(device="cpu", distributions=("mixed_sign",)).wide_calls


def test_only_a_real_number_agrees_and_nothing_a_job_reports_raises():
    from agent.engine.evaluate.keyed import agree

    assert agree([1.0, 2], [1.0, 2.0], [0.1, 0.1])
    for wrong in (10 ** 400, float("nan"), float("inf"), True, "1.0", None, [1.0]):
        assert not agree([wrong], [1.0], [10.0]), wrong


def test_a_complex_outputs_projection_reads_its_imaginary_part():
    torch.manual_seed(2)
    pools = Pools(3)
    ref = torch.fft.fft(torch.randn(64, 256))
    expected = project([ref], 7, pools).tolist()
    bound = projection_bound([ref], 7, pools, None, None)
    assert agree(project([ref * (1 + 1e-6)], 7, pools).tolist(), expected, bound)
    assert not agree(project([torch.complex(ref.real, torch.zeros_like(ref.imag))], 7, pools).tolist(), expected, bound)
