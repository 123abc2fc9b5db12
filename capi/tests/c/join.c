/* A join through the C API, in memory and virtual time (1 ms steps): three member nodes run,
 * a fourth process starts as a lifeline_joiner with two contacts (ranks 2 and 1: neither is the
 * coordinator, so its request is forwarded), its request and the contact's reply travel on a
 * "join connection" named by a conn id, it is admitted as rank 3 and builds its node from the
 * admission; every member reports LIFELINE_EVENT_JOINED once, with the same epoch and the
 * joiner's nonce and address; then an xcast from rank 0 and one from the joiner reach all four
 * exactly once. Exits non-zero with a message on any violation of the contract. */

#define N 3          /* members at the start */
#define R (N + 1)    /* ranks once the joiner is in */
#define QCAP 8192
#define JCAP 64
#define MS 1000000ull
#define TEST_NAME "join"
#include "harness.h"


/* Frames between ranks (FIFO; a frame to a rank whose process has not started waits). */

/* Join connections and the messages on them. */
typedef struct { int open; uint32_t contact, rank; uint64_t nonce; uint32_t seq; } jconn;
static jconn conns[JCAP];
static uint64_t n_conns;
typedef struct { int reply; uint64_t conn; size_t len; uint8_t *data; } jmsg;
static jmsg jq[JCAP];
static size_t jq_len;

static const uint32_t contact_rank[2] = {2, 1};
static const char joiner_addr[] = "joiner-3";

static lifeline_node *nodes[R];
static lifeline_joiner *joiner;
static lifeline_config *cfg;
static uint64_t now;
static uint8_t *txbuf;
static size_t txcap;
static uint8_t *jbuf; /* LIFELINE_MAX_JOIN_MSG bytes */

/* What each rank saw. */
static uint64_t joiner_nonce;
static uint32_t joiner_seq_sent;
static int admitted, retries;
static uint32_t admitted_rank = LIFELINE_NO_RANK;
static uint64_t admitted_epoch;
static int joined[R], link_to_joiner[R];
static uint64_t joined_epoch[R];
static uint32_t xorigin;
static int xdelivered[R][64], xcompleted[R][64];

static void send_join(int reply, uint64_t conn, const uint8_t *data, size_t len) {
  CHECK(jq_len < JCAP, "join queue full");
  jmsg *m = &jq[jq_len++];
  m->reply = reply;
  m->conn = conn;
  m->len = len;
  m->data = malloc(len);
  CHECK(m->data != NULL, "malloc");
  memcpy(m->data, data, len);
}

static void drain(uint32_t i);

static void on_event(uint32_t i, const lifeline_event *ev) {
  switch (ev->kind) {
  case LIFELINE_EVENT_JOINED:
    joined[i]++;
    joined_epoch[i] = ev->epoch;
    CHECK(ev->count == R, "rank %u: %llu members after the join", i, (unsigned long long)ev->count);
    CHECK(ev->joiners_len == 1 && ev->joiners != NULL, "rank %u: %zu joiners", i, ev->joiners_len);
    CHECK(ev->ranks == NULL && ev->ranks_len == 0, "rank %u: ranks set on JOINED", i);
    {
      const lifeline_admitted *a = &ev->joiners[0];
      CHECK(a->rank == N, "rank %u: joiner admitted as %u", i, a->rank);
      CHECK(a->nonce == joiner_nonce, "rank %u: nonce %llx, the joiner's is %llx", i,
            (unsigned long long)a->nonce, (unsigned long long)joiner_nonce);
      CHECK(a->seq >= 1 && a->seq <= joiner_seq_sent, "rank %u: seq %u", i, a->seq);
      CHECK(a->addr_len == strlen(joiner_addr) && memcmp(a->addr, joiner_addr, a->addr_len) == 0,
            "rank %u: joiner address", i);
    }
    link_to_joiner[i] = 1; /* the transport dials the new rank (after this drain) */
    break;
  case LIFELINE_EVENT_XCAST_DELIVERED:
    CHECK(ev->seq < 64, "seq %llu", (unsigned long long)ev->seq);
    if (ev->rank == xorigin) xdelivered[i][ev->seq]++;
    CHECK(ev->tag == LIFELINE_FIRST_APP_TAG, "tag %u", ev->tag);
    break;
  case LIFELINE_EVENT_XCAST_COMPLETED:
    CHECK(ev->seq < 64, "seq");
    xcompleted[i][ev->seq]++;
    break;
  case LIFELINE_EVENT_FAILURE_CONFIRMED:
  case LIFELINE_EVENT_EVICTED:
    CHECK(0, "rank %u: a removal (kind %u) in a run without faults", i, ev->kind);
    break;
  default:
    break; /* other and unknown kinds are ignorable */
  }
}

static void drain(uint32_t i) {
  lifeline_result r;
  net_send_all(nodes[i], i, R, txbuf, txcap);
  drain_events(nodes[i], i, on_event);
  uint64_t conn;
  size_t len;
  while ((r = lifeline_node_poll_join_reply(nodes[i], &conn, jbuf, LIFELINE_MAX_JOIN_MSG, &len)) ==
         LIFELINE_OK) {
    CHECK(conn < n_conns && conns[conn].open && conns[conn].rank == i,
          "rank %u answered join connection %llu, not its own", i, (unsigned long long)conn);
    send_join(1, conn, jbuf, len);
  }
  CHECK(r == LIFELINE_DONE, "poll_join_reply: %s", lifeline_strerror(r));
  if (link_to_joiner[i] == 1) {
    link_to_joiner[i] = 2;
    must(lifeline_node_handle_link_up(nodes[i], now, N), "link_up to the joiner");
    drain(i);
  }
}

/* The joiner was admitted: its node starts from the admission and learns its links. */
static void start_joined_node(void) {
  must(lifeline_node_new_from_admission(cfg, joiner, 100 + N, now, &nodes[N]), "node_from_admission");
  lifeline_joiner_free(joiner);
  joiner = NULL;
  uint64_t epoch = 0;
  uint32_t members = 0;
  must(lifeline_node_view(nodes[N], &epoch, &members), "view");
  CHECK(epoch == admitted_epoch && members == R, "joiner's view: epoch %llu, %u members",
        (unsigned long long)epoch, members);
  drain(N);
  for (uint32_t j = 0; j < N; j++) must(lifeline_node_handle_link_up(nodes[N], now, j), "link_up");
  drain(N);
}

static void drain_joiner(void) {
  if (!joiner) return;
  lifeline_join_transmit t;
  const lifeline_joiner_event *ev;
  lifeline_result r;
  while ((r = lifeline_joiner_poll_transmit(joiner, jbuf, LIFELINE_MAX_JOIN_MSG, &t)) == LIFELINE_OK) {
    CHECK(t.contact < 2, "contact index %u", t.contact);
    CHECK(n_conns < JCAP, "too many join connections");
    if (joiner_nonce == 0) joiner_nonce = t.nonce;
    CHECK(t.nonce == joiner_nonce, "the nonce changed between tries");
    joiner_seq_sent = t.seq;
    conns[n_conns] = (jconn){1, t.contact, contact_rank[t.contact], t.nonce, t.seq};
    send_join(0, n_conns, jbuf, t.len);
    n_conns++;
  }
  CHECK(r == LIFELINE_DONE, "joiner_poll_transmit: %s", lifeline_strerror(r));
  int start = 0;
  while ((r = lifeline_joiner_poll_event(joiner, &ev)) == LIFELINE_OK) {
    if (ev->kind == LIFELINE_JOINER_EVENT_ADMITTED) {
      CHECK(!admitted, "admitted twice");
      admitted = 1;
      admitted_rank = ev->rank;
      admitted_epoch = ev->epoch;
      CHECK(ev->nonce == joiner_nonce, "admission for nonce %llx", (unsigned long long)ev->nonce);
      CHECK(ev->span == R, "admission's span %u", ev->span);
      start = 1;
    } else if (ev->kind == LIFELINE_JOINER_EVENT_RETRYING) {
      retries++;
      CHECK(ev->next_contact < 2, "next contact %u", ev->next_contact);
    }
  }
  CHECK(r == LIFELINE_DONE, "joiner_poll_event: %s", lifeline_strerror(r));
  if (start) start_joined_node();
}

/* One millisecond of virtual time: deliver what is in flight, fire due timers, drain. */
static void step(void) {
  now += MS;
  size_t n = q_len;
  for (size_t k = 0; k < n; k++) {
    msg m = net_pop();
    if (!nodes[m.to]) { /* not started yet: the frame waits (a listening socket's backlog) */
      net_requeue(m);
      continue;
    }
    must(lifeline_node_handle_frame(nodes[m.to], now, m.from, m.data, m.len), "handle_frame");
    free(m.data);
  }
  size_t jn = jq_len;
  jmsg in[JCAP];
  memcpy(in, jq, jn * sizeof *jq);
  jq_len = 0;
  for (size_t k = 0; k < jn; k++) {
    jconn *c = &conns[in[k].conn];
    if (!in[k].reply) {
      must(lifeline_node_handle_join_request(nodes[c->rank], now, in[k].conn, in[k].data, in[k].len),
           "handle_join_request");
      drain(c->rank);
    } else {
      c->open = 0; /* one answer per request: the connection closes after it */
      if (joiner) {
        must(lifeline_joiner_handle_reply(joiner, now, c->contact, in[k].data, in[k].len),
             "joiner_handle_reply");
        drain_joiner();
      }
    }
    free(in[k].data);
  }
  for (uint32_t i = 0; i < R; i++) {
    if (!nodes[i]) continue;
    uint64_t at = lifeline_node_poll_timeout(nodes[i]);
    if (at != LIFELINE_NEVER && at <= now) must(lifeline_node_handle_timeout(nodes[i], now), "timeout");
  }
  if (joiner) {
    uint64_t at = lifeline_joiner_poll_timeout(joiner);
    if (at != LIFELINE_NEVER && at <= now) must(lifeline_joiner_handle_timeout(joiner, now), "joiner timeout");
    drain_joiner();
  }
  for (uint32_t i = 0; i < R; i++)
    if (nodes[i]) drain(i);
}

static void run_until(int (*done)(void), int max_ms, const char *what) {
  for (int s = 0; s < max_ms; s++) {
    if (done()) return;
    step();
  }
  CHECK(done(), "%s did not happen within %d ms", what, max_ms);
}

static uint64_t seq0, seq3;
static int join_done(void) {
  if (!admitted || !nodes[N]) return 0;
  for (uint32_t i = 0; i < N; i++)
    if (!joined[i]) return 0;
  return 1;
}
static int xcast0_done(void) { return xcompleted[0][seq0] > 0; }
static int xcast3_done(void) { return xcompleted[N][seq3] > 0; }

static void check_xcast_everywhere(uint64_t seq, const char *what) {
  for (uint32_t i = 0; i < R; i++)
    CHECK(xdelivered[i][seq] == 1, "%s: rank %u delivered it %d times", what, i, xdelivered[i][seq]);
  CHECK(xcompleted[xorigin][seq] == 1, "%s: completed %d times", what, xcompleted[xorigin][seq]);
}

int main(void) {
  CHECK(lifeline_abi_version() == LIFELINE_ABI_VERSION, "ABI version mismatch");
  cfg = lifeline_config_new(N, 2);
  CHECK(cfg != NULL, "config_new");
  must(lifeline_config_set(cfg, "xcast_retry_ns", 20 * MS), "set xcast_retry_ns");
  must(lifeline_config_set(cfg, "join_batch_ns", 5 * MS), "set join_batch_ns");
  must(lifeline_config_set(cfg, "join_timeout_ns", 2000 * MS), "set join_timeout_ns");
  must(lifeline_config_set(cfg, "detect_join_grace_ns", 500 * MS), "set detect_join_grace_ns");
  for (uint32_t i = 0; i < N; i++) must(lifeline_node_new(cfg, i, 100 + i, now, &nodes[i]), "node_new");
  txcap = lifeline_node_max_frame(nodes[0]);
  txbuf = malloc(txcap);
  jbuf = malloc(LIFELINE_MAX_JOIN_MSG);
  CHECK(txbuf != NULL && jbuf != NULL, "malloc");
  for (uint32_t i = 0; i < N; i++) drain(i);
  for (uint32_t i = 0; i < N; i++)
    for (uint32_t j = 0; j < N; j++)
      if (i != j) must(lifeline_node_handle_link_up(nodes[i], now, j), "link_up");
  for (uint32_t i = 0; i < N; i++) drain(i);
  for (int s = 0; s < 20; s++) step();

  /* 1. The joiner asks contact index 4 % 2 = 0 (rank 2); it is admitted as rank 3. */
  lifeline_joiner_config jc;
  must(lifeline_joiner_config_default(&jc), "joiner_config_default");
  jc.attempt_timeout_ns = 3000 * MS;
  must(lifeline_joiner_new(2, (const uint8_t *)joiner_addr, strlen(joiner_addr), &jc, 4, now, &joiner),
       "joiner_new");
  drain_joiner();
  CHECK(n_conns == 1 && conns[0].rank == 2, "first request to rank %u", conns[0].rank);
  run_until(join_done, 3000, "the admission at the joiner and every member");
  CHECK(admitted_rank == N, "admitted as rank %u", admitted_rank);
  CHECK(retries == 0, "%d retries in a run without faults", retries);
  for (uint32_t i = 0; i < N; i++) {
    CHECK(joined[i] == 1, "rank %u reported JOINED %d times", i, joined[i]);
    CHECK(joined_epoch[i] == admitted_epoch, "rank %u: JOINED at epoch %llu, admission at %llu", i,
          (unsigned long long)joined_epoch[i], (unsigned long long)admitted_epoch);
    uint64_t epoch = 0;
    uint32_t members = 0;
    must(lifeline_node_view(nodes[i], &epoch, &members), "view");
    CHECK(epoch == admitted_epoch && members == R, "rank %u view: epoch %llu, %u members", i,
          (unsigned long long)epoch, members);
    bool alive = false;
    must(lifeline_node_is_alive(nodes[i], N, &alive), "is_alive");
    CHECK(alive, "rank %u does not count the joiner alive", i);
  }
  for (int s = 0; s < 100; s++) step(); /* the joiner greets its parent; late duplicates show */
  for (uint32_t i = 0; i < N; i++) CHECK(joined[i] == 1, "rank %u: JOINED again", i);

  lifeline_stats st;
  must(lifeline_node_stats(nodes[0], &st, sizeof st), "stats");
  CHECK(st.joins_admitted == 1 && st.join_views == 1, "coordinator: %llu admitted in %llu views",
        (unsigned long long)st.joins_admitted, (unsigned long long)st.join_views);
  CHECK(st.join_forwards_in == 1, "coordinator: %llu forwards in", (unsigned long long)st.join_forwards_in);
  must(lifeline_node_stats(nodes[2], &st, sizeof st), "stats");
  CHECK(st.join_requests_in == 1 && st.join_forwards_out == 1 && st.join_accepts_sent == 1,
        "contact: %llu requests, %llu forwarded, %llu accepts", (unsigned long long)st.join_requests_in,
        (unsigned long long)st.join_forwards_out, (unsigned long long)st.join_accepts_sent);
  CHECK(st.join_requests_malformed == 0 && st.join_retries_sent == 0, "contact: malformed or retries");

  /* 2. A broadcast from rank 0 reaches the joiner, exactly once everywhere. */
  xorigin = 0;
  must(lifeline_node_xcast(nodes[0], now, LIFELINE_FIRST_APP_TAG, (const uint8_t *)"welcome", 7, &seq0),
       "xcast");
  CHECK(seq0 < 64, "seq0");
  drain(0);
  run_until(xcast0_done, 3000, "the xcast from rank 0");
  for (int s = 0; s < 100; s++) step();
  check_xcast_everywhere(seq0, "xcast from rank 0");

  /* 3. The joiner broadcasts too. */
  xorigin = N;
  memset(xdelivered, 0, sizeof xdelivered);
  must(lifeline_node_xcast(nodes[N], now, LIFELINE_FIRST_APP_TAG, (const uint8_t *)"hi", 2, &seq3),
       "xcast from the joiner");
  CHECK(seq3 < 64, "seq3");
  drain(N);
  run_until(xcast3_done, 3000, "the xcast from the joiner");
  for (int s = 0; s < 100; s++) step();
  check_xcast_everywhere(seq3, "xcast from the joiner");

  for (uint32_t i = 0; i < R; i++) {
    must(lifeline_node_stats(nodes[i], &st, sizeof st), "stats");
    CHECK(st.dropped_decode_error == 0 && st.dropped_unknown_peer == 0,
          "rank %u dropped frames (decode %llu, unknown peer %llu)", i,
          (unsigned long long)st.dropped_decode_error, (unsigned long long)st.dropped_unknown_peer);
  }
  for (uint32_t i = 0; i < R; i++) lifeline_node_free(nodes[i]);
  lifeline_joiner_free(joiner); /* NULL by now: a no-op */
  lifeline_config_free(cfg);
  net_clear();
  for (size_t k = 0; k < jq_len; k++) free(jq[k].data);
  free(txbuf);
  free(jbuf);
  printf("join: ok\n");
  return 0;
}
