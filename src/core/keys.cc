// Thread-specific data.
//
// Keys are process-wide (like pthread keys): a table of WEFT_KEYS_MAX slots,
// each with a generation number that is odd while the key exists. A thread's
// values live in an array grown on demand, each tagged with the generation it
// was stored under, so a deleted-and-recreated key never shows a stale value
// and key_delete need not visit every thread.
#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "core/runtime.hpp"

namespace weft::detail {

namespace {

struct KeySlot {
    std::atomic<uint64_t> seq{0};                  // odd: in use
    std::atomic<void (*)(void *)> destructor{nullptr};
};

KeySlot g_keys[WEFT_KEYS_MAX];
std::mutex g_keys_mu; // create/delete only; lookups read seq atomically

} // namespace

void run_tsd_destructors(Tcb *t) {
    for (int round = 0; round < WEFT_DESTRUCTOR_ITERATIONS; ++round) {
        bool ran = false;
        for (uint32_t k = 0; k < t->tsd_len; ++k) {
            TsdSlot &s = t->tsd[k];
            if (!s.value) continue;
            auto dtor = g_keys[k].destructor.load(std::memory_order_acquire);
            if (s.seq != g_keys[k].seq.load(std::memory_order_acquire) || !dtor) continue;
            void *v = s.value;
            s.value = nullptr;
            dtor(v);
            ran = true;
        }
        if (!ran) break;
    }
}

void free_tsd(Tcb *t) {
    std::free(t->tsd);
    t->tsd = nullptr;
    t->tsd_len = 0;
}

} // namespace weft::detail

using namespace weft::detail;

extern "C" {

int weft_key_create(weft_key_t *key, void (*destructor)(void *)) {
    if (!key) return EINVAL;
    std::lock_guard<std::mutex> lock(g_keys_mu);
    for (uint32_t k = 0; k < WEFT_KEYS_MAX; ++k) {
        uint64_t s = g_keys[k].seq.load(std::memory_order_relaxed);
        if (s & 1) continue;
        g_keys[k].destructor.store(destructor, std::memory_order_relaxed);
        g_keys[k].seq.store(s + 1, std::memory_order_release);
        *key = k;
        return 0;
    }
    return EAGAIN;
}

int weft_key_delete(weft_key_t key) {
    if (key >= WEFT_KEYS_MAX) return EINVAL;
    std::lock_guard<std::mutex> lock(g_keys_mu);
    uint64_t s = g_keys[key].seq.load(std::memory_order_relaxed);
    if (!(s & 1)) return EINVAL;
    g_keys[key].seq.store(s + 1, std::memory_order_release);
    g_keys[key].destructor.store(nullptr, std::memory_order_relaxed);
    return 0;
}

int weft_setspecific(weft_key_t key, const void *value) {
    Vproc *vp = tls_vproc;
    if (!vp) return EPERM;
    if (key >= WEFT_KEYS_MAX) return EINVAL;
    uint64_t seq = g_keys[key].seq.load(std::memory_order_acquire);
    if (!(seq & 1)) return EINVAL;
    Tcb *t = vp->current;
    if (key >= t->tsd_len) {
        uint32_t len = key + 1 < 16 ? 16 : 2 * (key + 1);
        if (len > WEFT_KEYS_MAX) len = WEFT_KEYS_MAX;
        auto *grown = static_cast<TsdSlot *>(std::realloc(t->tsd, len * sizeof(TsdSlot)));
        if (!grown) return ENOMEM;
        for (uint32_t i = t->tsd_len; i < len; ++i) grown[i] = TsdSlot{0, nullptr};
        t->tsd = grown;
        t->tsd_len = len;
    }
    t->tsd[key] = TsdSlot{seq, const_cast<void *>(value)};
    return 0;
}

void *weft_getspecific(weft_key_t key) {
    Vproc *vp = tls_vproc;
    if (!vp || key >= WEFT_KEYS_MAX) return nullptr;
    Tcb *t = vp->current;
    if (key >= t->tsd_len) return nullptr;
    const TsdSlot &s = t->tsd[key];
    return s.seq == g_keys[key].seq.load(std::memory_order_relaxed) ? s.value : nullptr;
}

} // extern "C"
