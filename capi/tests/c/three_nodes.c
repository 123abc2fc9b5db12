/* Three nodes over an in-memory FIFO network in virtual time (1 ms steps): an xcast, a RELM
 * message, then a crash of rank 2 and a later xcast among the survivors. Exits non-zero with a
 * message on any violation of the contract. */

#define N 3
#define QCAP 8192
#define MS 1000000ull
#define TEST_NAME "three_nodes"
#include "harness.h"


static lifeline_node *nodes[N];
static int crashed[N];
static uint64_t now;
static uint8_t *txbuf;
static size_t txcap;

/* What each rank saw. */
static int xdelivered[N][64]; /* by the origin's seq, for origin `xorigin` */
static uint32_t xorigin;
static int xcompleted[N][64];
static int relm_delivered[N], relm_acked[N];
static uint32_t relm_uid_acked[N];
static int failures[N];
static uint32_t failed_rank[N];
static char last_payload[N][64];

static void drain(uint32_t i) {
  lifeline_transmit t;
  const lifeline_event *ev;
  lifeline_result r;
  while ((r = lifeline_node_poll_transmit(nodes[i], txbuf, txcap, &t)) == LIFELINE_OK) {
    size_t total = 0;
    must(lifeline_node_frame_len(nodes[i], txbuf, t.len, &total), "frame_len");
    CHECK(total == t.len, "frame_len %zu != transmit length %zu", total, t.len);
    CHECK(t.to < N && t.to != i, "transmit from %u to bad rank %u", i, t.to);
    CHECK(t.traffic_class == LIFELINE_CLASS_CONTROL || t.traffic_class == LIFELINE_CLASS_DATA,
          "bad traffic class %u", t.traffic_class);
    if (crashed[i] || crashed[t.to]) continue;
    net_push(i, t.to, txbuf, t.len);
  }
  CHECK(r == LIFELINE_DONE, "poll_transmit: %s", lifeline_strerror(r));
  while ((r = lifeline_node_poll_event(nodes[i], &ev)) == LIFELINE_OK) {
    switch (ev->kind) {
    case LIFELINE_EVENT_XCAST_DELIVERED:
      if (getenv("TRACE")) fprintf(stderr, "t=%llu rank %u delivered origin %u seq %llu op %llu tag %u\n", (unsigned long long)(now / MS), i, ev->rank, (unsigned long long)ev->seq, (unsigned long long)ev->op, ev->tag);
      CHECK(ev->seq < 64, "seq %llu", (unsigned long long)ev->seq);
      if (ev->rank == xorigin) xdelivered[i][ev->seq]++;
      CHECK(ev->payload_len < sizeof last_payload[i], "payload too long");
      memcpy(last_payload[i], ev->payload, ev->payload_len);
      last_payload[i][ev->payload_len] = 0;
      CHECK(ev->tag == LIFELINE_FIRST_APP_TAG, "tag %u", ev->tag);
      break;
    case LIFELINE_EVENT_XCAST_COMPLETED:
      CHECK(ev->seq < 64, "seq");
      xcompleted[i][ev->seq]++;
      break;
    case LIFELINE_EVENT_RELM_DELIVERED:
      relm_delivered[i]++;
      CHECK(ev->rank == 1 && ev->tag == 7, "relm from %u tag %u", ev->rank, ev->tag);
      CHECK(ev->payload_len == 4 && memcmp(ev->payload, "ping", 4) == 0, "relm payload");
      break;
    case LIFELINE_EVENT_RELM_ACKED:
      relm_acked[i]++;
      relm_uid_acked[i] = ev->uid;
      CHECK(ev->rank == 2, "relm acked by %u", ev->rank);
      break;
    case LIFELINE_EVENT_FAILURE_CONFIRMED:
      failures[i]++;
      CHECK(ev->ranks_len == 1 && ev->ranks != NULL && ev->causes != NULL, "failure ranks");
      failed_rank[i] = ev->ranks[0];
      CHECK(ev->epoch >= 1 && ev->count == 2, "epoch %llu members %llu",
            (unsigned long long)ev->epoch, (unsigned long long)ev->count);
      break;
    default:
      break; /* other and unknown kinds are ignorable */
    }
  }
  CHECK(r == LIFELINE_DONE, "poll_event: %s", lifeline_strerror(r));
}

/* One millisecond of virtual time: deliver what is in flight, fire due timers, drain. */
static void step(void) {
  now += MS;
  size_t n = q_len;
  for (size_t k = 0; k < n; k++) {
    msg m = net_pop();
    if (!crashed[m.to] && !crashed[m.from])
      must(lifeline_node_handle_frame(nodes[m.to], now, m.from, m.data, m.len), "handle_frame");
    free(m.data);
  }
  for (uint32_t i = 0; i < N; i++) {
    if (crashed[i]) continue;
    uint64_t at = lifeline_node_poll_timeout(nodes[i]);
    if (at != LIFELINE_NEVER && at <= now) must(lifeline_node_handle_timeout(nodes[i], now), "timeout");
  }
  for (uint32_t i = 0; i < N; i++) drain(i);
}

static void run_until(int (*done)(void), int max_ms, const char *what) {
  for (int s = 0; s < max_ms; s++) {
    if (done()) return;
    step();
  }
  CHECK(done(), "%s did not happen within %d ms", what, max_ms);
}

static uint64_t seq1, seq2;
static uint32_t uid;
static int xcast1_done(void) { return xcompleted[2][seq1] > 0; }
static int relm_done(void) { return relm_acked[1] > 0; }
static int failure_done(void) { return failures[0] > 0 && failures[1] > 0; }
static int xcast2_done(void) { return xcompleted[1][seq2] > 0; }

int main(void) {
  CHECK(lifeline_abi_version() == LIFELINE_ABI_VERSION, "ABI version mismatch");
  lifeline_config *cfg = lifeline_config_new(N, 2);
  CHECK(cfg != NULL, "config_new");
  must(lifeline_config_set(cfg, "xcast_retry_ns", 20 * MS), "set xcast_retry_ns");
  for (uint32_t i = 0; i < N; i++) must(lifeline_node_new(cfg, i, 100 + i, now, &nodes[i]), "node_new");
  lifeline_config_free(cfg); /* nodes copied it */
  txcap = lifeline_node_max_frame(nodes[0]);
  CHECK(txcap >= 256, "max_frame %zu", txcap);
  txbuf = malloc(txcap);
  CHECK(txbuf != NULL, "malloc");
  for (uint32_t i = 0; i < N; i++) drain(i);
  for (uint32_t i = 0; i < N; i++)
    for (uint32_t j = 0; j < N; j++)
      if (i != j) must(lifeline_node_handle_link_up(nodes[i], now, j), "link_up");
  for (uint32_t i = 0; i < N; i++) drain(i);

  /* 1. An xcast from rank 2: delivered once everywhere, completed once at the origin. */
  xorigin = 2;
  must(lifeline_node_xcast(nodes[2], now, LIFELINE_FIRST_APP_TAG, (const uint8_t *)"hello", 5, &seq1),
       "xcast");
  CHECK(seq1 < 64, "seq1");
  drain(2);
  run_until(xcast1_done, 2000, "xcast completion");
  for (int s = 0; s < 100; s++) step(); /* let duplicates show up if any */
  for (uint32_t i = 0; i < N; i++) {
    CHECK(xdelivered[i][seq1] == 1, "rank %u delivered the xcast %d times", i, xdelivered[i][seq1]);
    CHECK(strcmp(last_payload[i], "hello") == 0, "rank %u payload '%s'", i, last_payload[i]);
  }
  CHECK(xcompleted[2][seq1] == 1, "completed %d times", xcompleted[2][seq1]);

  /* 2. RELM 1 -> 2: delivered once and acknowledged. */
  must(lifeline_node_relm_send(nodes[1], now, 2, 7, (const uint8_t *)"ping", 4, &uid), "relm_send");
  drain(1);
  run_until(relm_done, 2000, "relm ack");
  for (int s = 0; s < 100; s++) step();
  CHECK(relm_delivered[2] == 1, "relm delivered %d times", relm_delivered[2]);
  CHECK(relm_acked[1] == 1 && relm_uid_acked[1] == uid, "relm acked %d (uid %u, sent %u)",
        relm_acked[1], relm_uid_acked[1], uid);

  /* 3. Rank 2 crashes: nothing more to or from it; its neighbours see the links go. */
  crashed[2] = 1;
  must(lifeline_node_handle_link_down(nodes[0], now, 2, LIFELINE_LINK_REFUSED), "link_down");
  must(lifeline_node_handle_link_down(nodes[1], now, 2, LIFELINE_LINK_RESET), "link_down");
  drain(0);
  drain(1);
  run_until(failure_done, 3000, "failure confirmation at the survivors");
  for (uint32_t i = 0; i < 2; i++) {
    bool alive = true;
    must(lifeline_node_is_alive(nodes[i], 2, &alive), "is_alive");
    CHECK(!alive, "rank %u still thinks rank 2 is alive", i);
    CHECK(failures[i] == 1 && failed_rank[i] == 2, "rank %u: %d failures, rank %u", i, failures[i],
          failed_rank[i]);
    uint64_t epoch = 0;
    uint32_t members = 0, removed[4];
    size_t nrem = 0;
    must(lifeline_node_view(nodes[i], &epoch, &members), "view");
    must(lifeline_node_view_removed(nodes[i], removed, 4, &nrem), "view_removed");
    CHECK(epoch >= 1 && members == 2 && nrem == 1 && removed[0] == 2, "rank %u view", i);
  }

  /* 4. A later xcast from rank 1 reaches every survivor exactly once. */
  xorigin = 1; /* count deliveries afresh: seq numbers are per origin */
  memset(xdelivered, 0, sizeof xdelivered);
  must(lifeline_node_xcast(nodes[1], now, LIFELINE_FIRST_APP_TAG, (const uint8_t *)"after", 5, &seq2),
       "xcast");
  CHECK(seq2 < 64, "seq2");
  drain(1);
  run_until(xcast2_done, 3000, "xcast completion after the crash");
  for (int s = 0; s < 100; s++) step();
  for (uint32_t i = 0; i < 2; i++) {
    CHECK(xdelivered[i][seq2] == 1, "rank %u delivered the second xcast %d times", i,
          xdelivered[i][seq2]);
    CHECK(strcmp(last_payload[i], "after") == 0, "rank %u payload '%s'", i, last_payload[i]);
  }
  CHECK(xcompleted[1][seq2] == 1, "second xcast completed %d times", xcompleted[1][seq2]);

  lifeline_stats st;
  for (uint32_t i = 0; i < N; i++) {
    must(lifeline_node_stats(nodes[i], &st, sizeof st), "stats");
    CHECK(st.frames_in > 0 && st.frames_out > 0, "rank %u counted no frames", i);
    CHECK(st.dropped_decode_error == 0, "rank %u dropped frames", i);
  }
  for (uint32_t i = 0; i < N; i++) lifeline_node_free(nodes[i]);
  net_clear();
  free(txbuf);
  printf("three_nodes: ok\n");
  return 0;
}
