// The resource-aware policy (resource.hpp): the scheduler, the readings of
// each rationed resource, and the policy table that binds them to a vproc.
#include "sched/resource.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "core/runtime.hpp"
#include "observe/graph.hpp"
#include "sched/kernel_door.hpp"
#include "sched/policy.hpp"

namespace weft::detail {

const char *const kRationedNames[kRCount] = {"cpu", "memory", "descriptors"};

// --- the scheduler ---

ResourceScheduler::Queue &ResourceScheduler::queue(uint32_t node) {
    if (node >= queues_.size()) {
        size_t old = queues_.size();
        queues_.resize(node + 1 > 2 * old ? node + 1 : 2 * old);
        for (size_t i = old; i < queues_.size(); ++i) {
            queues_[i].tickets = p_.base;
            queues_[i].stride = kStrideOne / p_.base;
        }
    }
    return queues_[node];
}

void ResourceScheduler::heap_swap(size_t i, size_t j) {
    std::swap(heap_[i], heap_[j]);
    queues_[heap_[i]].heap_at = static_cast<int32_t>(i);
    queues_[heap_[j]].heap_at = static_cast<int32_t>(j);
}

void ResourceScheduler::sift_up(size_t i) {
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(heap_[i], heap_[parent])) break;
        heap_swap(i, parent);
        i = parent;
    }
}

void ResourceScheduler::sift_down(size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_.size() && before(heap_[l], heap_[m])) m = l;
        if (r < heap_.size() && before(heap_[r], heap_[m])) m = r;
        if (m == i) return;
        heap_swap(i, m);
        i = m;
    }
}

void ResourceScheduler::enqueue(Tcb *t, uint32_t node) {
    Queue &q = queue(node);
    t->next = nullptr;
    if (q.tail) {
        q.tail->next = t;
        q.tail = t;
    } else {
        q.head = q.tail = t;
        // Back from idle: join a stride past the current pass, no credit for
        // the idle time.
        if (q.pass < global_pass_ + q.stride) q.pass = global_pass_ + q.stride;
        q.heap_at = static_cast<int32_t>(heap_.size());
        heap_.push_back(node);
        sift_up(heap_.size() - 1);
    }
    ++ready_;
}

Tcb *ResourceScheduler::pick() {
    if (heap_.empty()) return nullptr;
    uint32_t node = heap_[0];
    Queue &q = queues_[node];
    Tcb *t = q.head;
    q.head = t->next;
    global_pass_ = q.pass;
    q.pass += q.stride;
    if (!q.head) {
        q.tail = nullptr;
        q.heap_at = -1;
        heap_[0] = heap_.back();
        heap_.pop_back();
        if (!heap_.empty()) {
            queues_[heap_[0]].heap_at = 0;
            sift_down(0);
        }
    } else {
        sift_down(0);
    }
    --ready_;
    return t;
}

// --- the door ---

void Door::update(uint64_t delay_ns, uint64_t target_ns, bool cpu_over) {
    target_ = target_ns ? target_ns : 1;
    over_ = cpu_over;
    if (!cpu_over) { // the door is open; p fades (PIE's decay) but is not forgotten at once
        p_ *= 0.98;
        if (p_ < 1e-6) p_ = 0;
        last_delay_ = delay_ns;
        return;
    }
    const double t = static_cast<double>(target_);
    double step = kAlpha * (static_cast<double>(delay_ns) - t) / t +
                  kBeta * (static_cast<double>(delay_ns) - static_cast<double>(last_delay_)) / t;
    if (p_ < 0.001) step /= 32;
    else if (p_ < 0.01) step /= 8;
    else if (p_ < 0.1) step /= 2;
    p_ += step;
    if (p_ < 0) p_ = 0;
    if (p_ > 1) p_ = 1;
    last_delay_ = delay_ns;
}

bool Door::refuse() {
    if (!over_ || p_ <= 0) return false;
    rng_ ^= rng_ << 13; // xorshift64
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return static_cast<double>(rng_ >> 11) * 0x1.0p-53 < p_;
}

void ResourceScheduler::set_utilization(const double (&util)[kRCount]) {
    for (int r = 0; r < kRCount; ++r) {
        util_[r] = util[r];
        if (util[r] < 0) over_[r] = false;
        else if (util[r] >= p_.high) over_[r] = true;
        else if (util[r] < p_.low) over_[r] = false; // between the two: as it was
    }
}

uint32_t ResourceScheduler::tickets_for(const Forecast &f) const {
    double t = p_.base;
    if (!f.known) return p_.base;
    // +1 acquires, -1 releases, 0 neither.
    auto sign = [](double v, double eps) { return v > eps ? 1 : v < -eps ? -1 : 0; };
    int way[kRCount];
    way[kRMem] = sign(f.heap, p_.heap_epsilon);
    way[kRFds] = sign(f.fds, p_.count_epsilon);
    // CPU: finishing work (a descriptor closed) releases it; admitting new
    // work is weft_admit's (resource.hpp).
    way[kRCpu] = f.fds < -p_.count_epsilon ? -1 : 0;
    for (int r = 0; r < kRCount; ++r) {
        if (over_[r]) {
            if (way[r] < 0) t *= p_.promote;
            else if (way[r] > 0) t /= p_.demote;
        } else if (r != kRCpu && util_[r] >= 0 && util_[r] < p_.low / 2 && way[r] > 0) {
            t *= 2; // (not for the CPU: admitting work while the CPU idles needs no push)
        }
    }
    if (t < 1) return 1;
    if (t > p_.max_tickets) return p_.max_tickets;
    return static_cast<uint32_t>(t);
}

void ResourceScheduler::set_tickets(uint32_t node, uint32_t tickets) {
    Queue &q = queue(node);
    if (tickets == q.tickets) return;
    uint64_t stride = kStrideOne / tickets;
    if (q.pass > global_pass_) {
        unsigned __int128 left = q.pass - global_pass_;
        q.pass = global_pass_ + static_cast<uint64_t>(left * stride / q.stride);
    }
    q.tickets = tickets;
    q.stride = stride;
}

// --- the readings ---

namespace {

// The priorities are recomputed this often (and only while the vproc is
// picking threads): 10 ms follows a change of load within a few periods
// and costs four small reads per period.
constexpr uint64_t kPeriodNs = 10'000'000;
constexpr uint32_t kPicksBetweenClockReads = 64;
constexpr double kCpuWeight = 0.25; // of a period's CPU reading in the average
constexpr uint64_t kAdmittedSlack = 3; // the door's delay: a third of the longest wait of any thread
// Major page faults per second taken as the sign of thrashing (Capriccio
// §4.2.2), averaged over kFaultWindowNs so that the few re-reads after one
// eviction do not flip the verdict every period. At its onset the memory in
// use is taken as the capacity the machine really has for it (the page
// cache the program needs takes the rest); that learned capacity creeps
// back up by kCapacityCreep per period without thrashing.
constexpr double kThrashFaultsPerSec = 200;
constexpr double kFaultWindowNs = 100e6;
constexpr double kCapacityCreep = 1.005;
constexpr uint64_t kMinLearnedCapacity = uint64_t{16} << 20;

uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// A small file's first number ("max" and the like: 0).
uint64_t read_number(int fd) {
    char buf[64];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    return std::strtoull(buf, nullptr, 10);
}

// The smallest limit in `file` of the cgroup at `path` (under `root`) and
// its ancestors; 0 if none. A value at or above 2^60 is "no limit" (cgroup
// v1 writes 2^63 rounded down to a page; v2 writes "max", read as 0).
uint64_t smallest_limit(const std::string &root, std::string path, const char *file) {
    uint64_t limit = 0;
    for (;;) {
        std::string name = root + (path == "/" ? std::string() : path) + "/" + file;
        int fd = open(name.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            uint64_t v = read_number(fd);
            close(fd);
            if (v && v < (uint64_t{1} << 60) && (!limit || v < limit)) limit = v;
        }
        if (path == "/" || path.empty()) break;
        size_t slash = path.rfind('/');
        path = slash == 0 ? "/" : path.substr(0, slash);
    }
    return limit;
}

} // namespace

uint64_t cgroup_memory_limit() {
    FILE *f = std::fopen("/proc/self/cgroup", "re");
    if (!f) return 0;
    char line[4096];
    std::string v2, v1;
    while (std::fgets(line, sizeof line, f)) {
        std::string l(line);
        while (!l.empty() && l.back() == '\n') l.pop_back();
        if (l.compare(0, 3, "0::") == 0) {
            v2 = l.substr(3);
        } else {
            // "N:controller[,controller...]:/path"
            size_t a = l.find(':'), b = a == std::string::npos ? a : l.find(':', a + 1);
            if (b == std::string::npos) continue;
            std::string_view controllers(l.data() + a + 1, b - a - 1);
            for (size_t at = 0; at <= controllers.size();) { // the comma-separated names
                size_t end = controllers.find(',', at);
                if (end == std::string_view::npos) end = controllers.size();
                if (controllers.substr(at, end - at) == "memory") v1 = l.substr(b + 1);
                at = end + 1;
            }
        }
    }
    std::fclose(f);
    uint64_t limit = 0;
    if (!v1.empty()) limit = smallest_limit("/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes");
    if (!limit && !v2.empty()) limit = smallest_limit("/sys/fs/cgroup", v2, "memory.max");
    return limit;
}

namespace {

int count_open_fds() {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 0;
    int n = 0;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n - 1; // the directory's own descriptor
}

ResourceParams params_for(const Vproc *vp) {
    ResourceParams p;
    p.admit_target_ns = vp->rt->cfg.admit_target_ns;
    return p;
}

struct ResourceState {
    Vproc *vp;
    ResourceScheduler sched;
    uint32_t countdown = kPicksBetweenClockReads;
    uint64_t last_ns = 0, last_cpu_ns = 0, last_majflt = 0;
    uint64_t mem_limit = 0; // bytes, 0: none known
    uint64_t learned = 0;   // capacity learned from thrashing, 0: none
    double fault_rate = 0;  // major faults per second, averaged over kFaultWindowNs
    int statm = -1;         // /proc/self/statm
    int schedstat = -1;     // /proc/thread-self/schedstat of the vproc's thread (-1: not yet, -2: none)
    int64_t fds_base = 0;   // descriptors open when the runtime started
    uint64_t fds_limit = 0;
    double util[kRCount] = {-1, -1, -1};
    Door door;
    uint64_t new_wait_max = 0; // ticks: the longest first-run wait picked this period
    uint64_t all_wait_max = 0; // ticks: the longest wait of any thread picked this period
    uint64_t last_idles = 0;   // the vproc's idle sleeps at the last period

    double ns_per_tick = 0; // the TSC's rate (set at the first period, before anything is over-booked)
    uint64_t ns(uint64_t ticks) const { return static_cast<uint64_t>(static_cast<double>(ticks) * ns_per_tick); }

    explicit ResourceState(Vproc *v) : vp(v), sched(params_for(v)) {
        mem_limit = v->rt->cfg.mem_limit ? v->rt->cfg.mem_limit : cgroup_memory_limit();
        statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
        fds_base = count_open_fds();
        rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) fds_limit = rl.rlim_cur;
        last_ns = now_ns();
        last_cpu_ns = 0; // read at the first period, on the vproc's own thread
        rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        last_majflt = static_cast<uint64_t>(ru.ru_majflt);
    }
    ~ResourceState() {
        if (statm >= 0) close(statm);
        if (schedstat >= 0) close(schedstat);
    }

    // The calling kernel thread's CPU time plus run-queue wait, ns
    // (/proc/thread-self/schedstat, opened on the vproc's own thread at its
    // first reading); its CPU time alone where that file is missing.
    uint64_t cpu_demand_ns() {
        if (schedstat == -1) schedstat = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        if (schedstat < 0) {
            schedstat = -2;
            return thread_cpu_ns();
        }
        char buf[128];
        ssize_t n = pread(schedstat, buf, sizeof buf - 1, 0);
        unsigned long long on_cpu, waiting;
        if (n <= 0) return thread_cpu_ns();
        buf[n] = 0;
        if (std::sscanf(buf, "%llu %llu", &on_cpu, &waiting) != 2) return thread_cpu_ns();
        return on_cpu + waiting;
    }

    // Anonymous memory of the process (resident less file-backed), bytes.
    uint64_t anon_bytes() const {
        char buf[256];
        ssize_t n = statm >= 0 ? pread(statm, buf, sizeof buf - 1, 0) : -1;
        if (n <= 0) return 0;
        buf[n] = 0;
        unsigned long long size, resident, shared;
        if (std::sscanf(buf, "%llu %llu %llu", &size, &resident, &shared) != 3) return 0;
        return (resident > shared ? resident - shared : 0) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    }

    void measure(uint64_t now) {
        double dt = static_cast<double>(now - last_ns);
        // CPU demand, not use: time on the CPU plus time waiting for it in
        // the kernel's run queue. A vproc held back by a quota or by other
        // processes uses little CPU while it is overloaded.
        // Averaged over periods (weight 1/4): schedstat moves at the kernel's
        // ticks, so one 10 ms period of a saturated vproc reads 0.78 and the
        // next 1.17, and the over-booked flag flipped with it.
        uint64_t cpu = cpu_demand_ns();
        if (last_cpu_ns) {
            double now_util = static_cast<double>(cpu - last_cpu_ns) / dt;
            util[kRCpu] = util[kRCpu] < 0 ? now_util : util[kRCpu] + (now_util - util[kRCpu]) * kCpuWeight;
        }
        last_cpu_ns = cpu;
        rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        auto majflt = static_cast<uint64_t>(ru.ru_majflt);
        double now_rate = static_cast<double>(majflt - last_majflt) / (dt / 1e9);
        last_majflt = majflt;
        double w = dt >= kFaultWindowNs ? 1 : dt / kFaultWindowNs;
        fault_rate += (now_rate - fault_rate) * w;
        uint64_t anon = anon_bytes();
        if (fault_rate >= kThrashFaultsPerSec) {
            uint64_t at = anon > kMinLearnedCapacity ? anon : kMinLearnedCapacity;
            if (!learned || at < learned) learned = at;
        } else if (learned) {
            learned = static_cast<uint64_t>(static_cast<double>(learned) * kCapacityCreep);
            if (mem_limit && learned >= mem_limit) learned = 0; // back to the configured limit
        }
        uint64_t capacity = learned && (!mem_limit || learned < mem_limit) ? learned : mem_limit;
        util[kRMem] = capacity ? static_cast<double>(anon) / static_cast<double>(capacity) : -1;
        if (fds_limit) {
            int64_t open_now = fds_base;
            for (auto &v : vp->rt->vprocs) open_now += v->res_fds.get();
            util[kRFds] = static_cast<double>(open_now) / static_cast<double>(fds_limit);
        }
        last_ns = now;
    }

    Forecast forecast(uint32_t node) const {
        Forecast f;
        const BlockingGraph *g = vp->graph;
        if (!g || node == 0 || node > g->node_count()) return f;
        const GraphNode &n = g->node(node - 1);
        if (!n.outs.load(std::memory_order_relaxed)) return f;
        f.known = true;
        f.ticks = n.out_ticks.get();
        f.heap = n.out_res[kResHeap].get();
        f.fds = n.out_res[kResFds].get();
        f.threads = n.out_res[kResThreads].get();
        return f;
    }

    void maybe_update() {
        if (--countdown) return;
        countdown = kPicksBetweenClockReads;
        uint64_t now = now_ns();
        if (now - last_ns < kPeriodNs) return;
        measure(now);
        if (!ns_per_tick) ns_per_tick = 1.0 / graph_ticks_per_ns(vp->rt);
        sched.update(util, vp->graph ? vp->graph->node_count() : 0, [this](uint32_t n) { return forecast(n); });
        uint64_t delay = new_wait_max;
        if (const Tcb *oldest = sched.oldest_new()) {
            uint64_t age = graph_ticks() - oldest->policy_word;
            if (age > delay) delay = age;
        }
        // Admitted work waits too: a request on a kept-alive connection
        // may wait up to kAdmittedSlack targets before the door counts it.
        if (all_wait_max / kAdmittedSlack > delay) delay = all_wait_max / kAdmittedSlack;
        new_wait_max = all_wait_max = 0;
        door.update(ns(delay), sched.params().admit_target_ns, sched.over(kRCpu));
        // The vproc slept in the period: the CPU had room after all, and
        // the door refused more than the load needed.
        auto idles = static_cast<uint64_t>(vp->stats.idle_sleeps.get());
        if (idles != last_idles) door.halve();
        last_idles = idles;
        if (KernelDoor *k = vp->kernel_door.load(std::memory_order_relaxed)) k->set_share(door.share());
    }
};

void *resource_create(Vproc *vp) { return new ResourceState(vp); }
void resource_destroy(void *s) { delete static_cast<ResourceState *>(s); }

// A thread that has not run yet (the graph attaches its record at its
// first run) joins the new-work queue stamped with the time; when picked,
// the stamp becomes how long it waited, for weft_admit.
void resource_enqueue(void *s, Tcb *t) {
    KeepFpStatus keep; // in the enqueuing thread's context
    auto *st = static_cast<ResourceState *>(s);
    t->policy_word = graph_ticks();
    st->sched.enqueue(t, t->graph ? t->graph->at : ResourceScheduler::kNewWork);
}

Tcb *resource_pick(void *s) {
    KeepFpStatus keep; // in the switching thread's context
    auto *st = static_cast<ResourceState *>(s);
    st->maybe_update();
    Tcb *t = st->sched.pick();
    if (t) {
        t->policy_word = graph_ticks() - t->policy_word;
        if (!t->graph && t->policy_word > st->new_wait_max) st->new_wait_max = t->policy_word;
        if (t->policy_word > st->all_wait_max) st->all_wait_max = t->policy_word;
    }
    return t;
}

size_t resource_ready(void *s) { return static_cast<ResourceState *>(s)->sched.ready(); }

bool resource_admit(void *s, Tcb *t) {
    KeepFpStatus keep;
    auto *st = static_cast<ResourceState *>(s);
    return st->sched.admit(st->ns(t->policy_word));
}

// Before a thread exists for new work: the door's draw (Door, resource.hpp).
bool resource_admit_new(void *s) { return !static_cast<ResourceState *>(s)->door.refuse(); }

// A thread given away keeps none of its waiting time here: the new vproc
// stamps it again when it queues it.
size_t resource_give(void *s, Tcb *keep, Tcb **out, size_t max) {
    return give_by_pick(&kResourcePolicy, s, keep, out, max);
}

} // namespace

const PolicyOps kResourcePolicy = {"resource",     resource_create, resource_destroy, resource_enqueue, resource_pick,
                                   resource_ready, nullptr,         resource_admit,   resource_give,
                                   resource_admit_new};

} // namespace weft::detail
