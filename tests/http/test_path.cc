// http/path: a request target to a clean path below the document root.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "http/path.hpp"

using namespace weft::http;

namespace {

struct Cleaned {
    int status = -1;
    std::string path;
    bool dir_form = false;
};

Cleaned clean(const std::string &target) {
    auto out = std::make_unique<CleanPath>(); // 4 KiB: keep it off the test's stack
    Cleaned c;
    c.status = clean_path(target, out.get());
    if (c.status == 0) {
        c.path.assign(out->view());
        c.dir_form = out->dir_form;
    }
    return c;
}

} // namespace

TEST(CleanPath, NormalisesDotAndEmptySegmentsAndParents) {
    Cleaned c = clean("/a/./b//c/../d");
    ASSERT_EQ(0, c.status);
    EXPECT_EQ("a/b/d", c.path);
    EXPECT_FALSE(c.dir_form);
}

TEST(CleanPath, MapsTheRootToTheEmptyPathInDirForm) {
    for (const char *t : {"/", "//", "/.", "/./", "/a/..", "/a/b/../../", "/?x", "/#top"}) {
        SCOPED_TRACE(t);
        Cleaned c = clean(t);
        ASSERT_EQ(0, c.status);
        EXPECT_EQ("", c.path);
        EXPECT_TRUE(c.dir_form);
    }
}

TEST(CleanPath, MarksATrailingSlashOrDotSegmentAsDirForm) {
    struct Case {
        const char *target, *path;
        bool dir_form;
    } cases[] = {
        {"/docs/", "docs", true},      {"/docs", "docs", false},    {"/docs/.", "docs", true},
        {"/docs/x/..", "docs", true},  {"/docs//", "docs", true},   {"/a/b/c.txt", "a/b/c.txt", false},
        {"/docs/?q=1", "docs", true},  {"/a/%2e", "a", true},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.target);
        Cleaned r = clean(c.target);
        ASSERT_EQ(0, r.status);
        EXPECT_EQ(c.path, r.path);
        EXPECT_EQ(c.dir_form, r.dir_form);
    }
}

TEST(CleanPath, DropsTheQueryAndTheFragment) {
    EXPECT_EQ("a/b", clean("/a/b?x=1&y=/../../etc").path);
    EXPECT_EQ("a/b", clean("/a/b#frag/../..").path);
    EXPECT_EQ("a", clean("/a?q#f").path);
    EXPECT_EQ("a", clean("/a#f?q").path);
    EXPECT_EQ(0, clean("/a?%zz").status) << "the query is not decoded";
}

TEST(CleanPath, DecodesEscapesOnce) {
    EXPECT_EQ("a b/c", clean("/a%20b/%63").path);
    EXPECT_EQ("caf\xc3\xa9", clean("/caf%C3%A9").path);
    EXPECT_EQ("x%y", clean("/x%25y").path);
    Cleaned c = clean("/%252e%252e/x");
    ASSERT_EQ(0, c.status);
    EXPECT_EQ("%2e%2e/x", c.path) << "a literal name, not a parent";
    c = clean("/a/%252e%252e");
    ASSERT_EQ(0, c.status);
    EXPECT_EQ("a/%2e%2e", c.path);
    EXPECT_FALSE(c.dir_form);
}

TEST(CleanPath, TreatsEncodedDotsAsDots) {
    EXPECT_EQ("a/c", clean("/a/b/%2e%2e/c").path);
    EXPECT_EQ("a/c", clean("/a/b/%2E./c").path);
    EXPECT_EQ("a/b", clean("/a/%2e/b").path);
}

TEST(CleanPath, KeepsNamesThatOnlyLookLikeDots) {
    EXPECT_EQ("a/.../b", clean("/a/.../b").path);
    EXPECT_EQ("a/..b", clean("/a/..b").path);
    EXPECT_EQ("a/.hidden", clean("/a/.hidden").path);
    EXPECT_EQ("b..", clean("/b..").path);
}

TEST(CleanPath, RefusesEveryAttemptToClimbAboveTheRootWith400) {
    for (const char *t : {"/..", "/../", "/../etc/passwd", "/a/../..", "/a/../../b", "/./..", "/a/b/../../../c",
                          "/%2e%2e", "/%2e%2e/", "/%2E%2e/", "/%2e./x", "/.%2E", "/a/%2e%2e/%2e%2e/etc/passwd",
                          "//..", "/a//../.."}) {
        SCOPED_TRACE(t);
        EXPECT_EQ(400, clean(t).status);
    }
}

TEST(CleanPath, RefusesAnEncodedSlashWith400) {
    for (const char *t : {"/%2f", "/%2F", "/a%2fb", "/..%2f..%2fetc/passwd", "/%2e%2e%2f"}) {
        SCOPED_TRACE(t);
        EXPECT_EQ(400, clean(t).status);
    }
}

TEST(CleanPath, RefusesAnEncodedNulWith400) {
    EXPECT_EQ(400, clean("/%00").status);
    EXPECT_EQ(400, clean("/index.html%00.txt").status);
}

TEST(CleanPath, RefusesMalformedEscapesWith400) {
    for (const char *t : {"/%", "/%4", "/%zz", "/%4g", "/%g4", "/a%", "/a%2", "/%%41", "/% 41"}) {
        SCOPED_TRACE(t);
        EXPECT_EQ(400, clean(t).status);
    }
}

TEST(CleanPath, RefusesTargetsThatAreNotAbsolutePathsWith400) {
    for (const char *t : {"", "a/b", "*", "?x", "http://h/x"}) {
        SCOPED_TRACE(t);
        EXPECT_EQ(400, clean(t).status);
    }
}

TEST(CleanPath, RefusesAPathLongerThanPathMaxWith414) {
    EXPECT_EQ(414, clean("/" + std::string(CleanPath::kMax, 'a')).status);
    EXPECT_EQ(414, clean("/" + std::string(5000, 'a')).status);
    std::string many;
    while (many.size() <= CleanPath::kMax) many += "/ab";
    EXPECT_EQ(414, clean(many).status);
}

TEST(CleanPath, AcceptsAPathAtPathMax) {
    Cleaned c = clean("/" + std::string(CleanPath::kMax - 1, 'a'));
    ASSERT_EQ(0, c.status);
    EXPECT_EQ(CleanPath::kMax - 1, c.path.size());
    c = clean("/" + std::string(CleanPath::kMax - 2, 'a') + "/");
    ASSERT_EQ(0, c.status);
    EXPECT_TRUE(c.dir_form);
}

TEST(CleanPath, DoesNotCountTheQueryAgainstTheLengthLimit) {
    Cleaned c = clean("/a?" + std::string(10000, 'q'));
    EXPECT_EQ(0, c.status) << "a long query is not a long path";
    EXPECT_EQ("a", c.path);
}
