// The floor of a load generator's client CPU (issue 56): a PostgreSQL client that does
// nothing but the wire protocol. It runs pgbench's select-only transaction as a prepared
// statement (Bind, Execute, Sync; read to ReadyForQuery) on THREADS threads of CLIENTS
// connections each, over a Unix socket with trust authentication, and keeps no figure
// but a count: no timestamps, no histogram, no script, no allocation after connecting.
//
// bench/client_cpu.sh runs it beside pgbench and connbench, interleaved, and reads its
// CPU the same way (the process's user + system time over the transactions it counts).
// Whatever it spends is what the kernel charges a client for one transaction here (its
// sends wake the server, its waits sleep and are woken) plus the least user time the
// protocol needs: no load generator can go below it on this machine.
//
// Two ways to wait, to measure what batching system calls saves:
//   epoll  send, epoll_wait, recv: three system calls a transaction, as pgbench and
//          connbench make;
//   uring  io_uring (if built with -DWITH_URING and liburing): each thread keeps a recv
//          in flight per connection and submits its sends and waits in one io_uring_enter
//          (SINGLE_ISSUER, DEFER_TASKRUN: completions run in the thread's own context,
//          so their CPU is counted as the process's, unlike SQPOLL or io-wq workers).
//
// Usage: pg_floor SOCKET USER DBNAME epoll|uring SECONDS THREADS CLIENTS_PER_THREAD
// Prints: transactions N
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#ifdef WITH_URING
#include <liburing.h>
#endif

typedef struct {
    int fd;
    char rbuf[8192];
    int rlen;
    char wbuf[128];
    int wlen;
    unsigned seed;
    long tx;
} client;

static const char *sock_path, *user, *dbname;
static int per_thread;
static volatile int stop;

static void die(const char *what, const char *why) {
    fprintf(stderr, "pg_floor: %s: %s\n", what, why);
    exit(2);
}
static void put32(char *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
static void put16(char *p, uint16_t v) { v = htons(v); memcpy(p, &v, 2); }
static uint32_t get32(const char *p) { uint32_t v; memcpy(&v, p, 4); return ntohl(v); }

// Consumes the whole messages in the buffer; 1 if one was ReadyForQuery. An
// ErrorResponse ends the run: the floor is only a floor if every transaction succeeded.
static int consume(client *c) {
    int off = 0, ready = 0;
    while (c->rlen - off >= 5) {
        uint32_t len = get32(c->rbuf + off + 1);
        if (len + 1 > sizeof c->rbuf) die("read", "a message larger than the buffer");
        if (c->rlen - off < (int)len + 1) break;
        if (c->rbuf[off] == 'E') {
            for (uint32_t i = 5; i < len; i++) c->rbuf[off + i] = c->rbuf[off + i] ? c->rbuf[off + i] : ' ';
            c->rbuf[off + len] = 0;
            die("server error", c->rbuf + off + 5);
        }
        if (c->rbuf[off] == 'R' && len >= 8 && get32(c->rbuf + off + 5) != 0)
            die("authentication", "the floor speaks only trust authentication (the sandbox's connbench_trust)");
        if (c->rbuf[off] == 'Z') ready = 1;
        off += len + 1;
    }
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
    return ready;
}

static void send_all(int fd, const char *b, int n) {
    while (n > 0) {
        int k = send(fd, b, n, 0);
        if (k < 0 && errno == EAGAIN) continue; // a 40-byte request: the buffer frees at once
        if (k < 0) die("send", strerror(errno));
        b += k;
        n -= k;
    }
}

static void read_until_ready(client *c) {
    for (;;) {
        int n = recv(c->fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen, 0);
        if (n <= 0) die("recv while connecting", n ? strerror(errno) : "closed");
        c->rlen += n;
        if (consume(c)) return;
    }
}

// pgbench's select-only: \set aid random(1, 100000 * :scale) at scale 1, then the
// prepared SELECT, its parameter in text as pgbench sends it.
static void next_request(client *c) {
    char aid[16];
    int al = snprintf(aid, sizeof aid, "%d", 1 + (int)(rand_r(&c->seed) % 100000));
    char *p = c->wbuf;
    *p++ = 'B'; put32(p, 4 + 1 + 2 + 2 + 2 + 4 + al + 2); p += 4;
    *p++ = 0;                           // unnamed portal
    memcpy(p, "s", 2); p += 2;          // statement "s"
    put16(p, 0); p += 2;                // parameters in text
    put16(p, 1); p += 2;
    put32(p, al); p += 4; memcpy(p, aid, al); p += al;
    put16(p, 0); p += 2;                // results in text
    *p++ = 'E'; put32(p, 9); p += 4; *p++ = 0; put32(p, 0); p += 4;
    *p++ = 'S'; put32(p, 4); p += 4;
    c->wlen = p - c->wbuf;
}

static void connect_client(client *c, unsigned seed) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(sock_path) >= sizeof a.sun_path) die(sock_path, "socket path too long");
    strcpy(a.sun_path, sock_path);
    c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (c->fd < 0 || connect(c->fd, (void *)&a, sizeof a)) die(sock_path, strerror(errno));
    char s[512], *p = s + 8;
    p += sprintf(p, "user") + 1; p += sprintf(p, "%s", user) + 1;
    p += sprintf(p, "database") + 1; p += sprintf(p, "%s", dbname) + 1;
    *p++ = 0;
    put32(s, p - s); put32(s + 4, 196608);
    send_all(c->fd, s, p - s);
    read_until_ready(c);
    static const char q[] = "SELECT abalance FROM connbench.accounts WHERE aid = $1";
    p = s;
    *p++ = 'P'; put32(p, 4 + 2 + sizeof q + 2 + 4); p += 4;
    memcpy(p, "s", 2); p += 2; memcpy(p, q, sizeof q); p += sizeof q;
    put16(p, 1); p += 2; put32(p, 23); p += 4; // one int4 parameter
    *p++ = 'S'; put32(p, 4); p += 4;
    send_all(c->fd, s, p - s);
    read_until_ready(c);
    c->seed = seed;
}

static void *run_epoll(void *arg) {
    client *cs = arg;
    int ep = epoll_create1(0);
    for (int i = 0; i < per_thread; i++) {
        fcntl(cs[i].fd, F_SETFL, O_NONBLOCK);
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &e);
        next_request(&cs[i]);
        send_all(cs[i].fd, cs[i].wbuf, cs[i].wlen);
    }
    struct epoll_event ev[64];
    while (!stop) {
        int n = epoll_wait(ep, ev, 64, 100);
        for (int i = 0; i < n; i++) {
            client *c = ev[i].data.ptr;
            int k = recv(c->fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen, 0);
            if (k < 0 && errno == EAGAIN) continue;
            if (k <= 0) die("recv", k ? strerror(errno) : "closed");
            c->rlen += k;
            if (consume(c)) {
                c->tx++;
                next_request(c);
                send_all(c->fd, c->wbuf, c->wlen);
            }
        }
    }
    return NULL;
}

#ifdef WITH_URING
static void queue_recv(struct io_uring *r, client *c, uint64_t i) {
    struct io_uring_sqe *s = io_uring_get_sqe(r);
    io_uring_prep_recv(s, c->fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen, 0);
    io_uring_sqe_set_data64(s, i << 1);
}
static void queue_send(struct io_uring *r, client *c, uint64_t i) {
    struct io_uring_sqe *s = io_uring_get_sqe(r);
    io_uring_prep_send(s, c->fd, c->wbuf, c->wlen, 0);
    s->flags |= IOSQE_CQE_SKIP_SUCCESS; // only a failed send reports
    io_uring_sqe_set_data64(s, i << 1 | 1);
}
static void *run_uring(void *arg) {
    client *cs = arg;
    struct io_uring ring;
    struct io_uring_params pr = {0};
    pr.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN;
    int r = io_uring_queue_init_params(4 * per_thread + 8, &ring, &pr);
    if (r) die("io_uring_setup", strerror(-r));
    for (int i = 0; i < per_thread; i++) {
        next_request(&cs[i]);
        queue_send(&ring, &cs[i], i);
        queue_recv(&ring, &cs[i], i);
    }
    while (!stop) {
        struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 100000000};
        struct io_uring_cqe *cqe;
        r = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
        if (r < 0 && r != -ETIME && r != -EINTR) die("io_uring_enter", strerror(-r));
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            uint64_t d = cqe->user_data;
            client *c = &cs[d >> 1];
            if (d & 1) die("send", strerror(-cqe->res));
            if (cqe->res <= 0) die("recv", cqe->res ? strerror(-cqe->res) : "closed");
            c->rlen += cqe->res;
            if (consume(c)) {
                c->tx++;
                next_request(c);
                queue_send(&ring, c, d >> 1);
            }
            queue_recv(&ring, c, d >> 1);
        }
        io_uring_cq_advance(&ring, seen);
    }
    return NULL;
}
#endif

int main(int argc, char **argv) {
    if (argc != 8) die("usage", "pg_floor SOCKET USER DBNAME epoll|uring SECONDS THREADS CLIENTS_PER_THREAD");
    sock_path = argv[1]; user = argv[2]; dbname = argv[3];
    int uring = strcmp(argv[4], "uring") == 0, secs = atoi(argv[5]), threads = atoi(argv[6]);
    per_thread = atoi(argv[7]);
    if (!uring && strcmp(argv[4], "epoll")) die("mode", "epoll or uring");
#ifndef WITH_URING
    if (uring) die("uring", "not built with io_uring (apt-get install liburing-dev)");
#endif
    if (secs < 1 || threads < 1 || threads > 64 || per_thread < 1 || per_thread > 16) die("usage", "bad number");
    client *cs = calloc(threads * per_thread, sizeof(client));
    for (int i = 0; i < threads * per_thread; i++) connect_client(&cs[i], 7919u * (i + 1) ^ (unsigned)getpid());
    pthread_t t[64];
    for (int i = 0; i < threads; i++) {
#ifdef WITH_URING
        void *(*f)(void *) = uring ? run_uring : run_epoll;
#else
        void *(*f)(void *) = run_epoll;
#endif
        pthread_create(&t[i], NULL, f, &cs[i * per_thread]);
    }
    sleep(secs);
    stop = 1;
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    long tx = 0;
    for (int i = 0; i < threads * per_thread; i++) tx += cs[i].tx;
    printf("transactions %ld\n", tx);
    return 0;
}
