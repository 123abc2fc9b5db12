/*
 * daemon.c: one Lifeline rank over TCP in C, interoperable with `lifeline node`.
 *
 * The C program owns every socket (non-blocking, one epoll loop, one timeout); the library
 * decides everything else: the protocol (lifeline_node_*), who dials and when
 * (lifeline_links_*), and the handshake's bytes (lifeline_tcp_*).
 *
 *   daemon --rank R --peers FILE [--key-file F] [--radix K] [--exit-on-stdin-eof]
 *          [--link-timeout-ms MS] [--dial-attempts N] [--startup-grace-ms MS] [--no-detect]
 *
 * The peers file is `lifeline node`'s (`rank ip:port` per line, IPv4 here). Without --key-file
 * the cluster secret is LIFELINE_CLUSTER_KEY. stdin: `xcast TAG TEXT`, `relm DST TAG TEXT`,
 * `shrink R[,R...]`, `quit`. stdout: one JSON object per line, with `lifeline node`'s event
 * names and fields. Exit status 3 when the cluster evicted this rank, 0 when it left (a shrink
 * campaign named it: `left`).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lifeline.h"

#define MAX_RANKS 1024
#define SLOTS 2
#define CONNECT_TIMEOUT_NS 1000000000ull
#define HANDSHAKE_TIMEOUT_NS 2000000000ull
#define EVICTED_GRACE_NS 250000000ull

enum state { DIAL_CONNECTING, DIAL_CHALLENGE, DIAL_RESULT, ACC_HELLO, ACC_PROOF, OPEN, CLOSING };

struct buf { uint8_t *p; size_t len, cap, off; };

struct conn {
    int fd;
    enum state st;
    bool dialed, dead, want_out;
    uint32_t peer, slot;
    uint64_t attempt, deadline;
    uint32_t src_ip; /* accepted: the peer's IPv4 (network order) */
    lifeline_tcp_dialer *dialer;
    lifeline_tcp_acceptor *acceptor;
    struct buf in, out;
    struct conn *next;
};

/* ---- global state (one rank per process) ---- */
static uint32_t me, span, radix = 8;
static struct sockaddr_in book[MAX_RANKS];
static lifeline_node *node;
static lifeline_links *links;
static lifeline_tcp_key *key;
static int ep;
static uint64_t t0;
static struct conn *conns;                    /* every live connection */
static struct conn *link_of[MAX_RANKS][SLOTS]; /* installed connections */
static struct buf pending[MAX_RANKS][SLOTS];   /* frames waiting for a connection */
static bool refused[MAX_RANKS];
static bool detect = true, exit_on_eof, quitting, evicted, left, view_changed;
static uint64_t link_timeout_ms = 3000, view_lost_at = UINT64_MAX;
static uint8_t *tbuf;
static size_t tcap;
static char line[1 << 16];
static size_t line_len;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - t0;
}

static double wall_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec * 1e3 + (double)tv.tv_usec / 1e3;
}

static void die(const char *what) {
    fprintf(stderr, "daemon: %s\n", what);
    exit(1);
}

/* ---- JSON lines ---- */
static void out_begin(const char *event) {
    printf("{\"event\":\"%s\",\"rank\":%u,\"t_ms\":%.3f,\"now_ms\":%.3f", event, me, wall_ms(),
           (double)now_ns() / 1e6);
}
static void out_end(void) {
    if (printf("}\n") < 0 || fflush(stdout) != 0) exit(0);
}
static void out_str(const char *name, const uint8_t *s, size_t n) {
    printf(",\"%s\":\"", name);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* ---- buffers ---- */
static void buf_put(struct buf *b, const uint8_t *p, size_t n) {
    if (b->off > 0 && b->off == b->len) b->off = b->len = 0;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) die("out of memory");
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}
static void buf_free(struct buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
static void buf_consume(struct buf *b, size_t n) {
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

/* ---- connections ---- */
static void conn_events(struct conn *c) {
    struct epoll_event e = {.events = EPOLLIN | (c->want_out ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
}

/* Closes `c` (freed after the current batch of epoll events). */
static void conn_close(struct conn *c) {
    if (c->dead) return;
    c->dead = true;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->peer < MAX_RANKS && link_of[c->peer][c->slot % SLOTS] == c) link_of[c->peer][c->slot % SLOTS] = NULL;
}

static void reap(void) {
    for (struct conn **pc = &conns; *pc;) {
        struct conn *c = *pc;
        if (!c->dead) { pc = &c->next; continue; }
        *pc = c->next;
        lifeline_tcp_dialer_free(c->dialer);
        lifeline_tcp_acceptor_free(c->acceptor);
        buf_free(&c->in);
        buf_free(&c->out);
        free(c);
    }
}

static struct conn *conn_new(int fd, bool dialed, uint32_t events) {
    struct conn *c = calloc(1, sizeof *c);
    if (!c) die("out of memory");
    c->fd = fd;
    c->dialed = dialed;
    c->peer = LIFELINE_NO_RANK;
    c->next = conns;
    conns = c;
    struct epoll_event e = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) die("epoll_ctl");
    c->want_out = (events & EPOLLOUT) != 0;
    return c;
}

/* Writes what `c` has buffered; false when the socket failed. */
static bool flush(struct conn *c) {
    while (c->out.off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
        if (n > 0) { c->out.off += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return false;
    }
    if (c->out.off == c->out.len) c->out.off = c->out.len = 0;
    bool want = c->out.len > 0;
    if (want != c->want_out) { c->want_out = want; conn_events(c); }
    if (!want && c->st == CLOSING) conn_close(c);
    return true;
}

static void send_bytes(struct conn *c, const uint8_t *p, size_t n) {
    buf_put(&c->out, p, n);
}

/* TCP_NODELAY, keepalive every max(1 s, link_timeout/3) with 3 probes, TCP_USER_TIMEOUT. */
static void configure(int fd) {
    int one = 1, probe = (int)(link_timeout_ms / 3000), three = 3;
    unsigned int uto = (unsigned int)link_timeout_ms;
    if (probe < 1) probe = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &probe, sizeof probe);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &probe, sizeof probe);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &three, sizeof three);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof uto);
}

static void nonce(uint8_t n[LIFELINE_TCP_NONCE_LEN]) {
    size_t got = 0;
    while (got < LIFELINE_TCP_NONCE_LEN) {
        ssize_t r = getrandom(n + got, LIFELINE_TCP_NONCE_LEN - got, 0);
        if (r < 0 && errno != EINTR) die("getrandom");
        if (r > 0) got += (size_t)r;
    }
}

static bool alive(uint32_t r) {
    bool a = false;
    return r != me && lifeline_node_is_alive(node, r, &a) == LIFELINE_OK && a;
}

/* ---- the drive loop's pieces (mirroring transport-common's driver) ---- */
static void drain(void);
static void apply_links(void);
static void frames_in(struct conn *c);

static void want(uint32_t peer) {
    for (uint32_t s = 0; s < SLOTS; s++) lifeline_links_want(links, now_ns(), peer, s, node);
    apply_links();
}

static void wire_up(void) {
    uint32_t parent = LIFELINE_NO_RANK;
    if (lifeline_node_parent(node, &parent) == LIFELINE_OK && parent != LIFELINE_NO_RANK) want(parent);
}

static void close_peer(uint32_t peer) {
    for (uint32_t s = 0; s < SLOTS; s++) {
        if (link_of[peer][s]) conn_close(link_of[peer][s]);
        link_of[peer][s] = NULL;
        buf_free(&pending[peer][s]);
    }
}

enum down { DOWN_UNREACHABLE, DOWN_CLOSED, DOWN_RESET, DOWN_TIMED_OUT, DOWN_MALFORMED };
static const char *down_name[] = {"unreachable", "closed", "reset", "timed out", "malformed"};

/* Reports a lost link to the node, with driver.rs's cause for it. */
static void report_down(uint32_t peer, enum down why) {
    close_peer(peer);
    uint32_t cause;
    bool was_refused = refused[peer];
    refused[peer] = false;
    switch (why) {
    case DOWN_UNREACHABLE: cause = was_refused ? LIFELINE_LINK_REFUSED : LIFELINE_LINK_TIMED_OUT; break;
    case DOWN_TIMED_OUT: cause = LIFELINE_LINK_TIMED_OUT; break;
    case DOWN_RESET: cause = LIFELINE_LINK_RESET; break;
    default: cause = LIFELINE_LINK_CLOSED; break;
    }
    lifeline_node_handle_link_down(node, now_ns(), peer, cause);
    out_begin("link_down");
    printf(",\"peer\":%u,\"reason\":\"%s\"", peer, down_name[why]);
    out_end();
}

/* Installs `c` as `peer`'s connection for its slot (replacing any other) and sends what waits. */
static void install(struct conn *c) {
    struct conn *old = link_of[c->peer][c->slot];
    if (old && old != c) conn_close(old);
    link_of[c->peer][c->slot] = c;
    c->st = OPEN;
    struct buf *q = &pending[c->peer][c->slot];
    if (q->len) send_bytes(c, q->p, q->len);
    buf_free(q);
    c->deadline = UINT64_MAX;
}

static void dial_done(struct conn *c, uint32_t outcome) {
    bool run = false;
    refused[c->peer] = outcome == LIFELINE_DIAL_REFUSED;
    lifeline_links_handle_dial_result(links, now_ns(), c->peer, c->slot, c->attempt, outcome, node, &run);
    if (run && outcome == LIFELINE_DIAL_CONNECTED) {
        install(c);
        if (!flush(c)) { conn_close(c); }
        else frames_in(c);
    } else {
        conn_close(c);
    }
    apply_links();
}

static void start_dial(uint32_t peer, uint32_t slot, uint64_t attempt) {
    if (peer >= span || quitting) return;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    /* Like the Rust adapter (BindLocal::Auto): on a loopback address, connect from our own IP,
     * so the acceptor's source-IP check passes on 127.0.0.x clusters. */
    if ((ntohl(book[me].sin_addr.s_addr) >> 24) == 127) {
        struct sockaddr_in local = book[me];
        local.sin_port = 0;
        bind(fd, (struct sockaddr *)&local, sizeof local);
    }
    struct conn *c = conn_new(fd, true, EPOLLIN | EPOLLOUT);
    c->peer = peer;
    c->slot = slot;
    c->attempt = attempt;
    c->st = DIAL_CONNECTING;
    c->deadline = now_ns() + CONNECT_TIMEOUT_NS;
    if (connect(fd, (struct sockaddr *)&book[peer], sizeof book[peer]) != 0 && errno != EINPROGRESS)
        dial_done(c, errno == ECONNREFUSED ? LIFELINE_DIAL_REFUSED : LIFELINE_DIAL_FAILED);
}

static void apply_links(void) {
    lifeline_link_action a;
    while (lifeline_links_poll_action(links, &a) == LIFELINE_OK) {
        switch (a.kind) {
        case LIFELINE_LINK_ACTION_DIAL: start_dial(a.peer, a.slot, a.attempt); break;
        case LIFELINE_LINK_ACTION_UP:
            lifeline_node_handle_link_up(node, now_ns(), a.peer);
            out_begin("link_up");
            printf(",\"peer\":%u", a.peer);
            out_end();
            drain();
            break;
        case LIFELINE_LINK_ACTION_DOWN:
            if (a.reason == LIFELINE_LINK_DOWN_DEAD) {
                close_peer(a.peer);
                out_begin("link_down");
                printf(",\"peer\":%u,\"reason\":\"dead\"", a.peer);
                out_end();
            } else {
                report_down(a.peer, DOWN_UNREACHABLE);
                drain();
            }
            break;
        default: break;
        }
    }
}

/* One transmit: onto the slot's connection, else queued until it exists (and dialled). */
static void route(const lifeline_transmit *t) {
    uint32_t slot = t->traffic_class == LIFELINE_CLASS_CONTROL ? 0 : 1;
    if (t->to >= span) return;
    struct conn *c = link_of[t->to][slot];
    if (!alive(t->to)) {
        /* Only a fencing notice goes to a dead rank, and only on an open connection. */
        if ((t->flags & LIFELINE_TRANSMIT_FENCE) && c && c->st == OPEN) {
            send_bytes(c, tbuf, t->len);
            if (!flush(c)) conn_close(c);
        }
        return;
    }
    if (c && c->st == OPEN) {
        send_bytes(c, tbuf, t->len);
        if (!flush(c)) conn_close(c); /* the read side reports the loss */
    } else {
        buf_put(&pending[t->to][slot], tbuf, t->len);
    }
    want(t->to);
}

static void print_event(const lifeline_event *e) {
    switch (e->kind) {
    case LIFELINE_EVENT_XCAST_DELIVERED:
        out_begin("xcast_delivered");
        printf(",\"op\":%llu,\"origin\":%u,\"seq\":%llu,\"tag\":%u", (unsigned long long)e->op, e->rank,
               (unsigned long long)e->seq, e->tag);
        out_str("payload", e->payload, e->payload_len);
        break;
    case LIFELINE_EVENT_XCAST_COMPLETED:
        out_begin("xcast_completed");
        printf(",\"op\":%llu,\"seq\":%llu", (unsigned long long)e->op, (unsigned long long)e->seq);
        break;
    case LIFELINE_EVENT_XCAST_ROOT_COMPLETED:
        out_begin("xcast_root_completed");
        printf(",\"op\":%llu,\"origin\":%u,\"seq\":%llu", (unsigned long long)e->op, e->rank,
               (unsigned long long)e->seq);
        break;
    case LIFELINE_EVENT_FAILURE_CONFIRMED:
        out_begin("failure_confirmed");
        printf(",\"epoch\":%llu,\"ranks\":[", (unsigned long long)e->epoch);
        for (size_t i = 0; i < e->ranks_len; i++) printf("%s%u", i ? "," : "", e->ranks[i]);
        printf("],\"members\":%llu", (unsigned long long)e->count);
        break;
    case LIFELINE_EVENT_VIEW_CHANGED:
        out_begin("view_changed");
        if (e->parent == LIFELINE_NO_RANK) printf(",\"parent\":null");
        else printf(",\"parent\":%u", e->parent);
        printf(",\"promoted\":%s", (e->flags & LIFELINE_VIEW_PROMOTED) ? "true" : "false");
        break;
    case LIFELINE_EVENT_RELM_DELIVERED:
        out_begin("relm_delivered");
        printf(",\"src\":%u,\"uid\":%u,\"tag\":%u", e->rank, e->uid, e->tag);
        out_str("payload", e->payload, e->payload_len);
        break;
    case LIFELINE_EVENT_RELM_ACKED:
        out_begin("relm_acked");
        printf(",\"dst\":%u,\"upto\":%u", e->rank, e->uid);
        break;
    case LIFELINE_EVENT_RELM_FAILED:
        out_begin("relm_failed");
        printf(",\"dst\":%u,\"first\":%u,\"count\":%llu", e->rank, e->uid, (unsigned long long)e->count);
        break;
    case LIFELINE_EVENT_RELM_SOURCE_LOST:
        out_begin("relm_source_lost");
        printf(",\"src\":%u,\"discarded\":%llu", e->rank, (unsigned long long)e->count);
        break;
    case LIFELINE_EVENT_EVICTED:
        out_begin("evicted");
        printf(",\"epoch\":%llu", (unsigned long long)e->epoch);
        break;
    case LIFELINE_EVENT_DEPARTED:
        out_begin("departed");
        printf(",\"epoch\":%llu,\"ranks\":[", (unsigned long long)e->epoch);
        for (size_t i = 0; i < e->ranks_len; i++) printf("%s%u", i ? "," : "", e->ranks[i]);
        printf("],\"campaigns\":[");
        for (size_t i = 0; i < e->campaigns_len; i++)
            printf("%s\"%u.%u\"", i ? "," : "", (unsigned)(e->campaigns[i] >> 32),
                   (unsigned)(e->campaigns[i] & 0xffffffffu));
        printf("],\"members\":%llu", (unsigned long long)e->count);
        break;
    case LIFELINE_EVENT_LEFT:
        out_begin("left");
        printf(",\"epoch\":%llu", (unsigned long long)e->epoch);
        break;
    case LIFELINE_EVENT_CAMPAIGN_COMPLETED:
        out_begin("campaign_completed");
        printf(",\"id\":\"%u.%u\",\"removed\":[", (unsigned)(e->seq >> 32), (unsigned)(e->seq & 0xffffffffu));
        for (size_t i = 0; i < e->ranks_len; i++) printf("%s%u", i ? "," : "", e->ranks[i]);
        printf("],\"epoch\":%llu", (unsigned long long)e->epoch);
        break;
    case LIFELINE_EVENT_CAMPAIGN_FAILED:
        out_begin("campaign_failed");
        printf(",\"id\":\"%u.%u\",\"reason\":\"%s\"", (unsigned)(e->seq >> 32),
               (unsigned)(e->seq & 0xffffffffu),
               e->reason == LIFELINE_CAMPAIGN_TIMED_OUT ? "timed_out"
               : e->reason == LIFELINE_CAMPAIGN_REQUESTER_REMOVED ? "requester_removed"
                                                                 : "unknown");
        break;
    default:
        out_begin("event");
        printf(",\"kind\":%u,\"subject\":%u", e->kind, e->rank);
        break;
    }
    out_end();
}

/* Drains the node's transmits and events to empty, then acts on a view change. */
static void drain(void) {
    for (;;) {
        lifeline_transmit t;
        for (;;) {
            int r = lifeline_node_poll_transmit(node, tbuf, tcap, &t);
            if (r == LIFELINE_ERR_BUFFER_TOO_SHORT) {
                uint8_t *p = realloc(tbuf, t.len);
                if (!p) die("out of memory");
                tbuf = p;
                tcap = t.len;
                continue;
            }
            if (r != LIFELINE_OK) break;
            route(&t);
        }
        const lifeline_event *e;
        while (lifeline_node_poll_event(node, &e) == LIFELINE_OK) {
            print_event(e);
            if (e->kind == LIFELINE_EVENT_EVICTED) evicted = true;
            if (e->kind == LIFELINE_EVENT_LEFT) left = true;
            /* Departed ranks are dead in the view: re-evaluating the links closes theirs. */
            if (e->kind == LIFELINE_EVENT_DEPARTED) view_changed = true;
            if (e->kind == LIFELINE_EVENT_VIEW_CHANGED) {
                view_changed = true;
                if ((e->flags & LIFELINE_VIEW_DEAD) && view_lost_at == UINT64_MAX)
                    view_lost_at = now_ns() + EVICTED_GRACE_NS;
            }
        }
        if (view_changed) {
            view_changed = false;
            lifeline_links_retain_alive(links, node);
            apply_links();
            wire_up();
            continue;
        }
        break;
    }
}

/* A connection's end: the link is down; with the detector on, one re-dial settles it. */
static void ended(struct conn *c, enum down why) {
    uint32_t peer = c->peer, slot = c->slot;
    bool current = c->st == OPEN && link_of[peer][slot] == c;
    conn_close(c);
    if (!current) return;
    bool down = false;
    lifeline_links_handle_closed(links, now_ns(), peer, slot, &down);
    if (down) {
        report_down(peer, why);
        if (why != DOWN_TIMED_OUT && detect && alive(peer)) want(peer);
    }
    apply_links();
    drain();
}

/* Feeds every whole frame buffered on an open connection to the node. */
static void frames_in(struct conn *c) {
    while (!c->dead && c->st == OPEN && c->in.len > 0) {
        size_t total = 0;
        int r = lifeline_node_frame_len(node, c->in.p, c->in.len, &total);
        if (r == LIFELINE_DONE || (r == LIFELINE_OK && total > c->in.len)) return;
        if (r != LIFELINE_OK) { ended(c, DOWN_MALFORMED); return; }
        lifeline_node_handle_frame(node, now_ns(), c->peer, c->in.p, total);
        buf_consume(&c->in, total);
        drain();
    }
}

/* The acceptor has checked the PROOF: the link policy's tie-break decides. */
static void accepted(struct conn *c) {
    uint32_t v = LIFELINE_ACCEPT_REFUSE, verdict;
    uint64_t epoch = 0;
    uint8_t res[LIFELINE_TCP_RESULT_MAX_LEN];
    size_t n = 0;
    if (!quitting) lifeline_links_handle_accepted(links, now_ns(), c->peer, c->slot, node, &v);
    if (v == LIFELINE_ACCEPT) verdict = LIFELINE_VERDICT_ACCEPT;
    else if (v == LIFELINE_ACCEPT_DUPLICATE) verdict = LIFELINE_VERDICT_DUPLICATE;
    else if (!quitting && lifeline_node_fence_verdict(node, now_ns(), c->peer, &epoch) == LIFELINE_OK)
        verdict = LIFELINE_VERDICT_REMOVED;
    else verdict = LIFELINE_VERDICT_REFUSE;
    lifeline_tcp_verdict_encode(verdict, epoch, res, &n);
    send_bytes(c, res, n);
    if (verdict == LIFELINE_VERDICT_ACCEPT) {
        install(c);
        if (!flush(c)) { conn_close(c); return; }
        apply_links();
        frames_in(c);
    } else {
        c->st = CLOSING;
        if (!flush(c)) conn_close(c);
        drain();
    }
}

/* Advances a handshake with the bytes read so far. */
static void handshake(struct conn *c) {
    uint8_t out[LIFELINE_TCP_CHALLENGE_LEN], n[LIFELINE_TCP_NONCE_LEN];
    switch (c->st) {
    case DIAL_CHALLENGE:
        if (c->in.len < LIFELINE_TCP_CHALLENGE_LEN) return;
        if (lifeline_tcp_dialer_on_challenge(c->dialer, c->in.p, LIFELINE_TCP_CHALLENGE_LEN, out) != LIFELINE_OK) {
            dial_done(c, LIFELINE_DIAL_FAILED);
            return;
        }
        buf_consume(&c->in, LIFELINE_TCP_CHALLENGE_LEN);
        send_bytes(c, out, LIFELINE_TCP_PROOF_LEN);
        c->st = DIAL_RESULT;
        if (!flush(c)) { dial_done(c, LIFELINE_DIAL_FAILED); return; }
        /* fall through: the RESULT may already be here */
        /* FALLTHROUGH */
    case DIAL_RESULT: {
        uint32_t v;
        uint64_t epoch;
        size_t used;
        if (lifeline_tcp_decode_verdict(c->in.p, c->in.len, &v, &epoch, &used) != LIFELINE_OK) return;
        buf_consume(&c->in, used);
        if (v == LIFELINE_VERDICT_ACCEPT) dial_done(c, LIFELINE_DIAL_CONNECTED);
        else if (v == LIFELINE_VERDICT_DUPLICATE) dial_done(c, LIFELINE_DIAL_DUPLICATE);
        else {
            if (v == LIFELINE_VERDICT_REMOVED) {
                lifeline_node_handle_fenced(node, now_ns(), c->peer, epoch);
                drain();
            }
            dial_done(c, LIFELINE_DIAL_FAILED);
        }
        return;
    }
    case ACC_HELLO: {
        if (c->in.len < LIFELINE_TCP_HELLO_LEN) return;
        uint32_t from = 0, class = 0;
        nonce(n);
        if (lifeline_tcp_acceptor_on_hello(key, me, c->in.p, LIFELINE_TCP_HELLO_LEN, n, out, &from, &class,
                                           &c->acceptor) != LIFELINE_OK) {
            conn_close(c);
            return;
        }
        /* The claimed rank must be in the book and connect from its IP (this example does not
         * learn ranks past its book: see lifeline_tcp_acceptor_listen). */
        if (from >= span || book[from].sin_addr.s_addr != c->src_ip) { conn_close(c); return; }
        buf_consume(&c->in, LIFELINE_TCP_HELLO_LEN);
        c->peer = from;
        c->slot = class == LIFELINE_CLASS_CONTROL ? 0 : 1;
        send_bytes(c, out, LIFELINE_TCP_CHALLENGE_LEN);
        c->st = ACC_PROOF;
        if (!flush(c)) { conn_close(c); return; }
    }
        /* FALLTHROUGH */
    case ACC_PROOF:
        if (c->in.len < LIFELINE_TCP_PROOF_LEN) return;
        if (lifeline_tcp_acceptor_on_proof(c->acceptor, c->in.p, LIFELINE_TCP_PROOF_LEN) != LIFELINE_OK) {
            conn_close(c);
            return;
        }
        buf_consume(&c->in, LIFELINE_TCP_PROOF_LEN);
        accepted(c);
        return;
    default: return;
    }
}

/* The connect finished (EPOLLOUT): send the HELLO. */
static void connected(struct conn *c) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
        dial_done(c, err == ECONNREFUSED ? LIFELINE_DIAL_REFUSED : LIFELINE_DIAL_FAILED);
        return;
    }
    configure(c->fd);
    uint8_t n[LIFELINE_TCP_NONCE_LEN], hello[LIFELINE_TCP_HELLO_LEN];
    nonce(n);
    uint32_t class = c->slot == 0 ? LIFELINE_CLASS_CONTROL : LIFELINE_CLASS_DATA;
    /* Announce the span and our listening port: a rank whose book lacks us can learn us. */
    if (lifeline_tcp_dialer_new_announcing(key, me, c->peer, class, span, ntohs(book[me].sin_port), n,
                                           hello, &c->dialer) != LIFELINE_OK) {
        dial_done(c, LIFELINE_DIAL_FAILED);
        return;
    }
    send_bytes(c, hello, sizeof hello);
    c->st = DIAL_CHALLENGE;
    c->deadline = now_ns() + HANDSHAKE_TIMEOUT_NS;
    if (!flush(c)) dial_done(c, LIFELINE_DIAL_FAILED);
}

static void on_conn(struct conn *c, uint32_t events) {
    if (c->dead) return;
    if (c->st == DIAL_CONNECTING) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) connected(c);
        return;
    }
    if ((events & EPOLLOUT) && !flush(c)) {
        if (c->st == OPEN) ended(c, DOWN_RESET);
        else if (c->dialed && c->st != CLOSING) dial_done(c, LIFELINE_DIAL_FAILED);
        else conn_close(c);
        return;
    }
    if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP)) || c->dead) return;
    uint8_t tmp[65536];
    for (;;) {
        ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
        if (n > 0) {
            buf_put(&c->in, tmp, (size_t)n);
            if (c->st == OPEN) frames_in(c);
            else if (c->st != CLOSING) handshake(c);
            if (c->dead) return;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        enum down why = n == 0 ? DOWN_CLOSED : errno == ETIMEDOUT ? DOWN_TIMED_OUT : DOWN_RESET;
        if (c->st == OPEN) ended(c, why);
        else if (c->dialed && c->st != CLOSING) dial_done(c, LIFELINE_DIAL_FAILED);
        else conn_close(c);
        return;
    }
}

static void on_listener(int lfd) {
    for (;;) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        int fd = accept4(lfd, (struct sockaddr *)&from, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        if (quitting) { close(fd); continue; }
        configure(fd);
        struct conn *c = conn_new(fd, false, EPOLLIN);
        c->st = ACC_HELLO;
        c->src_ip = from.sin_addr.s_addr;
        c->deadline = now_ns() + HANDSHAKE_TIMEOUT_NS;
    }
}

/* Runs one stdin command; false for `quit`. */
static bool command(char *l) {
    char *verb = strtok(l, " ");
    if (!verb) return true;
    if (!strcmp(verb, "quit")) return false;
    if (!strcmp(verb, "shrink")) {
        uint32_t targets[256];
        size_t n = 0;
        bool bad = false;
        for (char *t = strtok(NULL, ", "); t && !bad; t = strtok(NULL, ", ")) {
            char *end = NULL;
            unsigned long r = strtoul(t, &end, 10);
            bad = *end || r > UINT32_MAX || n == sizeof targets / sizeof *targets;
            if (!bad) targets[n++] = (uint32_t)r;
        }
        if (bad || n == 0) {
            out_begin("error");
            printf(",\"message\":\"usage: shrink R[,R...]\"");
            out_end();
            return true;
        }
        uint64_t id = 0;
        int r = lifeline_node_shrink(node, now_ns(), targets, n, &id);
        if (r != LIFELINE_OK) {
            out_begin("error");
            printf(",\"message\":\"%s\"", lifeline_strerror(r));
        } else {
            out_begin("campaign_started");
            printf(",\"id\":\"%u.%u\",\"targets\":[", (unsigned)(id >> 32), (unsigned)(id & 0xffffffffu));
            for (size_t i = 0; i < n; i++) printf("%s%u", i ? "," : "", targets[i]);
            printf("]");
        }
        out_end();
        drain();
        return true;
    }
    if (!strcmp(verb, "xcast") || !strcmp(verb, "relm")) {
        bool relm = verb[0] == 'r';
        char *dst_s = relm ? strtok(NULL, " ") : NULL;
        char *tag_s = strtok(NULL, " ");
        char *body = strtok(NULL, "");
        if (!body) body = "";
        char *end = NULL;
        unsigned long tag = tag_s ? strtoul(tag_s, &end, 10) : 0;
        bool bad = !tag_s || *end || tag > 65535;
        unsigned long dst = 0;
        if (relm) {
            dst = dst_s ? strtoul(dst_s, &end, 10) : 0;
            bad = bad || !dst_s || *end || dst > UINT32_MAX;
        }
        if (bad) {
            out_begin("error");
            printf(",\"message\":\"usage: %s\"", relm ? "relm DST TAG TEXT" : "xcast TAG TEXT");
            out_end();
            return true;
        }
        size_t n = strlen(body);
        int r;
        uint64_t seq = 0;
        uint32_t uid = 0;
        if (relm) r = lifeline_node_relm_send(node, now_ns(), (uint32_t)dst, (uint16_t)tag, (const uint8_t *)body, n, &uid);
        else r = lifeline_node_xcast(node, now_ns(), (uint16_t)tag, (const uint8_t *)body, n, &seq);
        if (r != LIFELINE_OK) {
            out_begin("error");
            printf(",\"message\":\"%s\"", lifeline_strerror(r));
        } else if (relm) {
            out_begin("relm_started");
            printf(",\"dst\":%lu,\"uid\":%u,\"tag\":%lu", dst, uid, tag);
            out_str("payload", (const uint8_t *)body, n);
        } else {
            out_begin("xcast_started");
            printf(",\"seq\":%llu,\"tag\":%lu", (unsigned long long)seq, tag);
            out_str("payload", (const uint8_t *)body, n);
        }
        out_end();
        drain();
        return true;
    }
    out_begin("error");
    printf(",\"message\":\"commands: xcast TAG TEXT | relm DST TAG TEXT | quit\"");
    out_end();
    return true;
}

/* Reads stdin; false when the daemon must stop. */
static bool on_stdin(void) {
    for (;;) {
        ssize_t n = read(0, line + line_len, sizeof line - 1 - line_len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (n <= 0) {
            epoll_ctl(ep, EPOLL_CTL_DEL, 0, NULL);
            return !exit_on_eof;
        }
        line_len += (size_t)n;
        char *nl;
        while ((nl = memchr(line, '\n', line_len))) {
            *nl = 0;
            size_t used = (size_t)(nl - line) + 1;
            if (nl > line && nl[-1] == '\r') nl[-1] = 0;
            bool go = command(line);
            memmove(line, line + used, line_len - used);
            line_len -= used;
            if (!go) return false;
        }
        if (line_len == sizeof line - 1) line_len = 0; /* an overlong line is dropped */
    }
}

static void parse_peers(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot read the peers file");
    char l[512];
    bool seen[MAX_RANKS] = {0};
    while (fgets(l, sizeof l, f)) {
        char *hash = strchr(l, '#');
        if (hash) *hash = 0;
        unsigned rank;
        char addr[256];
        if (sscanf(l, "%u %255s", &rank, addr) != 2) continue;
        char *colon = strrchr(addr, ':');
        if (!colon || rank >= MAX_RANKS) die("bad peers line (want `rank ipv4:port`)");
        *colon = 0;
        struct sockaddr_in *a = &book[rank];
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)atoi(colon + 1));
        if (inet_pton(AF_INET, addr, &a->sin_addr) != 1) die("bad IPv4 address in the peers file");
        seen[rank] = true;
        if (rank + 1 > span) span = rank + 1;
    }
    fclose(f);
    for (uint32_t r = 0; r < span; r++)
        if (!seen[r]) die("peers file: ranks must be 0..N with none missing");
}

static void load_key(const char *path) {
    uint8_t *secret = NULL;
    size_t len = 0;
    if (path) {
        FILE *f = fopen(path, "rb");
        if (!f) die("cannot read the key file");
        uint8_t chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
            uint8_t *p = realloc(secret, len + n);
            if (!p) die("out of memory");
            secret = p;
            memcpy(secret + len, chunk, n);
            len += n;
        }
        fclose(f);
    } else {
        const char *env = getenv("LIFELINE_CLUSTER_KEY");
        if (!env) die("no cluster key: give --key-file FILE or set LIFELINE_CLUSTER_KEY");
        len = strlen(env);
        secret = malloc(len + 1);
        if (!secret) die("out of memory");
        memcpy(secret, env, len);
    }
    if (lifeline_tcp_key_new(secret, len, &key) != LIFELINE_OK) die("the cluster key is empty");
    free(secret);
}

int main(int argc, char **argv) {
    const char *peers = NULL, *key_file = NULL;
    long rank = -1;
    uint64_t grace_ms = 10000;
    uint32_t dial_attempts = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--exit-on-stdin-eof")) { exit_on_eof = true; continue; }
        if (!strcmp(a, "--no-detect")) { detect = false; continue; }
        if (!strcmp(a, "--detect")) continue;
        if (!v) die("usage: daemon --rank R --peers FILE [--key-file F] [--radix K] [--exit-on-stdin-eof]");
        i++;
        if (!strcmp(a, "--rank")) rank = atol(v);
        else if (!strcmp(a, "--peers")) peers = v;
        else if (!strcmp(a, "--key-file")) key_file = v;
        else if (!strcmp(a, "--radix")) radix = (uint32_t)atol(v);
        else if (!strcmp(a, "--link-timeout-ms")) link_timeout_ms = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--dial-attempts")) dial_attempts = (uint32_t)atol(v);
        else if (!strcmp(a, "--startup-grace-ms")) grace_ms = strtoull(v, NULL, 10);
        else die("unknown argument");
    }
    if (rank < 0 || !peers) die("usage: daemon --rank R --peers FILE [--key-file F] [--radix K]");
    if (lifeline_abi_version() != LIFELINE_ABI_VERSION) die("liblifeline ABI mismatch");
    if (link_timeout_ms < 1) link_timeout_ms = 1;
    me = (uint32_t)rank;
    parse_peers(peers);
    if (me >= span) die("this rank is not in the peers file");
    load_key(key_file);
    signal(SIGPIPE, SIG_IGN);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;

    /* The same configuration as `lifeline node`: the span from the peers file, the radix, the
     * detector on; links: dial_attempts 10, refused_attempts 1 with the detector (else 3),
     * startup grace 10 s, back-off 50 ms doubling to 1 s. */
    lifeline_config *cfg = lifeline_config_new(span, radix);
    if (!cfg) die("invalid --radix");
    lifeline_config_set(cfg, "detect_enabled", detect ? 1 : 0);
    uint64_t seed = ((uint64_t)getpid() << 32) ^ me ^ (uint64_t)(wall_ms() * 1e3);
    if (lifeline_node_new(cfg, me, seed, 0, &node) != LIFELINE_OK) die("invalid configuration");
    lifeline_config_free(cfg);
    lifeline_links_config lc;
    lifeline_links_config_default(&lc);
    lc.dial_attempts = dial_attempts ? dial_attempts : 1;
    lc.refused_attempts = detect ? 1 : 3;
    lc.startup_grace_ns = grace_ms * 1000000ull;
    if (lifeline_links_new(me, SLOTS, &lc, 0, &links) != LIFELINE_OK) die("invalid link configuration");
    tcap = lifeline_node_max_frame(node);
    tbuf = malloc(tcap);
    if (!tbuf) die("out of memory");

    ep = epoll_create1(EPOLL_CLOEXEC);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&book[me], sizeof book[me]) != 0 || listen(lfd, 128) != 0)
        die("cannot listen on this rank's address");
    struct epoll_event le = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &le);
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    static int stdin_tag;
    struct epoll_event se = {.events = EPOLLIN, .data.ptr = &stdin_tag};
    bool have_stdin = epoll_ctl(ep, EPOLL_CTL_ADD, 0, &se) == 0;

    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &book[me].sin_addr, ip, sizeof ip);
    out_begin("listening");
    printf(",\"addr\":\"%s:%u\",\"pid\":%d,\"span\":%u,\"radix\":%u", ip, ntohs(book[me].sin_port), (int)getpid(),
           span, radix);
    out_end();
    drain();
    wire_up();

    int status = 0;
    while (!quitting) {
        uint64_t now = now_ns(), due = lifeline_node_poll_timeout(node), ld = lifeline_links_poll_timeout(links);
        if (ld < due) due = ld;
        if (view_lost_at < due) due = view_lost_at;
        for (struct conn *c = conns; c; c = c->next)
            if (c->st != OPEN && c->deadline < due) due = c->deadline;
        int ms = due == UINT64_MAX ? -1 : due <= now ? 0 : (int)((due - now + 999999) / 1000000);
        if (ms > 1000) ms = 1000;
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, ms);
        for (int i = 0; i < n && !quitting; i++) {
            void *p = evs[i].data.ptr;
            if (p == NULL) on_listener(lfd);
            else if (p == &stdin_tag) { if (!on_stdin()) quitting = true; }
            else on_conn(p, evs[i].events);
            if (evicted || left) break;
        }
        now = now_ns();
        if (lifeline_node_poll_timeout(node) <= now) {
            lifeline_node_handle_timeout(node, now);
            drain();
        }
        if (lifeline_links_poll_timeout(links) <= now) {
            lifeline_links_handle_timeout(links, now, node);
            apply_links();
        }
        for (struct conn *c = conns; c; c = c->next) {
            if (c->dead || c->st == OPEN || c->deadline > now) continue;
            if (c->dialed && c->st != CLOSING) dial_done(c, LIFELINE_DIAL_FAILED);
            else conn_close(c);
        }
        reap();
        if (!evicted && view_lost_at <= now_ns()) {
            out_begin("evicted");
            printf(",\"epoch\":null");
            out_end();
            evicted = true;
        }
        if (evicted) { status = 3; break; }
        if (left) break; /* a shrink target drained and was excluded: a clean exit */
        (void)have_stdin;
    }
    for (struct conn *c = conns; c; c = c->next) conn_close(c);
    reap();
    for (uint32_t r = 0; r < span; r++)
        for (uint32_t s = 0; s < SLOTS; s++) buf_free(&pending[r][s]);
    close(lfd);
    close(ep);
    free(tbuf);
    lifeline_links_free(links);
    lifeline_tcp_key_free(key);
    lifeline_node_free(node);
    return status;
}
