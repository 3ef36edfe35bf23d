// http/cache and http/response on a real directory: the file cache (lookup,
// confinement, revalidation, eviction, content) and the responder's
// static-file semantics.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/cache.hpp"
#include "http/date.hpp"
#include "http/parser.hpp"
#include "http/path.hpp"
#include "http/response.hpp"

using namespace weft::http;

namespace {

constexpr time_t kMtime = 784111777; // Sun, 06 Nov 1994 08:49:37 GMT
constexpr const char *kMtimeText = "Sun, 06 Nov 1994 08:49:37 GMT";

// A fresh directory under $TMPDIR (or /tmp), removed at the end.
class TempDir {
public:
    TempDir() {
        const char *base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/weft-http-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!mkdtemp(buf.data())) {
            ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
            return;
        }
        path_ = buf.data();
    }
    ~TempDir() {
        std::error_code ec;
        if (!path_.empty()) std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;

    const std::string &path() const { return path_; }
    std::string at(const std::string &rel) const { return path_ + "/" + rel; }

    // Write `content` to rel (truncating in place, so the inode stays);
    // parents are created.
    void write(const std::string &rel, const std::string &content, time_t mtime = kMtime) const {
        std::filesystem::create_directories(std::filesystem::path(at(rel)).parent_path());
        int fd = ::open(at(rel).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_GE(fd, 0) << rel << ": " << std::strerror(errno);
        ASSERT_EQ(static_cast<ssize_t>(content.size()), ::write(fd, content.data(), content.size()));
        ::close(fd);
        set_mtime(rel, mtime);
    }
    void set_mtime(const std::string &rel, time_t mtime, long nsec = 250000000) const {
        struct timespec ts[2] = {{mtime, nsec}, {mtime, nsec}};
        ASSERT_EQ(0, utimensat(AT_FDCWD, at(rel).c_str(), ts, 0)) << std::strerror(errno);
    }
    void mkdir(const std::string &rel) const { std::filesystem::create_directories(at(rel)); }
    void symlink(const std::string &target, const std::string &rel) const {
        ASSERT_EQ(0, ::symlink(target.c_str(), at(rel).c_str())) << std::strerror(errno);
    }

private:
    std::string path_;
};

std::string read_fd(int fd, uint64_t offset, uint64_t length) {
    std::string s(length, '\0');
    ssize_t n = pread(fd, s.data(), length, static_cast<off_t>(offset));
    s.resize(n < 0 ? 0 : static_cast<size_t>(n));
    return s;
}

std::string expected_etag(const std::string &file) {
    struct stat st;
    if (stat(file.c_str(), &st) != 0) return "?";
    uint64_t ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000u + static_cast<uint64_t>(st.st_mtim.tv_nsec);
    char buf[64];
    snprintf(buf, sizeof buf, "\"%" PRIx64 "-%" PRIx64 "\"", ns, static_cast<uint64_t>(st.st_size));
    return buf;
}

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

// The body a reply promises: from memory or from its file.
std::string body_of(const Reply &r) {
    switch (r.body) {
    case BodyKind::None:
        return "";
    case BodyKind::Memory:
        return std::string(r.mem, r.length);
    case BodyKind::File:
        return r.file ? read_fd(r.file->fd, r.offset, r.length) : "<no file>";
    }
    return "?";
}

// The document root every test starts from.
//   hello.txt      "hello"
//   index.html     "<h1>home</h1>"
//   sub/index.html "<p>sub</p>"
//   empty/         (no index.html)
//   big.bin        4096 bytes
//   zero.txt       0 bytes
class HttpCache : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_FALSE(root_.path().empty());
        root_.write("hello.txt", "hello");
        root_.write("index.html", "<h1>home</h1>");
        root_.write("sub/index.html", "<p>sub</p>");
        root_.mkdir("empty");
        std::string big(4096, '\0');
        for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
        root_.write("big.bin", big);
        root_.write("zero.txt", "");
        root_fd_ = ::open(root_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_GE(root_fd_, 0) << std::strerror(errno);
    }
    void TearDown() override {
        if (root_fd_ >= 0) ::close(root_fd_);
    }

    std::unique_ptr<FileCache> cache(CacheOptions o = CacheOptions{}) {
        return std::make_unique<FileCache>(root_fd_, std::move(o));
    }

    static Lookup find(FileCache &c, const std::string &target) {
        CleanPath p;
        int s = clean_path(target, &p);
        EXPECT_EQ(0, s) << target;
        return c.find(p);
    }

    // Parse `raw` (a whole request head) and answer it.
    static Reply ask(Responder &r, const std::string &raw, bool allow_keep_alive = true) {
        Parser parser;
        Request req;
        Reply out;
        ParseResult pr = parser.parse(raw.data(), raw.size(), &req);
        EXPECT_EQ(ParseResult::Done, pr.kind) << raw;
        if (pr.kind == ParseResult::Done) r.respond(req, allow_keep_alive, &out);
        return out;
    }
    static std::string get(const std::string &target, const std::string &extra = "") {
        return "GET " + target + " HTTP/1.1\r\nHost: t\r\n" + extra + "\r\n";
    }

    TempDir root_;
    int root_fd_ = -1;
};

} // namespace

// ---- the cache ----

TEST_F(HttpCache, FindsAFileWithItsPrebuiltHead) {
    auto c = cache();
    Lookup l = find(*c, "/hello.txt");
    ASSERT_EQ(200, l.status);
    ASSERT_TRUE(l.file);
    EXPECT_EQ(5u, l.file->size);
    EXPECT_EQ("hello", read_fd(l.file->fd, 0, 100));
    EXPECT_EQ("text/plain; charset=utf-8", l.file->content_type);
    EXPECT_EQ(kMtimeText, l.file->last_modified);
    EXPECT_EQ(expected_etag(root_.at("hello.txt")), l.file->etag);
    EXPECT_EQ("HTTP/1.1 200 OK\r\nServer: weft\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n"
              "Last-Modified: " +
                  std::string(kMtimeText) + "\r\nETag: " + expected_etag(root_.at("hello.txt")) +
                  "\r\nAccept-Ranges: bytes\r\n",
              l.file->head_200);
}

TEST_F(HttpCache, NamesItsServerInThePrebuiltHead) {
    CacheOptions o;
    o.server = "knot/1.0";
    auto c = cache(o);
    Lookup l = find(*c, "/hello.txt");
    ASSERT_EQ(200, l.status);
    EXPECT_TRUE(contains(l.file->head_200, "\r\nServer: knot/1.0\r\n"));
}

TEST_F(HttpCache, ServesADirectoryByItsIndex) {
    auto c = cache();
    Lookup l = find(*c, "/sub/");
    ASSERT_EQ(200, l.status);
    EXPECT_EQ("<p>sub</p>", read_fd(l.file->fd, 0, 100));
    EXPECT_EQ("text/html; charset=utf-8", l.file->content_type);
    Lookup root = find(*c, "/");
    ASSERT_EQ(200, root.status);
    EXPECT_EQ("<h1>home</h1>", read_fd(root.file->fd, 0, 100));
}

TEST_F(HttpCache, Gives404ForAMissingFile) {
    auto c = cache();
    EXPECT_EQ(404, find(*c, "/nope.txt").status);
    EXPECT_EQ(404, find(*c, "/no/such/dir/file").status);
    EXPECT_EQ(404, find(*c, "/hello.txt/").status) << "a file named as a directory";
    EXPECT_EQ(404, find(*c, "/hello.txt/x").status);
    EXPECT_FALSE(find(*c, "/nope.txt").file);
}

TEST_F(HttpCache, Gives301ForADirectoryNamedWithoutItsSlash) {
    auto c = cache();
    EXPECT_EQ(301, find(*c, "/sub").status);
    EXPECT_EQ(301, find(*c, "/empty").status);
}

TEST_F(HttpCache, Gives403ForADirectoryWithoutAnIndex) {
    auto c = cache();
    EXPECT_EQ(403, find(*c, "/empty/").status);
}

TEST_F(HttpCache, Gives403ForARootWithoutAnIndex) {
    TempDir bare;
    bare.write("a.txt", "a");
    int fd = ::open(bare.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    {
        FileCache c(fd, CacheOptions{});
        EXPECT_EQ(403, find(c, "/").status);
        EXPECT_EQ(200, find(c, "/a.txt").status);
    }
    ::close(fd);
}

TEST_F(HttpCache, Gives403ForAFifo) {
    ASSERT_EQ(0, mkfifo(root_.at("pipe").c_str(), 0644));
    auto c = cache();
    EXPECT_EQ(403, find(*c, "/pipe").status) << "a FIFO must neither be served nor hang open()";
}

TEST_F(HttpCache, Gives403ForASymlinkLeavingTheRoot) {
    TempDir outside;
    outside.write("secret.txt", "secret");
    root_.symlink(outside.at("secret.txt"), "abs-escape");
    root_.symlink("../" + std::filesystem::path(outside.path()).filename().string() + "/secret.txt", "rel-escape");
    root_.symlink(outside.path(), "dir-escape");
    auto c = cache();
    EXPECT_EQ(403, find(*c, "/abs-escape").status);
    EXPECT_EQ(403, find(*c, "/rel-escape").status);
    EXPECT_EQ(403, find(*c, "/dir-escape/secret.txt").status);
}

TEST_F(HttpCache, Serves200ForASymlinkLeavingTheRootWithFollowSymlinks) {
    TempDir outside;
    outside.write("secret.txt", "secret");
    root_.symlink(outside.at("secret.txt"), "abs-escape");
    root_.symlink(outside.path(), "dir-escape");
    CacheOptions o;
    o.follow_symlinks = true;
    auto c = cache(o);
    Lookup l = find(*c, "/abs-escape");
    ASSERT_EQ(200, l.status);
    EXPECT_EQ("secret", read_fd(l.file->fd, 0, 100));
    EXPECT_EQ(200, find(*c, "/dir-escape/secret.txt").status);
}

TEST_F(HttpCache, ServesASymlinkThatStaysBelowTheRoot) {
    root_.symlink("hello.txt", "alias.txt");
    root_.symlink("../hello.txt", "sub/up.txt");
    auto c = cache();
    Lookup l = find(*c, "/alias.txt");
    ASSERT_EQ(200, l.status);
    EXPECT_EQ("hello", read_fd(l.file->fd, 0, 100));
    EXPECT_EQ(200, find(*c, "/sub/up.txt").status);
}

TEST_F(HttpCache, CountsHitsAndMisses) {
    CacheOptions o;
    o.revalidate_s = 3600;
    auto c = cache(o);
    EXPECT_EQ(200, find(*c, "/hello.txt").status);
    EXPECT_EQ(200, find(*c, "/hello.txt").status);
    EXPECT_EQ(200, find(*c, "/hello.txt").status);
    auto n = c->counters();
    EXPECT_EQ(1u, n.misses);
    EXPECT_EQ(2u, n.hits);
    EXPECT_EQ(1u, n.entries);
    EXPECT_EQ(0u, n.evictions);
}

TEST_F(HttpCache, TrustsAnEntryWithinTheRevalidationInterval) {
    CacheOptions o;
    o.revalidate_s = 3600;
    auto c = cache(o);
    ASSERT_EQ(5u, find(*c, "/hello.txt").file->size);
    root_.write("hello.txt", "hello, world");
    EXPECT_EQ(5u, find(*c, "/hello.txt").file->size) << "no statx per request";
}

TEST_F(HttpCache, ServesAChangedFileAnewAfterRevalidation) {
    CacheOptions o;
    o.revalidate_s = 0;
    auto c = cache(o);
    Lookup before = find(*c, "/hello.txt");
    ASSERT_EQ(200, before.status);
    ASSERT_EQ(5u, before.file->size);
    const std::string old_etag = before.file->etag;

    root_.write("hello.txt", "hello, world");
    Lookup after = find(*c, "/hello.txt");
    ASSERT_EQ(200, after.status);
    EXPECT_EQ(12u, after.file->size);
    EXPECT_NE(old_etag, after.file->etag);
    EXPECT_EQ(expected_etag(root_.at("hello.txt")), after.file->etag);
    EXPECT_TRUE(contains(after.file->head_200, "Content-Length: 12\r\n"));
    EXPECT_EQ("hello, world", read_fd(after.file->fd, 0, 100));
    EXPECT_GE(c->counters().revalidations, 1u);
    EXPECT_EQ(1u, c->counters().entries);
    EXPECT_EQ(5u, before.file->size) << "a reference keeps the entry it was given";
}

TEST_F(HttpCache, NoticesAFileReplacedByRename) {
    CacheOptions o;
    o.revalidate_s = 0;
    auto c = cache(o);
    ASSERT_EQ(5u, find(*c, "/hello.txt").file->size);
    root_.write("hello.new", "HELLO");
    ASSERT_EQ(0, rename(root_.at("hello.new").c_str(), root_.at("hello.txt").c_str()));
    Lookup l = find(*c, "/hello.txt");
    ASSERT_EQ(200, l.status);
    EXPECT_EQ("HELLO", read_fd(l.file->fd, 0, 100)) << "same size and mtime, new inode";
}

TEST_F(HttpCache, Gives404OnceACachedFileIsDeleted) {
    CacheOptions o;
    o.revalidate_s = 0;
    auto c = cache(o);
    ASSERT_EQ(200, find(*c, "/hello.txt").status);
    ASSERT_EQ(0, unlink(root_.at("hello.txt").c_str()));
    EXPECT_EQ(404, find(*c, "/hello.txt").status);
    EXPECT_EQ(0u, c->counters().entries);
}

TEST_F(HttpCache, KeepsWorkingWhenEvictingBeyondMaxEntries) {
    root_.write("a.txt", "a");
    root_.write("b.txt", "bb");
    root_.write("c.txt", "ccc");
    CacheOptions o;
    o.max_entries = 2;
    auto c = cache(o);
    for (int round = 0; round < 3; ++round) {
        for (const char *name : {"a", "b", "c"}) {
            Lookup l = find(*c, std::string("/") + name + ".txt");
            ASSERT_EQ(200, l.status);
            const size_t size = static_cast<size_t>(name[0] - 'a' + 1);
            EXPECT_EQ(size, l.file->size);
            EXPECT_EQ(std::string(size, name[0]), read_fd(l.file->fd, 0, 100));
            EXPECT_LE(c->counters().entries, 2u);
        }
    }
    EXPECT_GT(c->counters().evictions, 0u);
}

TEST_F(HttpCache, KeepsAFileRefValidAcrossAnEviction) {
    root_.write("a.txt", "aaaa");
    root_.write("b.txt", "bbbb");
    CacheOptions o;
    o.max_entries = 1;
    auto c = cache(o);
    Lookup a = find(*c, "/a.txt");
    ASSERT_EQ(200, a.status);
    ASSERT_EQ(200, find(*c, "/b.txt").status);
    ASSERT_EQ(200, find(*c, "/hello.txt").status);
    EXPECT_GE(c->counters().evictions, 1u);
    EXPECT_EQ(1u, c->counters().entries);
    EXPECT_EQ("aaaa", read_fd(a.file->fd, 0, 100)) << "the evicted entry's descriptor is still open";
    EXPECT_EQ(4u, a.file->size);

    const int fd = a.file->fd;
    a.file.reset(); // the last reference closes the descriptor
    errno = 0;
    EXPECT_EQ(-1, fcntl(fd, F_GETFD));
    EXPECT_EQ(EBADF, errno);
}

TEST_F(HttpCache, MovesAFileRef) {
    auto c = cache();
    Lookup l = find(*c, "/hello.txt");
    FileRef moved = std::move(l.file);
    EXPECT_FALSE(l.file);
    ASSERT_TRUE(moved);
    FileRef other;
    other = std::move(moved);
    EXPECT_FALSE(moved);
    ASSERT_TRUE(other);
    EXPECT_EQ(5u, other->size);
}

TEST_F(HttpCache, HoldsContentInMemoryWhenAsked) {
    CacheOptions o;
    o.content_bytes = 1 << 20;
    o.revalidate_s = 3600;
    auto c = cache(o);
    Lookup l = find(*c, "/big.bin");
    ASSERT_EQ(200, l.status);
    const char *bytes = c->content(l.file.get());
    ASSERT_NE(nullptr, bytes);
    EXPECT_EQ(read_fd(l.file->fd, 0, 4096), std::string(bytes, 4096));
    EXPECT_EQ(4096u, c->counters().content_bytes);
    EXPECT_EQ(bytes, c->content(l.file.get())) << "loaded once";
    Lookup again = find(*c, "/big.bin");
    EXPECT_EQ(bytes, c->content(again.file.get()));
    EXPECT_EQ(4096u, c->counters().content_bytes);
}

TEST_F(HttpCache, HoldsNoContentByDefaultOrBeyondMaxObject) {
    auto plain = cache();
    Lookup l = find(*plain, "/hello.txt");
    EXPECT_EQ(nullptr, plain->content(l.file.get()));

    CacheOptions o;
    o.content_bytes = 1 << 20;
    o.max_object = 4;
    auto c = cache(o);
    Lookup big = find(*c, "/hello.txt");
    EXPECT_EQ(nullptr, c->content(big.file.get())) << "5 bytes > max_object";
    EXPECT_EQ(0u, c->counters().content_bytes);
}

TEST_F(HttpCache, HoldsTheContentOfAnEmptyFile) {
    CacheOptions o;
    o.content_bytes = 1 << 20;
    auto c = cache(o);
    Lookup l = find(*c, "/zero.txt");
    ASSERT_EQ(200, l.status);
    EXPECT_EQ(0u, l.file->size);
    EXPECT_NE(nullptr, c->content(l.file.get()));
}

TEST_F(HttpCache, DropsOlderContentToStayWithinContentBytes) {
    root_.write("x.txt", "xxxxxxxx");
    root_.write("y.txt", "yyyyyyyy");
    CacheOptions o;
    o.content_bytes = 12;
    o.revalidate_s = 3600;
    auto c = cache(o);
    Lookup x = find(*c, "/x.txt");
    const char *xb = c->content(x.file.get());
    ASSERT_NE(nullptr, xb);
    Lookup y = find(*c, "/y.txt");
    const char *yb = c->content(y.file.get());
    ASSERT_NE(nullptr, yb);
    auto n = c->counters();
    EXPECT_LE(n.content_bytes, 12u);
    EXPECT_EQ(8u, n.content_bytes);
    EXPECT_EQ(1u, n.entries);
    EXPECT_EQ(1u, n.evictions);
    EXPECT_EQ("xxxxxxxx", std::string(xb, 8)) << "the dropped entry's content lives while referenced";
    EXPECT_EQ("yyyyyyyy", std::string(yb, 8));
}

TEST_F(HttpCache, KeepsContentValidAcrossAnEviction) {
    root_.write("a.txt", "content of a");
    CacheOptions o;
    o.content_bytes = 1 << 20;
    o.max_entries = 1;
    auto c = cache(o);
    Lookup a = find(*c, "/a.txt");
    const char *bytes = c->content(a.file.get());
    ASSERT_NE(nullptr, bytes);
    ASSERT_EQ(200, find(*c, "/hello.txt").status);
    ASSERT_EQ(200, find(*c, "/sub/").status);
    EXPECT_GE(c->counters().evictions, 1u);
    EXPECT_EQ("content of a", std::string(bytes, 12));
}

TEST_F(HttpCache, SurvivesConcurrentLookupsWithEviction) {
    for (int i = 0; i < 6; ++i) root_.write("f" + std::to_string(i), std::string(static_cast<size_t>(i + 1), 'a' + i));
    CacheOptions o;
    o.max_entries = 3;
    o.content_bytes = 10;
    o.revalidate_s = 0;
    auto c = cache(o);
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int k = 0; k < 2000; ++k) {
                const int i = (k * 7 + t) % 6;
                CleanPath p;
                clean_path("/f" + std::to_string(i), &p);
                Lookup l = c->find(p);
                const std::string want(static_cast<size_t>(i + 1), static_cast<char>('a' + i));
                if (l.status != 200 || l.file->size != want.size()) {
                    ++wrong;
                    continue;
                }
                const char *bytes = c->content(l.file.get());
                std::string got = bytes ? std::string(bytes, want.size()) : read_fd(l.file->fd, 0, 100);
                if (got != want) ++wrong;
            }
        });
    }
    for (auto &t : threads) t.join();
    EXPECT_EQ(0, wrong.load());
    EXPECT_LE(c->counters().entries, 3u);
    EXPECT_LE(c->counters().content_bytes, 10u);
}

TEST(HttpHash, IsFnv1a64) {
    EXPECT_EQ(0xcbf29ce484222325ull, hash_bytes(""));
    EXPECT_EQ(0xaf63dc4c8601ec8cull, hash_bytes("a"));
    EXPECT_EQ(0x85944171f73967e8ull, hash_bytes("foobar"));
}

// ---- the responder ----

TEST_F(HttpCache, Responds200WithThePrebuiltHeadDateAndConnection) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/hello.txt"));
    ASSERT_EQ(200, out.status);
    EXPECT_TRUE(out.keep_alive);
    const std::string head(out.head_view());
    const std::string &prebuilt = out.file->head_200;
    ASSERT_EQ(prebuilt, head.substr(0, prebuilt.size()));
    const std::string rest = head.substr(prebuilt.size());
    ASSERT_EQ(6 + kHttpDateLen + 28, rest.size()) << rest;
    EXPECT_EQ("Date: ", rest.substr(0, 6));
    EXPECT_NE(-1, parse_http_date(rest.substr(6, kHttpDateLen)));
    EXPECT_EQ("\r\nConnection: keep-alive\r\n\r\n", rest.substr(6 + kHttpDateLen));
    EXPECT_EQ(BodyKind::File, out.body);
    EXPECT_EQ(0u, out.offset);
    EXPECT_EQ(5u, out.length);
    EXPECT_EQ("hello", body_of(out));
}

TEST_F(HttpCache, ClosesTheConnectionWhenTheClientOrServerSays) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/hello.txt", "Connection: close\r\n"));
    EXPECT_FALSE(out.keep_alive);
    EXPECT_TRUE(contains(out.head_view(), "\r\nConnection: close\r\n\r\n"));
    out = ask(r, get("/hello.txt"), /*allow_keep_alive=*/false);
    EXPECT_FALSE(out.keep_alive);
    EXPECT_TRUE(contains(out.head_view(), "\r\nConnection: close\r\n\r\n"));
    out = ask(r, "GET /hello.txt HTTP/1.0\r\n\r\n");
    EXPECT_FALSE(out.keep_alive);
}

TEST_F(HttpCache, AnswersHeadWithoutABody) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, "HEAD /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(200, out.status);
    EXPECT_TRUE(contains(out.head_view(), "Content-Length: 5\r\n"));
    EXPECT_EQ(BodyKind::None, out.body);
    EXPECT_EQ(0u, out.length);
}

TEST_F(HttpCache, AnswersAnEmptyFileWithoutABody) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/zero.txt"));
    EXPECT_EQ(200, out.status);
    EXPECT_TRUE(contains(out.head_view(), "Content-Length: 0\r\n"));
    EXPECT_EQ(BodyKind::None, out.body);
}

TEST_F(HttpCache, Responds404AndKeepsTheConnection) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/missing"));
    EXPECT_EQ(404, out.status);
    EXPECT_TRUE(out.keep_alive);
    EXPECT_TRUE(contains(out.head_view(), "HTTP/1.1 404 Not Found\r\n"));
    EXPECT_TRUE(contains(body_of(out), "404 Not Found"));
}

TEST_F(HttpCache, Responds403ForASymlinkLeavingTheRoot) {
    TempDir outside;
    outside.write("secret.txt", "secret");
    root_.symlink(outside.at("secret.txt"), "escape");
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/escape"));
    EXPECT_EQ(403, out.status);
    EXPECT_FALSE(contains(body_of(out), "secret"));
}

TEST_F(HttpCache, Responds400AndClosesForATraversal) {
    auto c = cache();
    Responder r(c.get(), {});
    for (const char *t : {"/../etc/passwd", "/%2e%2e/x", "/a%2fb", "/%00", "/%zz"}) {
        SCOPED_TRACE(t);
        Reply out = ask(r, get(t));
        EXPECT_EQ(400, out.status);
        EXPECT_FALSE(out.keep_alive);
    }
}

TEST_F(HttpCache, Redirects301ADirectoryNamedWithoutItsSlash) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/sub"));
    EXPECT_EQ(301, out.status);
    EXPECT_TRUE(out.keep_alive);
    EXPECT_TRUE(contains(out.head_view(), "\r\nLocation: /sub/\r\n")) << out.head_view();
    out = ask(r, get("/sub?a=1&b=2"));
    EXPECT_EQ(301, out.status);
    EXPECT_TRUE(contains(out.head_view(), "\r\nLocation: /sub/?a=1&b=2\r\n")) << out.head_view();
    out = ask(r, "HEAD /sub HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(301, out.status);
    EXPECT_EQ(BodyKind::None, out.body);
}

// The slash goes after the path, so a fragment (which clean_path drops) must
// not end up before it: "/sub#top" -> "/sub/" (or "/sub/#top"), never
// "/sub#top/", which a client resolves to "/sub" again.
TEST_F(HttpCache, RedirectPutsTheSlashAfterThePathNotAfterAFragment) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/sub#top"));
    EXPECT_EQ(301, out.status);
    EXPECT_TRUE(contains(out.head_view(), "\r\nLocation: /sub/")) << out.head_view();
}

TEST_F(HttpCache, Responds403ForADirectoryWithoutAnIndex) {
    auto c = cache();
    Responder r(c.get(), {});
    EXPECT_EQ(403, ask(r, get("/empty/")).status);
}

TEST_F(HttpCache, Responds405WithAllowForOtherHttpMethodsAnd501ForUnknownOnes) {
    auto c = cache();
    Responder r(c.get(), {});
    for (const char *m : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"}) {
        SCOPED_TRACE(m);
        Reply out = ask(r, std::string(m) + " /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        EXPECT_EQ(405, out.status);
        EXPECT_TRUE(contains(out.head_view(), "\r\nAllow: GET, HEAD\r\n"));
    }
    Reply out = ask(r, "BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(501, out.status);
    EXPECT_FALSE(contains(out.head_view(), "Allow:"));
}

TEST_F(HttpCache, Responds304ForAMatchingIfNoneMatch) {
    auto c = cache();
    Responder r(c.get(), {});
    const std::string etag = expected_etag(root_.at("hello.txt"));
    for (const std::string &inm : {etag, "W/" + etag, std::string("*"), "\"other\", " + etag}) {
        SCOPED_TRACE(inm);
        Reply out = ask(r, get("/hello.txt", "If-None-Match: " + inm + "\r\n"));
        EXPECT_EQ(304, out.status);
        EXPECT_EQ(BodyKind::None, out.body);
        EXPECT_TRUE(contains(out.head_view(), "HTTP/1.1 304 Not Modified\r\n"));
        EXPECT_TRUE(contains(out.head_view(), "\r\nETag: " + etag + "\r\n"));
        EXPECT_TRUE(out.keep_alive);
    }
    EXPECT_EQ(200, ask(r, get("/hello.txt", "If-None-Match: \"other\"\r\n")).status);
}

TEST_F(HttpCache, Responds304ForIfModifiedSinceNotBeforeTheFile) {
    auto c = cache();
    Responder r(c.get(), {});
    for (const char *date : {kMtimeText, "Sun, 06 Nov 1994 08:49:38 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                             "Sun Nov  6 08:49:37 1994", "Mon, 01 Jan 2024 00:00:00 GMT"}) {
        SCOPED_TRACE(date);
        EXPECT_EQ(304, ask(r, get("/hello.txt", std::string("If-Modified-Since: ") + date + "\r\n")).status);
    }
    for (const char *date : {"Sun, 06 Nov 1994 08:49:36 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "garbage"}) {
        SCOPED_TRACE(date);
        EXPECT_EQ(200, ask(r, get("/hello.txt", std::string("If-Modified-Since: ") + date + "\r\n")).status);
    }
}

TEST_F(HttpCache, LetsIfNoneMatchWinOverIfModifiedSince) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/hello.txt", "If-None-Match: \"other\"\r\nIf-Modified-Since: " + std::string(kMtimeText) +
                                             "\r\n"));
    EXPECT_EQ(200, out.status);
}

TEST_F(HttpCache, Responds206ForOneRange) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/hello.txt", "Range: bytes=1-3\r\n"));
    ASSERT_EQ(206, out.status);
    EXPECT_TRUE(contains(out.head_view(), "HTTP/1.1 206 Partial Content\r\n"));
    EXPECT_TRUE(contains(out.head_view(), "\r\nContent-Range: bytes 1-3/5\r\n"));
    EXPECT_TRUE(contains(out.head_view(), "\r\nContent-Length: 3\r\n"));
    EXPECT_TRUE(contains(out.head_view(), "\r\nETag: " + expected_etag(root_.at("hello.txt")) + "\r\n"));
    EXPECT_EQ(1u, out.offset);
    EXPECT_EQ(3u, out.length);
    EXPECT_EQ("ell", body_of(out));

    out = ask(r, get("/big.bin", "Range: bytes=-3\r\n"));
    ASSERT_EQ(206, out.status);
    EXPECT_TRUE(contains(out.head_view(), "\r\nContent-Range: bytes 4093-4095/4096\r\n"));
    EXPECT_EQ("lmn", body_of(out)); // byte i is 'a' + i % 26
}

TEST_F(HttpCache, Responds416ForAnUnsatisfiableRange) {
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/hello.txt", "Range: bytes=10-\r\n"));
    EXPECT_EQ(416, out.status);
    EXPECT_TRUE(contains(out.head_view(), "\r\nContent-Range: bytes */5\r\n"));
    EXPECT_TRUE(out.keep_alive);
    EXPECT_EQ(416, ask(r, get("/zero.txt", "Range: bytes=0-\r\n")).status);
}

TEST_F(HttpCache, SendsTheWholeFileForSeveralOrInvalidRanges) {
    auto c = cache();
    Responder r(c.get(), {});
    for (const char *range : {"bytes=0-1,3-4", "bytes=3-1", "lines=1-2"}) {
        SCOPED_TRACE(range);
        Reply out = ask(r, get("/hello.txt", std::string("Range: ") + range + "\r\n"));
        EXPECT_EQ(200, out.status);
        EXPECT_EQ("hello", body_of(out));
    }
}

TEST_F(HttpCache, HonoursIfRangeOnlyForTheCurrentValidator) {
    auto c = cache();
    Responder r(c.get(), {});
    const std::string etag = expected_etag(root_.at("hello.txt"));
    EXPECT_EQ(206, ask(r, get("/hello.txt", "Range: bytes=0-1\r\nIf-Range: " + etag + "\r\n")).status);
    EXPECT_EQ(206,
              ask(r, get("/hello.txt", "Range: bytes=0-1\r\nIf-Range: " + std::string(kMtimeText) + "\r\n")).status);
    EXPECT_EQ(200, ask(r, get("/hello.txt", "Range: bytes=0-1\r\nIf-Range: \"stale\"\r\n")).status);
    EXPECT_EQ(200, ask(r, get("/hello.txt", "Range: bytes=0-1\r\nIf-Range: W/" + etag + "\r\n")).status)
        << "If-Range compares strongly";
}

TEST_F(HttpCache, SendsCachedContentFromMemoryWhenAsked) {
    CacheOptions o;
    o.content_bytes = 1 << 20;
    auto c = cache(o);
    ResponderOptions ro;
    ro.use_content = true;
    Responder r(c.get(), ro);
    Reply out = ask(r, get("/hello.txt"));
    ASSERT_EQ(200, out.status);
    EXPECT_EQ(BodyKind::Memory, out.body);
    EXPECT_EQ("hello", body_of(out));
    out = ask(r, get("/hello.txt", "Range: bytes=2-\r\n"));
    ASSERT_EQ(206, out.status);
    EXPECT_EQ(BodyKind::Memory, out.body);
    EXPECT_EQ("llo", body_of(out));
}

TEST_F(HttpCache, CutsALongServerNameTo64Bytes) {
    auto c = cache();
    ResponderOptions ro;
    ro.server = std::string(100, 's');
    Responder r(c.get(), ro);
    Reply out = ask(r, get("/missing"));
    EXPECT_TRUE(contains(out.head_view(), "\r\nServer: " + std::string(64, 's') + "\r\n"));
    EXPECT_FALSE(contains(out.head_view(), std::string(65, 's')));
}

TEST_F(HttpCache, RefusesToRedirectAnOverlongTargetWith414) {
    root_.mkdir(std::string(200, 'd'));
    auto c = cache();
    Responder r(c.get(), {});
    Reply out = ask(r, get("/" + std::string(200, 'd') + "?" + std::string(600, 'q')));
    EXPECT_EQ(414, out.status);
    EXPECT_LT(out.head_len, sizeof out.head);
}

// ---- error replies ----

TEST(Responder, AnswersEveryParserStatusWithAClosingHtmlPage) {
    Responder r(nullptr, {});
    for (uint16_t s : {400, 408, 413, 414, 431, 501, 503, 505}) {
        SCOPED_TRACE(s);
        Reply out;
        r.error(s, &out);
        EXPECT_EQ(s, out.status);
        EXPECT_FALSE(out.keep_alive);
        const std::string head(out.head_view());
        const std::string status_line = "HTTP/1.1 " + std::to_string(s) + " " + std::string(reason_phrase(s)) + "\r\n";
        EXPECT_EQ(status_line, head.substr(0, status_line.size()));
        EXPECT_TRUE(contains(head, "\r\nContent-Type: text/html; charset=utf-8\r\n"));
        EXPECT_TRUE(contains(head, "\r\nContent-Length: " + std::to_string(out.length) + "\r\n"));
        EXPECT_TRUE(contains(head, "\r\nConnection: close\r\n\r\n"));
        EXPECT_EQ(head.size() - 4, head.find("\r\n\r\n")) << "one blank line, at the end";
        EXPECT_EQ(BodyKind::Memory, out.body);
        EXPECT_TRUE(contains(body_of(out), std::to_string(s) + " " + std::string(reason_phrase(s))));
    }
}

TEST(Responder, AddsAllowTo405AndRetryAfterTo503) {
    Responder r(nullptr, {});
    Reply out;
    r.error(405, &out);
    EXPECT_TRUE(contains(out.head_view(), "\r\nAllow: GET, HEAD\r\n"));
    r.error(503, &out);
    EXPECT_TRUE(contains(out.head_view(), "\r\nRetry-After: 1\r\n"));
    r.error(400, &out);
    EXPECT_FALSE(contains(out.head_view(), "Allow:"));
    EXPECT_FALSE(contains(out.head_view(), "Retry-After:"));
}

TEST(Responder, AnswersAnErrorToHeadWithoutItsBody) {
    Responder r(nullptr, {});
    Reply out;
    r.error(404, &out, /*head_only=*/true);
    EXPECT_EQ(BodyKind::None, out.body);
    EXPECT_EQ(0u, out.length);
    EXPECT_TRUE(contains(out.head_view(), "\r\nContent-Length: "));
    EXPECT_FALSE(contains(out.head_view(), "\r\nContent-Length: 0\r\n")) << "the length the GET body would have";
}

TEST(Responder, NamesAnUnknownStatusUnknown) {
    Responder r(nullptr, {});
    Reply out;
    r.error(599, &out);
    EXPECT_TRUE(contains(out.head_view(), "HTTP/1.1 599 Unknown\r\n"));
}

// A Reply is complete in itself: its body must stay what it was while the
// server builds another reply (pipelining; or, in a weft server, another
// weft thread on the same kernel thread while this one waits in send()).
TEST(Responder, KeepsAnErrorBodyIntactWhileAnotherReplyIsBuilt) {
    Responder r(nullptr, {});
    Reply first, second;
    r.error(404, &first);
    const std::string before = body_of(first);
    ASSERT_TRUE(contains(before, "404 Not Found"));
    r.error(505, &second);
    EXPECT_EQ(before, body_of(first)) << "the first reply's body changed under it";
    EXPECT_TRUE(contains(body_of(second), "505 HTTP Version Not Supported"));
}
