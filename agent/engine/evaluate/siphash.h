// SipHash-2-4 (Aumasson and Bernstein), a keyed pseudo-random function: the harness's native modules sign what they
// hand the parent with it (kernel_census.cpp, aten_watch.cpp), so that a tally the parent accepts can only have come
// from the module holding the key. The parent checks it with kernel_census.siphash24.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kstudio {

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

inline void sip_round(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
  v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
  v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
  v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
}

inline uint64_t siphash(const uint64_t key[2], const std::string& data) {
  uint64_t v0 = 0x736f6d6570736575ULL ^ key[0], v1 = 0x646f72616e646f6dULL ^ key[1];
  uint64_t v2 = 0x6c7967656e657261ULL ^ key[0], v3 = 0x7465646279746573ULL ^ key[1];
  const size_t n = data.size();
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t m = 0;
    for (int j = 0; j < 8; ++j) m |= static_cast<uint64_t>(p[i + j]) << (8 * j);
    v3 ^= m; sip_round(v0, v1, v2, v3); sip_round(v0, v1, v2, v3); v0 ^= m;
  }
  uint64_t last = static_cast<uint64_t>(n & 0xff) << 56;
  for (int j = 0; i + j < n; ++j) last |= static_cast<uint64_t>(p[i + j]) << (8 * j);
  v3 ^= last; sip_round(v0, v1, v2, v3); sip_round(v0, v1, v2, v3); v0 ^= last;
  v2 ^= 0xff;
  for (int r = 0; r < 4; ++r) sip_round(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace kstudio
