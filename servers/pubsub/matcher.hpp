// The publish-subscribe matcher of StagedServer's §5.2, shared by the
// threaded and the staged server (servers/pubsub/main.cc).
//
// An event assigns an integer value to each of kAttrs attributes. A
// subscription is a conjunction of comparisons `attr op constant`; it
// matches an event when every comparison holds. Every subscription has one
// equality (its access predicate): subscriptions are indexed by it, so an
// event only checks those whose access predicate it satisfies — one index
// lookup per attribute of the event.
//
// The index is split in partitions by the access predicate's (attribute,
// value) key: partition p holds the subscriptions with key % parts == p, so
// a partitioned stage can give each vproc its own (no sharing, no locks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace pubsub {

using std::size_t;

inline constexpr int kAttrs = 16;

enum class Op : uint8_t { kLt, kLe, kEq, kGe, kGt };

struct Predicate {
    uint8_t attr;
    Op op;
    int32_t value;
    bool holds(int32_t v) const {
        switch (op) {
        case Op::kLt: return v < value;
        case Op::kLe: return v <= value;
        case Op::kEq: return v == value;
        case Op::kGe: return v >= value;
        case Op::kGt: return v > value;
        }
        return false;
    }
};

struct Event {
    int32_t value[kAttrs];
};

// Subscriptions as flat arrays: subscription i's predicates are
// preds[first[i] .. first[i + 1]), the first of them its access predicate.
struct Subscriptions {
    std::vector<Predicate> preds;
    std::vector<uint32_t> first{0};
    size_t size() const { return first.size() - 1; }
    void add(const std::vector<Predicate> &p); // p[0]: an equality
    bool matches(size_t i, const Event &e) const;
};

// Deterministic workload: `n` subscriptions (an equality on one attribute,
// 1-3 ranges on others, values in [0, range)), and events with every
// attribute in [0, range). seed picks the stream.
Subscriptions make_subscriptions(size_t n, int32_t range, uint64_t seed);
Event make_event(int32_t range, uint64_t &state);

inline uint64_t key_of(const Predicate &p) { return (uint64_t{p.attr} << 32) | static_cast<uint32_t>(p.value); }
inline uint64_t key_of(int attr, int32_t v) { return (uint64_t(attr) << 32) | static_cast<uint32_t>(v); }

class Index {
public:
    // The subscriptions of one partition (key % parts == part).
    Index(const Subscriptions &subs, unsigned parts = 1, unsigned part = 0);
    // Matching subscriptions (ids) for e, among this partition's; appends.
    size_t match(const Event &e, std::vector<uint32_t> *out) const;
    // Only the candidates under one access key (attr = value of e).
    size_t match_key(const Event &e, int attr, std::vector<uint32_t> *out) const;
    size_t size() const { return indexed_; }

private:
    const Subscriptions &subs_;
    std::unordered_map<uint64_t, std::vector<uint32_t>> by_key_;
    size_t indexed_ = 0;
};

// Every subscription checked: the oracle the index is tested against.
size_t match_all(const Subscriptions &subs, const Event &e, std::vector<uint32_t> *out);

} // namespace pubsub
