import numpy as np

from treegen.core.rng import Pcg32, prob_u32


def test_pcg32_matches_reference_vector():
    # pcg32-demo (pcg-random.org): pcg32_srandom_r(&rng, 42, 54)
    rng = Pcg32(42, 54)
    assert [rng.next_u32() for _ in range(6)] == [
        0xA15C02B7, 0x7B47F409, 0xBA1D3330, 0x83D2F293, 0xBFA4784B, 0xCBED606E]


def test_same_seed_same_sequence_and_different_seed_differs():
    a, b, c = Pcg32(7), Pcg32(7), Pcg32(8)
    sa = [a.next_u32() for _ in range(100)]
    assert sa == [b.next_u32() for _ in range(100)]
    assert sa != [c.next_u32() for _ in range(100)]


def test_below_is_in_range_and_roughly_uniform():
    rng = Pcg32(3)
    draws = np.array([rng.below(10) for _ in range(20000)])
    assert draws.min() == 0 and draws.max() == 9
    counts = np.bincount(draws, minlength=10)
    assert np.all(np.abs(counts - 2000) < 200)


def test_normal_q16_moments():
    rng = Pcg32(11)
    z = np.array([rng.normal_q16() for _ in range(40000)]) / 65536.0
    assert abs(z.mean()) < 0.02
    assert abs(z.std() - 1.0) < 0.02
    assert np.abs(z).max() <= 2 * np.sqrt(3) + 1e-9


def test_prob_u32_edges():
    assert prob_u32(0.0) == 0 and prob_u32(-1) == 0
    assert prob_u32(1.0) == 1 << 32
    assert prob_u32(0.5) == 1 << 31
