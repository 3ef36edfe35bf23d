#include "matcher.hpp"

namespace pubsub {

namespace {
uint64_t next(uint64_t &s) { // xorshift64*
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
}
} // namespace

void Subscriptions::add(const std::vector<Predicate> &p) {
    preds.insert(preds.end(), p.begin(), p.end());
    first.push_back(static_cast<uint32_t>(preds.size()));
}

bool Subscriptions::matches(size_t i, const Event &e) const {
    for (uint32_t k = first[i]; k < first[i + 1]; ++k)
        if (!preds[k].holds(e.value[preds[k].attr])) return false;
    return true;
}

Subscriptions make_subscriptions(size_t n, int32_t range, uint64_t seed) {
    Subscriptions s;
    s.preds.reserve(n * 3);
    s.first.reserve(n + 1);
    uint64_t st = seed | 1;
    std::vector<Predicate> p;
    for (size_t i = 0; i < n; ++i) {
        p.clear();
        int eq = static_cast<int>(next(st) % kAttrs);
        p.push_back({static_cast<uint8_t>(eq), Op::kEq, static_cast<int32_t>(next(st) % static_cast<uint64_t>(range))});
        int extra = 1 + static_cast<int>(next(st) % 3);
        for (int k = 0; k < extra; ++k) {
            int a = static_cast<int>(next(st) % kAttrs);
            if (a == eq) a = (a + 1) % kAttrs;
            static constexpr Op kRanges[] = {Op::kLt, Op::kLe, Op::kGe, Op::kGt};
            p.push_back({static_cast<uint8_t>(a), kRanges[next(st) % 4], static_cast<int32_t>(next(st) % static_cast<uint64_t>(range))});
        }
        s.add(p);
    }
    return s;
}

Event make_event(int32_t range, uint64_t &state) {
    Event e;
    for (int a = 0; a < kAttrs; ++a) e.value[a] = static_cast<int32_t>(next(state) % static_cast<uint64_t>(range));
    return e;
}

Index::Index(const Subscriptions &subs, unsigned parts, unsigned part) : subs_(subs) {
    for (size_t i = 0; i < subs.size(); ++i) {
        uint64_t k = key_of(subs.preds[subs.first[i]]);
        if (k % parts != part) continue;
        by_key_[k].push_back(static_cast<uint32_t>(i));
        ++indexed_;
    }
}

size_t Index::match_key(const Event &e, int attr, std::vector<uint32_t> *out) const {
    auto it = by_key_.find(key_of(attr, e.value[attr]));
    if (it == by_key_.end()) return 0;
    size_t n = 0;
    for (uint32_t i : it->second)
        if (subs_.matches(i, e)) {
            ++n;
            if (out) out->push_back(i);
        }
    return n;
}

size_t Index::match(const Event &e, std::vector<uint32_t> *out) const {
    size_t n = 0;
    for (int a = 0; a < kAttrs; ++a) n += match_key(e, a, out);
    return n;
}

size_t match_all(const Subscriptions &subs, const Event &e, std::vector<uint32_t> *out) {
    size_t n = 0;
    for (size_t i = 0; i < subs.size(); ++i)
        if (subs.matches(i, e)) {
            ++n;
            if (out) out->push_back(static_cast<uint32_t>(i));
        }
    return n;
}

} // namespace pubsub
