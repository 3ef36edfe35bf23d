// The cache every weft server shares: open descriptors of the files it
// serves, each with its response header prebuilt, and (for knot-c) the
// files' contents.
//
// Why one cache for all: the EuroSys'07 study compared server architectures
// by giving every server the same cache of open descriptors and headers and
// the same hash function, so that differences come from the architecture.
// weft does the same: Knot, the µserver and WatPipe all look files up here.
//
// Model. A key is a clean path relative to the root (http/path.hpp); a
// directory's key is its index.html. An entry holds the open descriptor, the
// file's identity (device, inode, size, mtime), its ETag and Last-Modified,
// the prebuilt head of a 200 response up to the per-response lines (Date,
// Connection), and optionally the content. Entries are reference counted:
// FileRef keeps one alive while a response uses its descriptor or bytes,
// even if the cache drops it meanwhile; the last reference closes it.
//
// Bounds. At most Options::max_entries entries (least recently used go
// first) and at most Options::content_bytes of content. A file larger than
// Options::max_object is never held in memory (it is sent from its
// descriptor).
//
// Freshness. An entry older than Options::revalidate_s seconds is checked
// with one statx of its path on the next lookup; a changed inode, size or
// mtime replaces it. So a file edited or renamed over is served anew within
// a second, without a system call per request.
//
// Confinement. Files are opened with openat2(RESOLVE_BENEATH) relative to
// the root's descriptor: a symlink that leads outside the root gets 403,
// unless Options::follow_symlinks (then plain openat, still below the root
// by name, since clean paths have no "..").
//
// Concurrency. One futex lock (spinning briefly first) guards the table and
// the LRU list; it is held for a few hundred nanoseconds and never across a
// system call, so it works both between weft threads (which never park
// while holding it) and between kernel threads (the µserver's shared-SYMPED
// mode, WatPipe's stages). Opening a
// file and loading its content happen outside the lock.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "path.hpp"

namespace weft::http {

// The one hash function of the HTTP core (FNV-1a, 64 bits).
uint64_t hash_bytes(std::string_view s);

class FileCache;

struct FileEntry {
    // Set before the entry is published, then read-only.
    int fd = -1;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    uint64_t ino = 0, dev = 0;
    std::string_view content_type;
    std::string etag;          // "\"<mtime>-<size>\"" in hex, strong
    std::string last_modified; // HTTP date
    std::string head_200;      // "HTTP/1.1 200 OK\r\n...Accept-Ranges: bytes\r\n"

    // Content (knot-c): set once under the cache lock, then read-only.
    std::unique_ptr<char[]> content;
    std::atomic<uint8_t> content_state{0}; // ContentState

    // Owned by the cache, under its lock.
    std::atomic<uint32_t> refs{0};
    std::string key;
    uint64_t hash = 0;
    int64_t checked_s = 0;    // when the file was last compared with its path
    bool linked = false;      // in the table and the LRU list
    FileEntry *chain = nullptr;
    FileEntry *lru_prev = nullptr, *lru_next = nullptr;
};

enum ContentState : uint8_t { kNoContent, kLoading, kContentReady, kNotCacheable };

// A counted reference to an entry; moves, does not copy.
class FileRef {
public:
    FileRef() = default;
    FileRef(FileCache *c, FileEntry *e) : cache_(c), e_(e) {}
    FileRef(FileRef &&o) noexcept : cache_(o.cache_), e_(o.e_) { o.e_ = nullptr; }
    FileRef &operator=(FileRef &&o) noexcept;
    FileRef(const FileRef &) = delete;
    FileRef &operator=(const FileRef &) = delete;
    ~FileRef() { reset(); }

    void reset();
    FileEntry *get() const { return e_; }
    FileEntry *operator->() const { return e_; }
    explicit operator bool() const { return e_ != nullptr; }

private:
    FileCache *cache_ = nullptr;
    FileEntry *e_ = nullptr;
};

struct CacheOptions {
    size_t max_entries = 4096;      // open descriptors held
    size_t content_bytes = 0;       // content held in memory (0: none)
    size_t max_object = 1u << 20;   // largest file held in memory
    int revalidate_s = 1;           // seconds an entry is trusted without a statx
    bool follow_symlinks = false;   // serve symlinks that leave the root
    std::string server = "weft";    // the Server header
    // Reads content for the content cache (weft_pread in a weft server,
    // pread elsewhere): like pread(2).
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t off) = nullptr;
    // Closes a descriptor the cache opened (weft_close in a weft server, so
    // the runtime forgets its state of it; close elsewhere).
    int (*close)(int fd) = nullptr;
};

struct Lookup {
    uint16_t status = 0; // 200, or 301 (a directory named without '/'), 403, 404, 503 (no descriptor)
    FileRef file;        // for 200
};

class FileCache {
public:
    // root_fd: an O_PATH or O_DIRECTORY descriptor of the document root,
    // owned by the caller and kept open as long as the cache.
    FileCache(int root_fd, CacheOptions options);
    ~FileCache();
    FileCache(const FileCache &) = delete;
    FileCache &operator=(const FileCache &) = delete;

    Lookup find(const CleanPath &path);

    // The entry's content if it is (or can now be) held in memory, else
    // nullptr: then send from its descriptor. May read the file (parks a
    // weft thread when options.pread is weft_pread).
    const char *content(FileEntry *e);

    struct Counters {
        uint64_t hits, misses, revalidations, evictions, entries, content_bytes;
    };
    Counters counters() const;
    const CacheOptions &options() const { return opt_; }

private:
    friend class FileRef;
    void release(FileEntry *e);
    FileEntry *lookup_locked(std::string_view key, uint64_t hash);
    void link_locked(FileEntry *e);
    void unlink_locked(FileEntry *e);
    void touch_locked(FileEntry *e);
    void evict_locked();
    void lock();
    void unlock();
    uint16_t open_entry(std::string_view key, bool dir_form, std::unique_ptr<FileEntry> *out, bool *is_dir);
    bool still_fresh(const FileEntry *e) const;

    int root_fd_;
    CacheOptions opt_;
    std::atomic<uint32_t> lock_{0}; // a futex word: see lock()
    std::vector<FileEntry *> buckets_;
    FileEntry *lru_head_ = nullptr, *lru_tail_ = nullptr; // head: most recent
    size_t entries_ = 0, content_held_ = 0;
    uint64_t hits_ = 0, misses_ = 0, revalidations_ = 0, evictions_ = 0;
};

} // namespace weft::http
