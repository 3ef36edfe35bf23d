// The small value parsers of http/: dates, media types, byte ranges,
// entity-tag lists.
#include <gtest/gtest.h>

#include <cstdint>
#include <ctime>
#include <string>

#include "http/date.hpp"
#include "http/mime.hpp"
#include "http/response.hpp"

using namespace weft::http;

namespace {

constexpr time_t kRfcExample = 784111777; // Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110 §5.6.7)

std::string format(time_t t) {
    char buf[kHttpDateLen];
    format_http_date(t, buf);
    return std::string(buf, kHttpDateLen);
}

} // namespace

// ---- dates ----

TEST(HttpDate, FormatsAnImfFixdate) {
    EXPECT_EQ("Sun, 06 Nov 1994 08:49:37 GMT", format(kRfcExample));
    EXPECT_EQ("Thu, 01 Jan 1970 00:00:00 GMT", format(0));
    EXPECT_EQ("Sat, 29 Feb 2020 23:59:59 GMT", format(1583020799));
    EXPECT_EQ("Tue, 19 Jan 2038 03:14:08 GMT", format(2147483648LL));
}

TEST(HttpDate, ParsesTheThreeFormatsOfRfc9110) {
    EXPECT_EQ(kRfcExample, parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"));  // IMF-fixdate
    EXPECT_EQ(kRfcExample, parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT")); // RFC 850
    EXPECT_EQ(kRfcExample, parse_http_date("Sun Nov  6 08:49:37 1994"));       // asctime
}

TEST(HttpDate, ParsesTwoDigitDaysInAsctime) {
    EXPECT_EQ(kRfcExample + 10 * 86400, parse_http_date("Wed Nov 16 08:49:37 1994"));
}

TEST(HttpDate, ReadsRfc850TwoDigitYearsInTheirCentury) {
    EXPECT_EQ(parse_http_date("Thu, 01 Jan 2004 00:00:00 GMT"), parse_http_date("Thursday, 01-Jan-04 00:00:00 GMT"));
    EXPECT_EQ(parse_http_date("Fri, 01 Jan 1999 00:00:00 GMT"), parse_http_date("Friday, 01-Jan-99 00:00:00 GMT"));
}

TEST(HttpDate, RoundTripsFormatAndParse) {
    for (time_t t : {time_t(0), time_t(1), kRfcExample, time_t(951782400) /* 2000-02-29 */, time_t(1700000000),
                     time_t(2147483647), time_t(4102444799) /* 2099-12-31 23:59:59 */, time(nullptr)}) {
        SCOPED_TRACE(t);
        EXPECT_EQ(t, parse_http_date(format(t)));
    }
    for (time_t t = 0; t < 4102444800; t += 86400 * 37 + 3671) EXPECT_EQ(t, parse_http_date(format(t))) << t;
}

TEST(HttpDate, RefusesGarbageWithMinusOne) {
    for (const char *s : {
             "",
             "yesterday",
             "Sun, 06 Nov 1994 08:49:37 UTC",      // not GMT
             "Sun, 06 Nov 1994 08:49:37 GMT ",     // trailing blank
             "Sun, 06 Nov 1994 08:49 GMT",         // short
             "Sun, 32 Nov 1994 08:49:37 GMT",      // day
             "Sun, 00 Nov 1994 08:49:37 GMT",      // day
             "Sun, 06 Foo 1994 08:49:37 GMT",      // month
             "Sun, 06 nov 1994 08:49:37 GMT",      // month case
             "Sun, 06 Nov 1994 24:00:00 GMT",      // hour
             "Sun, 06 Nov 1994 08:60:00 GMT",      // minute
             "Sun, 06 Nov 1994 08:49:61 GMT",      // second
             "Sun, 06 Nov 1994 08-49-37 GMT",      // clock
             "Sun, 06 Nov 19x4 08:49:37 GMT",      // year
             "Sun, 06 Nov 1969 08:49:37 GMT",      // before the epoch
             "Sunday, 06-Nov-94 08:49:37 UTC",     // RFC 850, not GMT
             "Sunday, 06 Nov 94 08:49:37 GMT",     // RFC 850, no dashes
             "Sunday, 06-Nov-1994 08:49:37 GMT",   // RFC 850, four-digit year
             "Sunday, 6-Nov-94 08:49:37 GMT",      // RFC 850, one-digit day
             "Sun Nov  6 08:49:37 94",             // asctime, short year
             "Sun Nov 6 08:49:37 1994",            // asctime, one blank
             "Sun Nov  6 08:49:37 1994 ",          // asctime, trailing blank
             "Sun Nov  x 08:49:37 1994",           // asctime, day
             "Sun Xyz  6 08:49:37 1994",           // asctime, month
             "Sun Nov  6 08:49:37 1969",           // asctime, before the epoch
             "784111777",                          // seconds
             ",,,,,,,,,,,,,,,,,,,,,,,,,,,,,",      // 29 commas
         }) {
        SCOPED_TRACE(s);
        EXPECT_EQ(-1, parse_http_date(s));
    }
    EXPECT_EQ(-1, parse_http_date(std::string("Sun, 06 Nov 1994 08:49:3\0 GMT", 29)));
}

TEST(HttpDate, GivesTheCurrentTime) {
    std::string_view now = http_date_now();
    ASSERT_EQ(kHttpDateLen, now.size());
    time_t parsed = parse_http_date(now);
    time_t t = time(nullptr);
    EXPECT_LE(parsed, t);
    EXPECT_GE(parsed, t - 2);
}

// ---- media types ----

TEST(ContentType, MapsExtensionsCaseInsensitively) {
    EXPECT_EQ("text/html; charset=utf-8", content_type("index.html"));
    EXPECT_EQ("text/html; charset=utf-8", content_type("a/b/INDEX.HTML"));
    EXPECT_EQ("text/html; charset=utf-8", content_type("old.Htm"));
    EXPECT_EQ("text/css; charset=utf-8", content_type("s.CSS"));
    EXPECT_EQ("text/javascript; charset=utf-8", content_type("app.js"));
    EXPECT_EQ("text/javascript; charset=utf-8", content_type("mod.mjs"));
    EXPECT_EQ("application/json", content_type("d.json"));
    EXPECT_EQ("text/plain; charset=utf-8", content_type("notes.txt"));
    EXPECT_EQ("image/png", content_type("p.PNG"));
    EXPECT_EQ("image/jpeg", content_type("p.jpg"));
    EXPECT_EQ("image/jpeg", content_type("p.JpEg"));
    EXPECT_EQ("image/svg+xml", content_type("i.svg"));
    EXPECT_EQ("application/wasm", content_type("m.wasm"));
    EXPECT_EQ("font/woff2", content_type("f.woff2"));
    EXPECT_EQ("application/gzip", content_type("a.tar.gz")) << "the last extension counts";
    EXPECT_EQ("text/html; charset=utf-8", content_type(".html"));
}

TEST(ContentType, DefaultsToOctetStream) {
    for (const char *p : {"", "README", "file.", "a.unknown", "a.htmlx", "a.ht", "dir.html/file", "x.tar.gz.bak"}) {
        SCOPED_TRACE(p);
        EXPECT_EQ("application/octet-stream", content_type(p));
    }
}

// ---- byte ranges ----

namespace {

struct Range {
    uint16_t status;
    uint64_t first, last;
};

Range range(std::string_view header, uint64_t size) {
    Range r{0, 12345, 67890};
    r.status = parse_range(header, size, &r.first, &r.last);
    return r;
}

void expect_range(std::string_view header, uint64_t size, uint64_t first, uint64_t last) {
    Range r = range(header, size);
    EXPECT_EQ(206, r.status) << header << " of " << size;
    EXPECT_EQ(first, r.first) << header << " of " << size;
    EXPECT_EQ(last, r.last) << header << " of " << size;
}

} // namespace

TEST(ParseRange, TakesAClosedRange) {
    expect_range("bytes=0-499", 1000, 0, 499);
    expect_range("bytes=500-999", 1000, 500, 999);
    expect_range("bytes=7-7", 1000, 7, 7);
    expect_range("bytes=0-0", 1, 0, 0);
}

TEST(ParseRange, TakesAnOpenEndedRange) {
    expect_range("bytes=500-", 1000, 500, 999);
    expect_range("bytes=0-", 1000, 0, 999);
    expect_range("bytes=999-", 1000, 999, 999);
}

TEST(ParseRange, TakesASuffixRange) {
    expect_range("bytes=-200", 1000, 800, 999);
    expect_range("bytes=-1", 1000, 999, 999);
    expect_range("bytes=-1000", 1000, 0, 999);
    expect_range("bytes=-5000", 1000, 0, 999); // a suffix longer than the file is all of it
}

TEST(ParseRange, ClampsTheEndToTheFile) {
    expect_range("bytes=900-5000", 1000, 900, 999);
    expect_range("bytes=0-9999999999999999999", 10, 0, 9);
}

TEST(ParseRange, AcceptsBlanksAroundTheParts) {
    expect_range(" bytes=1-2 ", 10, 1, 2);
    expect_range("bytes= 1 - 2", 10, 1, 2);
}

TEST(ParseRange, GivesAnUnsatisfiableRange416) {
    EXPECT_EQ(416, range("bytes=1000-", 1000).status);
    EXPECT_EQ(416, range("bytes=1000-2000", 1000).status);
    EXPECT_EQ(416, range("bytes=5000-5001", 1000).status);
    EXPECT_EQ(416, range("bytes=-0", 1000).status) << "an empty suffix";
}

TEST(ParseRange, FindsNothingSatisfiableInAZeroSizeFile) {
    EXPECT_EQ(416, range("bytes=0-", 0).status);
    EXPECT_EQ(416, range("bytes=0-0", 0).status);
    EXPECT_EQ(416, range("bytes=-5", 0).status);
}

TEST(ParseRange, IgnoresSeveralRangesWith200) {
    EXPECT_EQ(200, range("bytes=0-1,5-6", 1000).status);
    EXPECT_EQ(200, range("bytes=0-1, -5", 1000).status);
    EXPECT_EQ(200, range("bytes=0-,", 1000).status);
}

TEST(ParseRange, IgnoresAnInvalidHeaderWith200) {
    for (const char *h : {"", "bytes", "bytes=", "bytes=-", "bytes=abc", "bytes=5-1", "bytes=1-2-3", "bytes=a-1",
                          "bytes=1-b", "bytes=+1-2", "bytes=0x1-2", "items=0-1", "byte=0-1", "bytes 0-1",
                          "bytes=12345678901234567890-", "bytes=-12345678901234567890"}) {
        SCOPED_TRACE(h);
        EXPECT_EQ(200, range(h, 1000).status);
    }
}

// ---- entity tags ----

TEST(EtagMatches, MatchesTheSameTag) {
    EXPECT_TRUE(etag_matches("\"abc\"", "\"abc\""));
    EXPECT_TRUE(etag_matches("  \"abc\"  ", "\"abc\""));
    EXPECT_FALSE(etag_matches("\"abd\"", "\"abc\""));
    EXPECT_FALSE(etag_matches("abc", "\"abc\"")) << "quotes are part of the tag";
    EXPECT_FALSE(etag_matches("", "\"abc\""));
}

TEST(EtagMatches, MatchesAnyTagWithAStar) {
    EXPECT_TRUE(etag_matches("*", "\"abc\""));
    EXPECT_TRUE(etag_matches(" * ", "\"x\""));
}

TEST(EtagMatches, MatchesAnElementOfAList) {
    EXPECT_TRUE(etag_matches("\"x\", \"abc\"", "\"abc\""));
    EXPECT_TRUE(etag_matches("\"abc\",\"x\"", "\"abc\""));
    EXPECT_TRUE(etag_matches("\"x\",\t\"y\" ,  \"abc\"", "\"abc\""));
    EXPECT_FALSE(etag_matches("\"x\", \"y\"", "\"abc\""));
    EXPECT_FALSE(etag_matches(",,", "\"abc\""));
}

TEST(EtagMatches, ComparesWeaklySoW_TagsMatch) {
    EXPECT_TRUE(etag_matches("W/\"abc\"", "\"abc\""));
    EXPECT_TRUE(etag_matches("\"abc\"", "W/\"abc\""));
    EXPECT_TRUE(etag_matches("W/\"abc\"", "W/\"abc\""));
    EXPECT_TRUE(etag_matches("\"x\", W/\"abc\"", "\"abc\""));
    EXPECT_FALSE(etag_matches("w/\"abc\"", "\"abc\"")) << "the weak prefix is case-sensitive";
    EXPECT_FALSE(etag_matches("W/\"abd\"", "\"abc\""));
}

// ---- reason phrases ----

TEST(ReasonPhrase, NamesEveryStatusTheCoreAnswers) {
    for (uint16_t s : {200, 206, 301, 304, 400, 403, 404, 405, 408, 413, 414, 416, 431, 500, 501, 503, 505}) {
        SCOPED_TRACE(s);
        EXPECT_NE("Unknown", reason_phrase(s));
    }
    EXPECT_EQ("Not Found", reason_phrase(404));
    EXPECT_EQ("Unknown", reason_phrase(299));
}
