/* The revoke flood through the C API: twelve nodes over an in-memory FIFO network in virtual
 * time (1 ms steps), every pair linked. Rank 5 has crashed unnoticed (frames to it are lost,
 * nobody is told) when rank 3 revokes group 42 at epoch 7. Checked: every live rank gets
 * exactly one LIFELINE_EVENT_REVOKED (seq = group, epoch, rank = origin; count = hops, 0 at
 * the origin only); a repeat is LIFELINE_OK and changes nothing; an older epoch is
 * LIFELINE_ERR_REVOKE_STALE; a newer one is a new revoke; NULL is LIFELINE_ERR_NULL; the
 * revoke counters moved; the config key revoke_max_groups reads, writes, and refuses 0.
 * Exits non-zero with a message on any violation of the contract. */
#define N 12
#define QCAP 8192
#define MS 1000000ull
#define ORIGIN 3u
#define CRASHED 5u
#define TEST_NAME "revoke"
#include "harness.h"

static lifeline_node *nodes[N];
static int crashed[N];
static uint64_t now;
static uint8_t *txbuf;
static size_t txcap;

static int revoked[N][2]; /* per rank: REVOKED events for epoch 7, epoch 8 */
static int others;

static void on_event(uint32_t i, const lifeline_event *ev) {
  if (ev->kind != LIFELINE_EVENT_REVOKED) return; /* other kinds are ignorable */
  CHECK(ev->seq == 42 && ev->rank == ORIGIN, "rank %u: revoked group %llu from %u", i,
        (unsigned long long)ev->seq, ev->rank);
  CHECK(ev->epoch == 7 || ev->epoch == 8, "rank %u: revoked epoch %llu", i,
        (unsigned long long)ev->epoch);
  CHECK((ev->count == 0) == (i == ORIGIN), "rank %u: %llu hops", i, (unsigned long long)ev->count);
  CHECK(ev->payload == NULL && ev->ranks == NULL, "rank %u: a revoke with a payload or ranks", i);
  revoked[i][ev->epoch - 7]++;
}

static void drain(uint32_t i) {
  if (crashed[i]) return;
  net_send_all(nodes[i], i, N, txbuf, txcap);
  drain_events(nodes[i], i, on_event);
}

/* One millisecond of virtual time: deliver frames (a crashed rank's are lost), fire due
 * timers, drain. */
static void step(void) {
  now += MS;
  size_t n = q_len;
  for (size_t k = 0; k < n; k++) {
    msg m = net_pop();
    if (!crashed[m.to])
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

int main(void) {
  CHECK(lifeline_abi_version() == LIFELINE_ABI_VERSION, "ABI version mismatch");
  lifeline_config *cfg = lifeline_config_new(N, 4);
  CHECK(cfg != NULL, "config_new");
  uint64_t v = 0;
  must(lifeline_config_get(cfg, "revoke_max_groups", &v), "get revoke_max_groups");
  CHECK(v == 1024, "revoke_max_groups %llu", (unsigned long long)v);
  must(lifeline_config_set(cfg, "revoke_max_groups", 16), "set revoke_max_groups");
  lifeline_node *bad = NULL;
  must(lifeline_config_set(cfg, "revoke_max_groups", 0), "set revoke_max_groups 0");
  EXPECT(lifeline_node_new(cfg, 0, 1, 0, &bad), LIFELINE_ERR_INVALID_CONFIG);
  must(lifeline_config_set(cfg, "revoke_max_groups", 16), "set revoke_max_groups");
  for (uint32_t i = 0; i < N; i++) must(lifeline_node_new(cfg, i, 100 + i, now, &nodes[i]), "node_new");
  lifeline_config_free(cfg);
  txcap = lifeline_node_max_frame(nodes[0]);
  txbuf = malloc(txcap);
  CHECK(txbuf != NULL, "malloc");
  for (uint32_t i = 0; i < N; i++) drain(i);
  for (uint32_t i = 0; i < N; i++)
    for (uint32_t j = 0; j < N; j++)
      if (i != j) must(lifeline_node_handle_link_up(nodes[i], now, j), "link_up");
  for (uint32_t i = 0; i < N; i++) drain(i);
  for (int s = 0; s < 20; s++) step();

  crashed[CRASHED] = 1; /* unnoticed: no link down, no timeout reaches anyone within the test */
  EXPECT(lifeline_node_revoke(NULL, now, 42, 7), LIFELINE_ERR_NULL);
  must(lifeline_node_revoke(nodes[ORIGIN], now, 42, 7), "revoke");
  drain(ORIGIN);
  CHECK(revoked[ORIGIN][0] == 1, "the origin's own event is not immediate");
  for (int s = 0; s < 20; s++) step();
  for (uint32_t i = 0; i < N; i++)
    CHECK(revoked[i][0] == (crashed[i] ? 0 : 1), "rank %u: %d REVOKED", i, revoked[i][0]);

  /* Idempotent; stale refused; a newer epoch is a new revoke. */
  must(lifeline_node_revoke(nodes[ORIGIN], now, 42, 7), "revoke again");
  drain(ORIGIN);
  CHECK(q_len == 0, "a repeated revoke sent %zu frames", q_len);
  EXPECT(lifeline_node_revoke(nodes[ORIGIN], now, 42, 6), LIFELINE_ERR_REVOKE_STALE);
  must(lifeline_node_revoke(nodes[ORIGIN], now, 42, 8), "revoke epoch 8");
  drain(ORIGIN);
  for (int s = 0; s < 20; s++) step();
  lifeline_stats st;
  for (uint32_t i = 0; i < N; i++) {
    if (crashed[i]) continue;
    CHECK(revoked[i][0] == 1 && revoked[i][1] == 1, "rank %u: REVOKED %d, %d times", i,
          revoked[i][0], revoked[i][1]);
    must(lifeline_node_stats(nodes[i], &st, sizeof st), "stats");
    CHECK(st.revoke_delivered == 2, "rank %u: revoke_delivered %llu", i,
          (unsigned long long)st.revoke_delivered);
    CHECK(st.revoke_started == (i == ORIGIN ? 2 : 0), "rank %u: revoke_started %llu", i,
          (unsigned long long)st.revoke_started);
    CHECK(st.revoke_forwarded > 0, "rank %u forwarded nothing", i);
    others += (int)st.revoke_duplicates;
  }
  CHECK(others > 0, "no duplicate notice anywhere: the flood did not overlap");

  for (uint32_t i = 0; i < N; i++) lifeline_node_free(nodes[i]);
  net_clear();
  free(txbuf);
  printf("revoke: ok (%d duplicate notices dropped over two floods)\n", others);
  return 0;
}
