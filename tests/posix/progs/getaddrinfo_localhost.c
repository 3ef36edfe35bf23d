/* getaddrinfo_localhost.c - getaddrinfo(3p), freeaddrinfo(3p), gai_strerror(3p)
 * from many threads at once:
 *  - 8 threads, released together by a barrier, each resolve ("localhost",
 *    "80", AF_UNSPEC, SOCK_STREAM) 20 times: 0, at least one result, every
 *    result is 127.0.0.1 or ::1 with port 80 and SOCK_STREAM;
 *  - AI_NUMERICHOST "127.0.0.1" gives exactly that address;
 *  - unknown ai_flags bits give EAI_BADFLAGS, and gai_strerror of it is a
 *    non-empty string.
 * Needs only /etc/hosts (or an equivalent resolver) to know "localhost".
 */
#include "check.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

enum { THREADS = 8, ROUNDS = 20 };

static pthread_barrier_t start;

static int check_localhost(const struct addrinfo *res) {
    int n = 0;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next, ++n) {
        CHECK_EQ(ai->ai_socktype, SOCK_STREAM);
        if (ai->ai_family == AF_INET) {
            const struct sockaddr_in *sin = (const void *)ai->ai_addr;
            CHECK_EQ(ai->ai_addrlen, sizeof *sin);
            CHECK_EQ(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
            CHECK_EQ(ntohs(sin->sin_port), 80);
        } else if (ai->ai_family == AF_INET6) {
            const struct sockaddr_in6 *sin6 = (const void *)ai->ai_addr;
            CHECK_EQ(ai->ai_addrlen, sizeof *sin6);
            CHECK(IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr));
            CHECK_EQ(ntohs(sin6->sin6_port), 80);
        } else {
            FAIL("ai_family (got %d, want AF_INET=%d or AF_INET6=%d)", ai->ai_family, AF_INET,
                 AF_INET6);
        }
    }
    CHECK(n >= 1);
    return n;
}

static void *resolver(void *arg) {
    (void)arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int rc = pthread_barrier_wait(&start);
    CHECK(rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD);
    long results = 0;
    for (int i = 0; i < ROUNDS; ++i) {
        rc = getaddrinfo("localhost", "80", &hints, &res);
        if (rc != 0) FAIL("getaddrinfo(localhost) (got %d \"%s\", want 0)", rc, gai_strerror(rc));
        results += check_localhost(res);
        freeaddrinfo(res);
    }
    return (void *)results;
}

int main(void) {
    WATCHDOG(60);
    pthread_t t[THREADS];
    void *ret;
    long results = 0;

    CHECK_OK(pthread_barrier_init(&start, NULL, THREADS));
    for (int i = 0; i < THREADS; ++i) CHECK_OK(pthread_create(&t[i], NULL, resolver, NULL));
    for (int i = 0; i < THREADS; ++i) {
        CHECK_OK(pthread_join(t[i], &ret));
        results += (long)ret;
    }
    CHECK_OK(pthread_barrier_destroy(&start));

    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST},
                    *res;
    CHECK_OK(getaddrinfo("127.0.0.1", "80", &hints, &res));
    CHECK_EQ(check_localhost(res), 1);
    freeaddrinfo(res);

    hints.ai_flags = ~0;
    CHECK_RC(getaddrinfo("localhost", "80", &hints, &res), EAI_BADFLAGS);
    const char *msg = gai_strerror(EAI_BADFLAGS);
    CHECK(msg != NULL && msg[0] != '\0');

    printf("ok getaddrinfo_localhost %d threads x %d lookups, %ld addresses, EAI_BADFLAGS \"%s\"\n",
           THREADS, ROUNDS, results, msg);
    return 0;
}
