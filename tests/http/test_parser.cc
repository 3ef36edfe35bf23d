// http/parser: the HTTP/1.x request-head parser.
//
// Most tests parse a request three ways -- whole, one byte at a time, and
// split at every position -- because the parser's contract is that the
// result must not depend on how the bytes arrive.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/parser.hpp"

using namespace weft::http;

namespace {

// A Request whose views are copied out of the buffer, so it can be compared
// after the buffer is gone.
struct Parsed {
    ParseResult::Kind kind = ParseResult::NeedMore;
    uint16_t status = 0;
    Method method = Method::Other;
    uint8_t version_minor = 0;
    bool keep_alive = false, has_body = false;
    std::string method_text, target, host, if_modified_since, if_none_match, if_range, range, user_agent, referer;
    uint64_t body_len = 0;
    uint32_t head_len = 0, header_count = 0;
    size_t calls = 0; // parse() calls made

    bool done() const { return kind == ParseResult::Done; }
    bool error(uint16_t s) const { return kind == ParseResult::Error && status == s; }
};

Parsed capture(ParseResult r, const Request &q) {
    Parsed p;
    p.kind = r.kind;
    p.status = r.status;
    if (r.kind == ParseResult::Done) {
        p.method = q.method;
        p.version_minor = q.version_minor;
        p.keep_alive = q.keep_alive;
        p.has_body = q.has_body;
        p.method_text = q.method_text;
        p.target = q.target;
        p.host = q.host;
        p.if_modified_since = q.if_modified_since;
        p.if_none_match = q.if_none_match;
        p.if_range = q.if_range;
        p.range = q.range;
        p.user_agent = q.user_agent;
        p.referer = q.referer;
        p.body_len = q.body_len;
        p.head_len = q.head_len;
        p.header_count = q.header_count;
    }
    return p;
}

bool same(const Parsed &a, const Parsed &b) {
    return a.kind == b.kind && a.status == b.status && a.method == b.method && a.version_minor == b.version_minor &&
           a.keep_alive == b.keep_alive && a.has_body == b.has_body && a.method_text == b.method_text &&
           a.target == b.target && a.host == b.host && a.if_modified_since == b.if_modified_since &&
           a.if_none_match == b.if_none_match && a.if_range == b.if_range && a.range == b.range &&
           a.user_agent == b.user_agent && a.referer == b.referer && a.body_len == b.body_len &&
           a.head_len == b.head_len && a.header_count == b.header_count;
}

std::string describe(const Parsed &p) {
    if (p.kind == ParseResult::NeedMore) return "NeedMore";
    if (p.kind == ParseResult::Error) return "Error " + std::to_string(p.status);
    return "Done target='" + p.target + "' host='" + p.host + "' head_len=" + std::to_string(p.head_len);
}

// The whole buffer in one call.
Parsed parse_whole(std::string_view s, const Limits &lim = Limits{}) {
    Parser parser(lim);
    Request req;
    ParseResult r = parser.parse(s.data(), s.size(), &req);
    Parsed p = capture(r, req);
    p.calls = 1;
    return p;
}

// One byte more per call, each call on an exact-size copy (so a read past
// len would be caught by ASan), until the parser decides.
Parsed parse_bytewise(std::string_view s, const Limits &lim = Limits{}) {
    Parser parser(lim);
    Request req;
    Parsed p;
    for (size_t n = 1; n <= s.size(); ++n) {
        std::unique_ptr<char[]> copy(new char[n]);
        std::memcpy(copy.get(), s.data(), n);
        ParseResult r = parser.parse(copy.get(), n, &req);
        p = capture(r, req);
        p.calls = n;
        if (r.kind != ParseResult::NeedMore) return p;
    }
    return p;
}

// The first `k` bytes, then all of them.
Parsed parse_split(std::string_view s, size_t k, const Limits &lim = Limits{}) {
    Parser parser(lim);
    Request req;
    ParseResult r = parser.parse(s.data(), k, &req);
    if (r.kind != ParseResult::NeedMore) return capture(r, req);
    return capture(parser.parse(s.data(), s.size(), &req), req);
}

// Whole, byte by byte, and split at every position agree; returns the result.
Parsed parse_all_ways(const std::string &s, const Limits &lim = Limits{}) {
    Parsed whole = parse_whole(s, lim);
    Parsed bytewise = parse_bytewise(s, lim);
    EXPECT_TRUE(same(whole, bytewise)) << "whole: " << describe(whole) << ", byte by byte: " << describe(bytewise);
    for (size_t k = 0; k <= s.size(); ++k) {
        Parsed split = parse_split(s, k, lim);
        EXPECT_TRUE(same(whole, split)) << "split at " << k << ": " << describe(split) << " vs " << describe(whole);
        if (!same(whole, split)) break;
    }
    return whole;
}

const std::string kGet = "GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.0\r\n\r\n";

std::string request_with_headers(const std::vector<std::string> &lines, std::string_view start = "GET / HTTP/1.1") {
    std::string s(start);
    s += "\r\n";
    for (const auto &l : lines) s += l + "\r\n";
    return s + "\r\n";
}

} // namespace

// ---- accepted requests ----

TEST(Parser, ParsesASimpleGet) {
    Parsed p = parse_whole(kGet);
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ(Method::Get, p.method);
    EXPECT_EQ("GET", p.method_text);
    EXPECT_EQ("/index.html", p.target);
    EXPECT_EQ("example.com", p.host);
    EXPECT_EQ("curl/8.0", p.user_agent);
    EXPECT_EQ(1, p.version_minor);
    EXPECT_TRUE(p.keep_alive);
    EXPECT_FALSE(p.has_body);
    EXPECT_EQ(0u, p.body_len);
    EXPECT_EQ(kGet.size(), p.head_len);
    EXPECT_EQ(2u, p.header_count);
}

TEST(Parser, ParsesARequestArrivingOneByteAtATime) {
    Parsed whole = parse_whole(kGet);
    Parsed bytewise = parse_bytewise(kGet);
    EXPECT_TRUE(same(whole, bytewise)) << describe(bytewise);
    EXPECT_EQ(kGet.size(), bytewise.calls) << "decided before the last byte arrived";
}

TEST(Parser, GivesTheSameResultWhereverTheBytesAreSplit) {
    const std::string requests[] = {
        kGet,
        "GET /a HTTP/1.0\n\n",
        "\r\n\r\nHEAD /x?y=1 HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\nIf-None-Match: \"a\"\r\n\r\n",
        "GET http://example.com:8080/p?q HTTP/1.1\r\nConnection: close\r\n\r\n",
        "POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
        "GET / HTTP/1.1\r\nHost: h\r\n\rX: y\r\n\r\n", // bare CR after a line end
        "GET / HTTP/1.1\nHost: h\n\r\n",
    };
    for (const auto &r : requests) {
        SCOPED_TRACE(r);
        parse_all_ways(r);
    }
}

TEST(Parser, NeedsMoreUntilTheBlankLine) {
    Parser parser;
    Request req;
    const std::string s = "GET / HTTP/1.1\r\nHost: h\r\n";
    EXPECT_EQ(ParseResult::NeedMore, parser.parse(s.data(), s.size(), &req).kind);
    const std::string s2 = s + "\r";
    EXPECT_EQ(ParseResult::NeedMore, parser.parse(s2.data(), s2.size(), &req).kind);
    const std::string s3 = s2 + "\n";
    EXPECT_EQ(ParseResult::Done, parser.parse(s3.data(), s3.size(), &req).kind);
    EXPECT_EQ(s3.size(), req.head_len);
    EXPECT_EQ(ParseResult::NeedMore, parser.parse("", 0, &req).kind);
}

TEST(Parser, AcceptsBareLfLineEnds) {
    Parsed p = parse_all_ways("GET /lf HTTP/1.1\nHost: h\nUser-Agent: ua\n\n");
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ("/lf", p.target);
    EXPECT_EQ("h", p.host);
    EXPECT_EQ("ua", p.user_agent);
}

TEST(Parser, AcceptsMixedCrlfAndLfLineEnds) {
    const std::string s = "GET /mixed HTTP/1.1\nHost: h\r\nReferer: r\n\r\n";
    Parsed p = parse_all_ways(s);
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ("h", p.host);
    EXPECT_EQ("r", p.referer);
    EXPECT_EQ(s.size(), p.head_len);
}

TEST(Parser, SkipsLeadingEmptyLinesAndCountsThemInHeadLen) {
    const std::string s = "\r\n\n\r\n" + kGet;
    Parsed p = parse_all_ways(s);
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ("/index.html", p.target);
    EXPECT_EQ(s.size(), p.head_len);
}

TEST(Parser, WaitsOnEmptyLinesAloneAndRefusesAFloodOfThem) {
    Limits lim;
    lim.head_bytes = 64;
    std::string blank;
    for (int i = 0; i < 32; ++i) blank += "\r\n"; // exactly 64 bytes
    EXPECT_EQ(ParseResult::NeedMore, parse_whole(blank, lim).kind);
    // Leading empty lines count against the head's size (431), as they do
    // when a request follows them.
    EXPECT_TRUE(parse_whole(blank + "\n", lim).error(431));
}

// A flood of leading empty lines longer than head_bytes followed by a
// request: piecewise the parser refuses it (400) as soon as the empty lines
// pass the limit; whole, it accepts it. The outcome must not depend on how
// the bytes arrive.
TEST(Parser, JudgesLeadingEmptyLinesTheSameWholeOrPiecewise) {
    Limits lim;
    lim.head_bytes = 64;
    std::string s;
    for (int i = 0; i < 40; ++i) s += "\r\n"; // 80 bytes of empty lines
    s += "GET / HTTP/1.0\r\n\r\n";
    Parsed whole = parse_whole(s, lim), bytewise = parse_bytewise(s, lim);
    EXPECT_TRUE(same(whole, bytewise)) << "whole: " << describe(whole) << ", byte by byte: " << describe(bytewise);
}

TEST(Parser, StepsThroughPipelinedRequestsByHeadLen) {
    const std::string a = "GET /one HTTP/1.1\r\nHost: h\r\n\r\n";
    const std::string b = "HEAD /two HTTP/1.1\nHost: h\n\n";
    const std::string c = "\r\nGET /three HTTP/1.0\r\n\r\n";
    const std::string all = a + b + c;
    Parser parser;
    Request req;
    size_t off = 0;
    std::vector<std::string> targets;
    while (off < all.size()) {
        ParseResult r = parser.parse(all.data() + off, all.size() - off, &req);
        ASSERT_EQ(ParseResult::Done, r.kind) << "at offset " << off;
        targets.emplace_back(req.target);
        off += req.head_len;
    }
    EXPECT_EQ(all.size(), off);
    EXPECT_EQ((std::vector<std::string>{"/one", "/two", "/three"}), targets);
    EXPECT_EQ(ParseResult::NeedMore, parser.parse(all.data() + off, 0, &req).kind);
}

TEST(Parser, MeasuresABodyWithoutWaitingForItSoPipeliningSkipsIt) {
    const std::string a = "POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
    const std::string body = "hello world";
    const std::string b = "GET /next HTTP/1.1\r\nHost: h\r\n\r\n";
    const std::string all = a + body + b;
    Parser parser;
    Request req;
    ASSERT_EQ(ParseResult::Done, parser.parse(all.data(), a.size(), &req).kind) << "waits for no body byte";
    EXPECT_EQ(Method::Post, req.method);
    EXPECT_TRUE(req.has_body);
    EXPECT_EQ(11u, req.body_len);
    EXPECT_EQ(a.size(), req.head_len);
    size_t off = req.head_len + req.body_len;
    ASSERT_EQ(ParseResult::Done, parser.parse(all.data() + off, all.size() - off, &req).kind);
    EXPECT_EQ("/next", req.target);
    EXPECT_EQ(b.size(), req.head_len);
}

TEST(Parser, IsReadyForTheNextRequestAfterAnErrorAndAfterReset) {
    Parser parser;
    Request req;
    const std::string bad = "GET / HTTP/1.1\r\n\r\n"; // no Host
    EXPECT_EQ(ParseResult::Error, parser.parse(bad.data(), bad.size(), &req).kind);
    const std::string partial = "GET /abandoned HTTP/1.1\r\nHost: h\r\n";
    EXPECT_EQ(ParseResult::NeedMore, parser.parse(partial.data(), partial.size(), &req).kind);
    parser.reset();
    const std::string next = "GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    ASSERT_EQ(ParseResult::Done, parser.parse(next.data(), next.size(), &req).kind);
    EXPECT_EQ("/b", req.target);
}

TEST(Parser, ReducesAnAbsoluteFormTargetToItsPathAndHost) {
    Parsed p = parse_all_ways("GET http://example.com:8080/a/b?x=1 HTTP/1.1\r\n\r\n");
    ASSERT_TRUE(p.done()) << describe(p) << " (absolute form needs no Host header)";
    EXPECT_EQ("/a/b?x=1", p.target);
    EXPECT_EQ("example.com:8080", p.host);

    p = parse_whole("GET HTTPS://Example.com HTTP/1.1\r\n\r\n");
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ("/", p.target) << "no path is the root";
    EXPECT_EQ("Example.com", p.host);
}

TEST(Parser, LetsTheAbsoluteFormAuthorityOverrideTheHostHeader) {
    Parsed p = parse_whole("GET http://real.example/x HTTP/1.1\r\nHost: other.example\r\n\r\n");
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ("real.example", p.host);
    EXPECT_EQ("/x", p.target);
}

TEST(Parser, RefusesMalformedAbsoluteFormTargets) {
    for (const char *target : {"ftp://h/x", "http:///x", "http://h?q", "example.com/x", "http:/h/x", "*"}) {
        SCOPED_TRACE(target);
        Parsed p = parse_whole(std::string("GET ") + target + " HTTP/1.1\r\nHost: h\r\n\r\n");
        EXPECT_TRUE(p.error(400)) << describe(p);
    }
}

TEST(Parser, AcceptsTheAsteriskFormOnlyForOptions) {
    Parsed p = parse_whole("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ(Method::Options, p.method);
    EXPECT_EQ("*", p.target);
}

// ---- keep-alive ----

TEST(Parser, KeepsHttp11AliveAndClosesHttp10ByDefault) {
    Parsed p11 = parse_whole("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_TRUE(p11.done());
    EXPECT_TRUE(p11.keep_alive);
    Parsed p10 = parse_whole("GET / HTTP/1.0\r\n\r\n");
    ASSERT_TRUE(p10.done()) << describe(p10) << " (HTTP/1.0 needs no Host)";
    EXPECT_EQ(0, p10.version_minor);
    EXPECT_FALSE(p10.keep_alive);
}

TEST(Parser, KeepsHttp10AliveWhenAsked) {
    Parsed p = parse_whole("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    ASSERT_TRUE(p.done());
    EXPECT_TRUE(p.keep_alive);
    p = parse_whole("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    ASSERT_TRUE(p.done());
    EXPECT_TRUE(p.keep_alive) << "tokens are case-insensitive";
    p = parse_whole("GET / HTTP/1.0\r\nConnection: close\r\n\r\n");
    ASSERT_TRUE(p.done());
    EXPECT_FALSE(p.keep_alive);
}

TEST(Parser, ClosesHttp11OnTheCloseTokenInAnyCaseOrListPosition) {
    struct Case {
        const char *value;
        bool keep_alive;
    } cases[] = {
        {"close", false},          {"Close", false},        {"CLOSE", false},
        {"upgrade, close", false}, {"close,upgrade", false}, {" te ,\tclose\t, foo ", false},
        {"keep-alive", true},      {"closed", true},        {"upgrade", true},
        {"", true},                {"clo se", true},        {"x-close", true},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.value);
        Parsed p = parse_whole(request_with_headers({"Host: h", std::string("Connection: ") + c.value}));
        ASSERT_TRUE(p.done()) << describe(p);
        EXPECT_EQ(c.keep_alive, p.keep_alive);
    }
}

TEST(Parser, KeepsHttp10AliveOnTheKeepAliveTokenInAList) {
    Parsed p = parse_whole("GET / HTTP/1.0\r\nConnection: foo, KEEP-ALIVE\r\n\r\n");
    ASSERT_TRUE(p.done());
    EXPECT_TRUE(p.keep_alive);
}

TEST(Parser, TreatsMinorVersionsAbove1AsHttp11) {
    Parsed p = parse_whole("GET / HTTP/1.2\r\nHost: h\r\n\r\n");
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ(2, p.version_minor);
    EXPECT_TRUE(p.keep_alive);
    EXPECT_TRUE(parse_whole("GET / HTTP/1.9\r\n\r\n").error(400)) << "Host is required as for 1.1";
}

// RFC 9110 §5.3 / §7.6.1: Connection is a list; several field lines are one
// list, so "close" on any of them closes the connection.
TEST(Parser, TreatsSeveralConnectionLinesAsOneList) {
    Parsed p = parse_whole(request_with_headers({"Host: h", "Connection: keep-alive", "Connection: close"}));
    ASSERT_TRUE(p.done());
    EXPECT_FALSE(p.keep_alive);
    p = parse_whole(request_with_headers({"Host: h", "Connection: close", "Connection: keep-alive"}));
    ASSERT_TRUE(p.done());
    EXPECT_FALSE(p.keep_alive) << "'close' on the first Connection line was forgotten";
}

// ---- header fields ----

TEST(Parser, TrimsBlanksAroundHeaderValues) {
    Parsed p = parse_whole(request_with_headers({
        "Host: \t example.com \t",
        "Range:bytes=0-1",
        "If-None-Match:   \"abc\"  ",
        "If-Modified-Since: \tSun, 06 Nov 1994 08:49:37 GMT",
        "If-Range: \"abc\"\t",
        "User-Agent:  a b  c ",
        "Referer: http://r/ ",
    }));
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ("example.com", p.host);
    EXPECT_EQ("bytes=0-1", p.range);
    EXPECT_EQ("\"abc\"", p.if_none_match);
    EXPECT_EQ("Sun, 06 Nov 1994 08:49:37 GMT", p.if_modified_since);
    EXPECT_EQ("\"abc\"", p.if_range);
    EXPECT_EQ("a b  c", p.user_agent) << "inner blanks stay";
    EXPECT_EQ("http://r/", p.referer);
    EXPECT_EQ(7u, p.header_count);
}

TEST(Parser, MatchesHeaderNamesCaseInsensitively) {
    Parsed p = parse_whole(request_with_headers({"hOST: h", "RANGE: bytes=1-", "content-LENGTH: 3", "USER-agent: u"}));
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ("h", p.host);
    EXPECT_EQ("bytes=1-", p.range);
    EXPECT_EQ(3u, p.body_len);
    EXPECT_EQ("u", p.user_agent);
}

TEST(Parser, AcceptsEmptyValuesTabsAndUnknownHeaders) {
    Parsed p = parse_whole(request_with_headers({"Host: h", "X-Empty:", "X-Tab: a\tb", "Accept: */*"}));
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ(4u, p.header_count);
}

TEST(Parser, AcceptsRepeatedEqualContentLengths) {
    Parsed p = parse_whole(request_with_headers({"Host: h", "Content-Length: 7", "Content-Length: 7"}));
    ASSERT_TRUE(p.done()) << describe(p);
    EXPECT_EQ(7u, p.body_len);
    p = parse_whole(request_with_headers({"Host: h", "Content-Length: 0"}));
    ASSERT_TRUE(p.done());
    EXPECT_FALSE(p.has_body);
}

// ---- methods ----

TEST(Parser, RecognisesTheMethodsHttpDefinesCaseSensitively) {
    struct Case {
        const char *text;
        Method m;
    } cases[] = {
        {"GET", Method::Get},         {"HEAD", Method::Head},       {"POST", Method::Post},
        {"PUT", Method::Put},         {"DELETE", Method::Delete},   {"OPTIONS", Method::Options},
        {"PATCH", Method::Patch},     {"TRACE", Method::Trace},     {"CONNECT", Method::Connect},
        {"get", Method::Other},       {"BREW", Method::Other},      {"GETS", Method::Other},
        {"M-SEARCH", Method::Other},  {"X!#$%&'*+.^_`|~", Method::Other},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.text);
        Parsed p = parse_whole(std::string(c.text) + " / HTTP/1.1\r\nHost: h\r\n\r\n");
        ASSERT_TRUE(p.done()) << describe(p);
        EXPECT_EQ(c.m, p.method);
        EXPECT_EQ(c.text, p.method_text);
    }
}

TEST(Parser, NamesMethods) {
    EXPECT_EQ("GET", method_name(Method::Get));
    EXPECT_EQ("CONNECT", method_name(Method::Connect));
    EXPECT_EQ("OTHER", method_name(Method::Other));
}

// ---- 400 ----

TEST(Parser, RefusesMalformedRequestLinesWith400) {
    const char *lines[] = {
        "GET /",                 // no version
        "GET",                   // nothing but a method
        "GET  / HTTP/1.1",       // two spaces
        " GET / HTTP/1.1",       // leading space
        "GET / HTTP/1.1 ",       // trailing space
        "GET / http/1.1",        // version case
        "GET / HTTP/1.x",        // version digit
        "GET / HTTP/11",         // no dot
        "GET / HTTP/1.10",       // too long
        "GET / HTTP/1",          // too short
        "GE(T / HTTP/1.1",       // not a token
        "GE\x01T / HTTP/1.1",    // control in the method
        "GET /a\x7f HTTP/1.1",   // DEL in the target
        "GET /a\x01 HTTP/1.1",   // control in the target
        "GET /a\tb HTTP/1.1",    // tab in the target
        "GET\t/ HTTP/1.1",       // tab as the separator
        "GET relative HTTP/1.1", // not origin-form
    };
    for (const char *l : lines) {
        SCOPED_TRACE(l);
        Parsed p = parse_whole(std::string(l) + "\r\nHost: h\r\n\r\n");
        EXPECT_TRUE(p.error(400)) << describe(p);
    }
}

TEST(Parser, RefusesHttp11WithoutHostWith400) {
    EXPECT_TRUE(parse_all_ways("GET / HTTP/1.1\r\n\r\n").error(400));
    EXPECT_TRUE(parse_whole("GET / HTTP/1.1\r\nUser-Agent: x\r\n\r\n").error(400));
}

TEST(Parser, RefusesTwoHostHeadersWith400) {
    EXPECT_TRUE(parse_whole(request_with_headers({"Host: a", "Host: a"})).error(400));
}

TEST(Parser, RefusesMalformedContentLengthWith400) {
    for (const char *v : {"abc", "-1", "+5", "1 2", "0x10", "1,1", "", "1.0", "1234567890123456789"}) {
        SCOPED_TRACE(v);
        Parsed p = parse_whole(request_with_headers({"Host: h", std::string("Content-Length: ") + v}));
        EXPECT_TRUE(p.error(400)) << describe(p);
    }
}

TEST(Parser, RefusesTwoDifferentContentLengthsWith400) {
    EXPECT_TRUE(parse_whole(request_with_headers({"Host: h", "Content-Length: 1", "Content-Length: 2"})).error(400));
}

TEST(Parser, RefusesObsoleteLineFoldingWith400) {
    EXPECT_TRUE(parse_all_ways("GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n").error(400));
    EXPECT_TRUE(parse_whole("GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n\ttwo\r\n\r\n").error(400));
    EXPECT_TRUE(parse_whole("GET / HTTP/1.1\r\n Host: h\r\n\r\n").error(400)) << "a fold of the request line";
}

TEST(Parser, RefusesABlankBeforeTheColonWith400) {
    EXPECT_TRUE(parse_whole("GET / HTTP/1.1\r\nHost : h\r\n\r\n").error(400));
    EXPECT_TRUE(parse_whole("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n").error(400));
}

TEST(Parser, RefusesHeaderLinesWithoutANameOrColonWith400) {
    EXPECT_TRUE(parse_whole("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n").error(400));
    EXPECT_TRUE(parse_whole("GET / HTTP/1.1\r\nHost: h\r\n: value\r\n\r\n").error(400));
    EXPECT_TRUE(parse_whole("GET / HTTP/1.1\r\nHost: h\r\nX(y): z\r\n\r\n").error(400));
}

TEST(Parser, RefusesABareCrWith400) {
    const char *heads[] = {
        "GET /\r HTTP/1.1\r\nHost: h\r\n\r\n",  // in the request line
        "GET / HTTP/1.1\r\r\nHost: h\r\n\r\n",  // doubled before the LF
        "GET / HTTP/1.1\r\nHost: h\rx\r\n\r\n", // in a value
        "GET / HTTP/1.1\r\nHo\rst: h\r\n\r\n",  // in a name
        "GET / HTTP/1.1\r\nHost: h\r\n\r\r\n\r\n", // in what would be the blank line
        "GET / HTTP/1.1\nHost: h\n\r\rX: y\n\n",
    };
    for (const char *h : heads) {
        SCOPED_TRACE(::testing::PrintToString(std::string(h)));
        EXPECT_TRUE(parse_all_ways(h).error(400));
    }
}

TEST(Parser, RefusesControlCharactersInValuesWith400) {
    for (std::string v : {std::string("a\x01" "b"), std::string("a\x7f"), std::string("a\0b", 3), std::string("\x1b[0m")}) {
        SCOPED_TRACE(::testing::PrintToString(v));
        Parsed p = parse_whole(request_with_headers({"Host: h", "X-Ctl: " + v}));
        EXPECT_TRUE(p.error(400)) << describe(p);
    }
    static constexpr char kNulInHost[] = "GET / HTTP/1.1\r\nHost: h\0\r\n\r\n";
    EXPECT_TRUE(parse_whole(std::string(kNulInHost, sizeof kNulInHost - 1)).error(400));
}

// ---- limits ----

TEST(Parser, RefusesALongRequestLineWith414) {
    const std::string target = "/" + std::string(9000, 'a');
    Parsed p = parse_all_ways("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_TRUE(p.error(414)) << describe(p);
}

TEST(Parser, AcceptsARequestLineAtTheLimit) {
    Limits lim;
    lim.request_line = 64;
    const std::string line = "GET /" + std::string(64 - 4 - 1 - 9, 'a') + " HTTP/1.1";
    ASSERT_EQ(64u, line.size());
    Parsed p = parse_all_ways(line + "\r\nHost: h\r\n\r\n", lim);
    EXPECT_TRUE(p.done()) << describe(p);
    p = parse_all_ways(line + "\nHost: h\n\n", lim);
    EXPECT_TRUE(p.done()) << describe(p);
    const std::string longer = "GET /" + std::string(64 - 4 - 9, 'a') + " HTTP/1.1";
    p = parse_all_ways(longer + "\r\nHost: h\r\n\r\n", lim);
    EXPECT_TRUE(p.error(414)) << describe(p);
}

TEST(Parser, Refuses20KiBWithoutANewlineWith414BeforeTheHeadCompletes) {
    std::string s = "GET /" + std::string(20 * 1024, 'a');
    Parsed whole = parse_whole(s);
    EXPECT_TRUE(whole.error(414)) << describe(whole);
    // Piecewise: decided as soon as the line passes the limit, not at the end.
    Parser parser;
    Request req;
    size_t decided = 0;
    for (size_t n = 1024; n <= s.size(); n += 1024) {
        ParseResult r = parser.parse(s.data(), n, &req);
        if (r.kind != ParseResult::NeedMore) {
            EXPECT_EQ(ParseResult::Error, r.kind);
            EXPECT_EQ(414, r.status);
            decided = n;
            break;
        }
    }
    EXPECT_GT(decided, 0u);
    EXPECT_LE(decided, 9u * 1024) << "buffered well past the request-line limit";
}

// A request line of 17 KiB is longer than both the request-line limit and
// the head limit. Arriving in pieces it gets 414 (the line is judged first);
// arriving whole it must get the same status.
TEST(Parser, GivesALongRequestLineTheSameStatusWholeOrPiecewise) {
    const std::string s = "GET /" + std::string(17 * 1024, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n";
    Parsed bytewise = parse_split(s, 9000);
    EXPECT_TRUE(bytewise.error(414)) << describe(bytewise);
    Parsed whole = parse_whole(s);
    EXPECT_TRUE(whole.error(414)) << describe(whole);
}

TEST(Parser, RefusesMoreThanTheHeaderCountWith431) {
    std::vector<std::string> lines{"Host: h"};
    for (int i = 1; i < 100; ++i) lines.push_back("X-" + std::to_string(i) + ": v");
    Parsed p = parse_whole(request_with_headers(lines));
    EXPECT_TRUE(p.done()) << describe(p) << " (100 header lines are allowed)";
    EXPECT_EQ(100u, p.header_count);
    lines.push_back("X-101: v");
    p = parse_whole(request_with_headers(lines));
    EXPECT_TRUE(p.error(431)) << describe(p);

    Limits lim;
    lim.headers = 3;
    EXPECT_TRUE(parse_all_ways(request_with_headers({"Host: h", "A: 1", "B: 2", "C: 3"}), lim).error(431));
    EXPECT_TRUE(parse_whole(request_with_headers({"Host: h", "A: 1", "B: 2"}), lim).done());
}

TEST(Parser, RefusesALongHeadWith431) {
    std::vector<std::string> lines{"Host: h"};
    for (int i = 0; i < 20; ++i) lines.push_back("X-Big-" + std::to_string(i) + ": " + std::string(1000, 'v'));
    const std::string s = request_with_headers(lines);
    ASSERT_GT(s.size(), 16384u);
    EXPECT_TRUE(parse_whole(s).error(431));
    EXPECT_TRUE(parse_split(s, s.size() / 2).error(431));
}

TEST(Parser, Refuses431OnPartialInputBeforeTheHeadCompletes) {
    std::string s = "GET / HTTP/1.1\r\nHost: h\r\n";
    while (s.size() < 40 * 1024) s += "X-Filler: " + std::string(500, 'f') + "\r\n";
    Parser parser;
    Request req;
    size_t decided = 0;
    for (size_t n = 512; n <= s.size(); n += 512) {
        ParseResult r = parser.parse(s.data(), n, &req);
        if (r.kind != ParseResult::NeedMore) {
            EXPECT_EQ(ParseResult::Error, r.kind);
            EXPECT_EQ(431, r.status);
            decided = n;
            break;
        }
    }
    EXPECT_GT(decided, 16384u);
    EXPECT_LE(decided, 16384u + 512) << "buffered past the head limit";
}

TEST(Parser, AcceptsAHeadOfExactlyHeadBytes) {
    Limits lim;
    lim.head_bytes = 64;
    std::string s = "GET / HTTP/1.1\r\nHost: h\r\nX: ";
    s += std::string(64 - s.size() - 4, 'x') + "\r\n\r\n";
    ASSERT_EQ(64u, s.size());
    EXPECT_TRUE(parse_all_ways(s, lim).done());
    s.insert(s.size() - 4, "x");
    EXPECT_TRUE(parse_all_ways(s, lim).error(431));
}

TEST(Parser, RefusesALargeBodyWith413) {
    Parsed p = parse_whole(request_with_headers({"Host: h", "Content-Length: 1048576"}, "POST / HTTP/1.1"));
    ASSERT_TRUE(p.done()) << describe(p) << " (1 MiB is the limit)";
    EXPECT_TRUE(p.has_body);
    EXPECT_TRUE(parse_whole(request_with_headers({"Host: h", "Content-Length: 1048577"}, "POST / HTTP/1.1")).error(413));
    EXPECT_TRUE(
        parse_whole(request_with_headers({"Host: h", "Content-Length: 999999999999999999"}, "PUT / HTTP/1.1")).error(413));
}

TEST(Parser, RefusesTransferEncodingWith501) {
    EXPECT_TRUE(parse_all_ways(request_with_headers({"Host: h", "Transfer-Encoding: chunked"}, "POST / HTTP/1.1")).error(501));
    EXPECT_TRUE(parse_whole(request_with_headers({"Host: h", "transfer-encoding: identity"})).error(501));
    EXPECT_TRUE(
        parse_whole(request_with_headers({"Host: h", "Content-Length: 5", "Transfer-Encoding: chunked"})).error(501));
}

TEST(Parser, RefusesVersionsOtherThanHttp1With505) {
    for (const char *v : {"HTTP/2.0", "HTTP/0.9", "HTTP/3.0", "HTTP/9.9"}) {
        SCOPED_TRACE(v);
        Parsed p = parse_whole(std::string("GET / ") + v + "\r\nHost: h\r\n\r\n");
        EXPECT_TRUE(p.error(505)) << describe(p);
    }
}

// ---- helpers ----

TEST(Parser, ComparesAsciiCaseInsensitively) {
    EXPECT_TRUE(iequals("Content-Length", "content-LENGTH"));
    EXPECT_TRUE(iequals("", ""));
    EXPECT_FALSE(iequals("host", "hosts"));
    EXPECT_FALSE(iequals("a", "b"));
    EXPECT_FALSE(iequals("[", "{")) << "only letters fold";
}

TEST(Parser, FindsTokensInCommaSeparatedLists) {
    EXPECT_TRUE(has_token("close", "close"));
    EXPECT_TRUE(has_token("a, CLOSE ,b", "close"));
    EXPECT_TRUE(has_token(",,close,", "close"));
    EXPECT_FALSE(has_token("", "close"));
    EXPECT_FALSE(has_token("closed, xclose", "close"));
}
