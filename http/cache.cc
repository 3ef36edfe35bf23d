#include "cache.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "date.hpp"
#include "mime.hpp"

namespace weft::http {
namespace {

int64_t now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec;
}

int64_t mtime_ns_of(const struct statx &st) {
    return static_cast<int64_t>(st.stx_mtime.tv_sec) * 1000000000 + st.stx_mtime.tv_nsec;
}

// openat2 confined below root (or plain openat when symlinks may leave it).
// -1 with errno. EXDEV / ELOOP: the path tried to leave the root.
int open_below(int root, const char *rel, bool follow) {
    if (follow) return openat(root, rel, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct open_how how {};
    how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK; // NONBLOCK: a FIFO must not hang open()
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    return static_cast<int>(syscall(SYS_openat2, root, rel, &how, sizeof how));
}

uint16_t status_of_errno(int e) {
    switch (e) {
    case ENOENT:
    case ENOTDIR:
    case ENAMETOOLONG:
        return 404;
    case EACCES:
    case EPERM:
    case EXDEV: // RESOLVE_BENEATH: a symlink or ".." leads outside the root
    case ELOOP:
        return 403;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
        return 503;
    default:
        return 500;
    }
}

} // namespace

uint64_t hash_bytes(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a offset basis
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001b3ull; // FNV prime
    }
    return h;
}

// ---- FileRef ----

FileRef &FileRef::operator=(FileRef &&o) noexcept {
    if (this != &o) {
        reset();
        cache_ = o.cache_;
        e_ = o.e_;
        o.e_ = nullptr;
    }
    return *this;
}

void FileRef::reset() {
    if (e_) cache_->release(e_);
    e_ = nullptr;
}

// ---- FileCache ----

FileCache::FileCache(int root_fd, CacheOptions options) : root_fd_(root_fd), opt_(std::move(options)) {
    if (!opt_.pread) opt_.pread = ::pread;
    if (!opt_.close) opt_.close = ::close;
    if (opt_.max_entries == 0) opt_.max_entries = 1;
    size_t n = 16;
    while (n < 2 * opt_.max_entries) n *= 2;
    buckets_.assign(n, nullptr);
}

FileCache::~FileCache() {
    // Every FileRef must be gone by now; the cache's own references remain.
    while (lru_head_) {
        FileEntry *e = lru_head_;
        unlink_locked(e);
        release(e);
    }
}

// A futex mutex (Drepper's "Futexes are tricky", mutex 2): 0 free, 1 held,
// 2 held with sleepers. A short spin first: the lock is held for a few
// hundred nanoseconds, never across a system call, so a waiter usually gets
// it before sleeping would pay off. Sleeping matters when the holder's
// kernel thread is preempted (shared-SYMPED with more processes than CPUs);
// a weft thread never parks holding it, so a sleeper only ever waits for a
// running or runnable kernel thread.
void FileCache::lock() {
    uint32_t c = 0;
    if (lock_.compare_exchange_strong(c, 1, std::memory_order_acquire)) return;
    for (int spins = 0; spins < 100; ++spins) {
        __builtin_ia32_pause();
        c = 0;
        if (lock_.load(std::memory_order_relaxed) == 0 &&
            lock_.compare_exchange_strong(c, 1, std::memory_order_acquire))
            return;
    }
    if (c != 2) c = lock_.exchange(2, std::memory_order_acquire);
    while (c != 0) {
        syscall(SYS_futex, reinterpret_cast<uint32_t *>(&lock_), FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
        c = lock_.exchange(2, std::memory_order_acquire);
    }
}

void FileCache::unlock() {
    if (lock_.exchange(0, std::memory_order_release) == 2)
        syscall(SYS_futex, reinterpret_cast<uint32_t *>(&lock_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void FileCache::release(FileEntry *e) {
    if (e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (e->fd >= 0) opt_.close(e->fd);
    delete e;
}

FileEntry *FileCache::lookup_locked(std::string_view key, uint64_t hash) {
    for (FileEntry *e = buckets_[hash & (buckets_.size() - 1)]; e; e = e->chain)
        if (e->hash == hash && e->key == key) return e;
    return nullptr;
}

void FileCache::link_locked(FileEntry *e) {
    FileEntry *&b = buckets_[e->hash & (buckets_.size() - 1)];
    e->chain = b;
    b = e;
    e->lru_prev = nullptr;
    e->lru_next = lru_head_;
    if (lru_head_) lru_head_->lru_prev = e;
    lru_head_ = e;
    if (!lru_tail_) lru_tail_ = e;
    e->linked = true;
    e->refs.fetch_add(1, std::memory_order_relaxed); // the cache's own
    ++entries_;
}

void FileCache::unlink_locked(FileEntry *e) {
    FileEntry **p = &buckets_[e->hash & (buckets_.size() - 1)];
    while (*p != e) p = &(*p)->chain;
    *p = e->chain;
    (e->lru_prev ? e->lru_prev->lru_next : lru_head_) = e->lru_next;
    (e->lru_next ? e->lru_next->lru_prev : lru_tail_) = e->lru_prev;
    e->linked = false;
    --entries_;
    if (e->content_state.load(std::memory_order_relaxed) == kContentReady) content_held_ -= e->size;
    ++evictions_;
    // The caller drops the cache's reference (release) after unlocking.
}

void FileCache::touch_locked(FileEntry *e) {
    if (lru_head_ == e) return;
    e->lru_prev->lru_next = e->lru_next;
    (e->lru_next ? e->lru_next->lru_prev : lru_tail_) = e->lru_prev;
    e->lru_prev = nullptr;
    e->lru_next = lru_head_;
    lru_head_->lru_prev = e;
    lru_head_ = e;
}

bool FileCache::still_fresh(const FileEntry *e) const {
    struct statx st;
    const char *rel = e->key.empty() ? "." : e->key.c_str();
    if (statx(root_fd_, rel, AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS, &st) != 0) return false;
    return st.stx_ino == e->ino && makedev(st.stx_dev_major, st.stx_dev_minor) == e->dev && st.stx_size == e->size &&
           mtime_ns_of(st) == e->mtime_ns;
}

uint16_t FileCache::open_entry(std::string_view key, bool dir_form, std::unique_ptr<FileEntry> *out,
                               bool *is_dir) {
    std::string rel(key.empty() ? "." : key);
    *is_dir = false;
    int fd = open_below(root_fd_, rel.c_str(), opt_.follow_symlinks);
    if (fd < 0) {
        int e = errno;
        // A directory without an index: it exists, so 403 (as nginx without autoindex).
        if (e == ENOENT && dir_form) {
            size_t slash = rel.rfind('/');
            std::string dir = slash == std::string::npos ? "." : rel.substr(0, slash);
            int dfd = open_below(root_fd_, dir.c_str(), opt_.follow_symlinks);
            if (dfd >= 0) {
                struct stat ds;
                bool d = fstat(dfd, &ds) == 0 && S_ISDIR(ds.st_mode);
                ::close(dfd); // opened and closed here: the runtime never saw it
                if (d) return 403;
            }
        }
        return status_of_errno(e);
    }
    struct statx st;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &st) != 0) {
        ::close(fd);
        return 500;
    }
    if (S_ISDIR(st.stx_mode)) {
        ::close(fd);
        *is_dir = true;
        return dir_form ? 403 : 301; // "dir/index.html" a directory: nothing to serve
    }
    if (!S_ISREG(st.stx_mode)) { // FIFO, device, socket: never
        ::close(fd);
        return 403;
    }
    fcntl(fd, F_SETFL, 0); // O_NONBLOCK was for open() only

    auto e = std::make_unique<FileEntry>();
    e->fd = fd;
    e->size = st.stx_size;
    e->mtime_ns = mtime_ns_of(st);
    e->ino = st.stx_ino;
    e->dev = makedev(st.stx_dev_major, st.stx_dev_minor);
    e->content_type = content_type(key);
    char buf[64];
    snprintf(buf, sizeof buf, "\"%" PRIx64 "-%" PRIx64 "\"", static_cast<uint64_t>(e->mtime_ns), e->size);
    e->etag = buf;
    char date[kHttpDateLen];
    format_http_date(st.stx_mtime.tv_sec, date);
    e->last_modified.assign(date, kHttpDateLen);
    e->head_200.reserve(256);
    e->head_200 += "HTTP/1.1 200 OK\r\nServer: ";
    e->head_200 += opt_.server;
    e->head_200 += "\r\nContent-Type: ";
    e->head_200 += e->content_type;
    e->head_200 += "\r\nContent-Length: ";
    e->head_200 += std::to_string(e->size);
    e->head_200 += "\r\nLast-Modified: ";
    e->head_200 += e->last_modified;
    e->head_200 += "\r\nETag: ";
    e->head_200 += e->etag;
    e->head_200 += "\r\nAccept-Ranges: bytes\r\n";
    e->key.assign(key);
    e->hash = hash_bytes(key);
    e->checked_s = now_s();
    *out = std::move(e);
    return 200;
}

Lookup FileCache::find(const CleanPath &path) {
    // A directory is served by its index.html. Its key is built in a
    // per-kernel-thread buffer, not on the caller's stack (a server thread's
    // stack pages stay resident while it idles); nothing in find() parks,
    // so no other thread of this vproc can use the buffer meanwhile.
    std::string_view key = path.view();
    if (path.dir_form) {
        thread_local char keybuf[CleanPath::kMax + 16];
        size_t n = key.size();
        std::memcpy(keybuf, key.data(), n);
        const char *index = n ? "/index.html" : "index.html";
        size_t il = std::strlen(index);
        std::memcpy(keybuf + n, index, il);
        key = std::string_view(keybuf, n + il);
    }
    uint64_t h = hash_bytes(key);

    lock();
    FileEntry *e = lookup_locked(key, h);
    if (e) {
        e->refs.fetch_add(1, std::memory_order_relaxed);
        touch_locked(e);
        int64_t now = now_s();
        bool check = now - e->checked_s >= opt_.revalidate_s;
        if (check) {
            e->checked_s = now; // one thread checks; the others trust it meanwhile
            ++revalidations_;
        } else {
            ++hits_;
        }
        unlock();
        if (!check || still_fresh(e)) return {200, FileRef(this, e)};
        // Changed on disk: drop it and open the file anew.
        lock();
        bool drop = e->linked;
        if (drop) unlink_locked(e);
        unlock();
        if (drop) release(e);
        release(e);
    } else {
        ++misses_;
        unlock();
    }

    std::unique_ptr<FileEntry> fresh;
    bool is_dir = false;
    uint16_t status = open_entry(key, path.dir_form, &fresh, &is_dir);
    if (status != 200) return {status, {}};

    FileEntry *mine = fresh.release();
    mine->refs.store(1, std::memory_order_relaxed); // the caller's
    lock();
    FileEntry *other = lookup_locked(key, h);
    if (other) { // another thread opened it meanwhile: use theirs
        other->refs.fetch_add(1, std::memory_order_relaxed);
        touch_locked(other);
        unlock();
        release(mine);
        return {200, FileRef(this, other)};
    }
    link_locked(mine);
    std::vector<FileEntry *> dropped;
    while (entries_ > opt_.max_entries && lru_tail_ != mine) {
        FileEntry *victim = lru_tail_;
        unlink_locked(victim);
        dropped.push_back(victim);
    }
    unlock();
    for (FileEntry *d : dropped) release(d);
    return {200, FileRef(this, mine)};
}

const char *FileCache::content(FileEntry *e) {
    uint8_t state = e->content_state.load(std::memory_order_acquire);
    if (state == kContentReady) return e->content.get();
    if (state != kNoContent || opt_.content_bytes == 0 || e->size > opt_.max_object ||
        e->size > opt_.content_bytes)
        return nullptr;
    if (!e->content_state.compare_exchange_strong(state, kLoading, std::memory_order_acq_rel))
        return nullptr; // another thread is loading it: send from the descriptor this time

    std::unique_ptr<char[]> bytes(new (std::nothrow) char[e->size ? e->size : 1]);
    size_t got = 0;
    while (bytes && got < e->size) {
        ssize_t r = opt_.pread(e->fd, bytes.get() + got, e->size - got, static_cast<off_t>(got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    if (!bytes || got != e->size) { // shrank under us, or no memory: never cache it
        e->content_state.store(kNotCacheable, std::memory_order_release);
        return nullptr;
    }

    std::vector<FileEntry *> dropped;
    lock();
    e->content = std::move(bytes);
    e->content_state.store(kContentReady, std::memory_order_release);
    if (e->linked) {
        content_held_ += e->size;
        // Drop the least recently used holders of content until it fits.
        for (FileEntry *v = lru_tail_; v && content_held_ > opt_.content_bytes;) {
            FileEntry *prev = v->lru_prev;
            if (v != e && v->content_state.load(std::memory_order_relaxed) == kContentReady) {
                unlink_locked(v);
                dropped.push_back(v);
            }
            v = prev;
        }
    }
    unlock();
    for (FileEntry *d : dropped) release(d);
    return e->content.get();
}

FileCache::Counters FileCache::counters() const {
    auto *self = const_cast<FileCache *>(this);
    self->lock();
    Counters c{hits_, misses_, revalidations_, evictions_, entries_, content_held_};
    self->unlock();
    return c;
}

} // namespace weft::http
