// SipHash-2-4 (Aumasson and Bernstein), a keyed pseudo-random function: the harness's native modules sign what they
// hand the parent with it (kernel_census.cpp, aten_watch.cpp), so that a tally the parent accepts can only have come
// from the module holding the key. The parent checks it with kernel_census.siphash24.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
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

// The key on a page of its own that no one can read between signatures (PROT_NONE): the candidate's Python shares
// this process and can read any readable memory with ctypes; a key kept in the module's .bss was found by trying
// every 16 bytes there against one signed report (the tenth red team). Reading this page first takes an mprotect of
// its own, through a pointer it must find: code written against this harness in native terms, still not impossible.
class GuardedKey {
 public:
  bool set(const char* secret) {
    if (page_ != nullptr) return false;
    const long size = sysconf(_SC_PAGESIZE);
    void* page = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return false;
    std::memcpy(page, secret, 16);
    mprotect(page, size, PROT_NONE);
    page_ = page;
    size_ = size;
    return true;
  }
  bool held() const { return page_ != nullptr; }
  uint64_t sign(const std::string& data) const {
    uint64_t key[2] = {0, 0};
    mprotect(page_, size_, PROT_READ);
    std::memcpy(key, page_, 16);
    mprotect(page_, size_, PROT_NONE);
    const uint64_t tag = siphash(key, data);
    volatile uint64_t* wipe = key;
    wipe[0] = wipe[1] = 0;
    return tag;
  }

 private:
  void* page_ = nullptr;
  long size_ = 0;
};

}  // namespace kstudio
