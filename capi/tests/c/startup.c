/* Start-up from check-ins (membership_check_in): four nodes over an in-memory FIFO network in
 * virtual time (1 ms steps). Every rank sees every rank check in, then exactly one
 * LIFELINE_EVENT_READY, at the same epoch everywhere, with four members; the view agrees and
 * the start-up counters moved. Exits non-zero with a message on any violation. */

#define N 4
#define QCAP 4096
#define MS 1000000ull
#define TEST_NAME "startup"
#include "harness.h"


static lifeline_node *nodes[N];
static uint64_t now;
static uint8_t *txbuf;
static size_t txcap;

/* What each rank saw. */
static int checked_in[N][N]; /* [observer][rank]: times `rank` was reported checked in */
static int ready[N], incomplete[N];
static uint64_t ready_epoch[N], ready_members[N];

static void drain(uint32_t i) {
  const lifeline_event *ev;
  lifeline_result r;
  net_send_all(nodes[i], i, N, txbuf, txcap);
  while ((r = lifeline_node_poll_event(nodes[i], &ev)) == LIFELINE_OK) {
    switch (ev->kind) {
    case LIFELINE_EVENT_CHECKED_IN:
      CHECK(ev->ranks_len >= 1 && ev->ranks != NULL && ev->causes == NULL,
            "rank %u: checked-in ranks", i);
      CHECK(ev->epoch >= 1 && ev->count >= ev->ranks_len && ev->count <= N,
            "rank %u: checked in at epoch %llu with %llu members", i,
            (unsigned long long)ev->epoch, (unsigned long long)ev->count);
      CHECK(ready[i] == 0, "rank %u: a check-in after READY", i);
      for (size_t k = 0; k < ev->ranks_len; k++) {
        CHECK(ev->ranks[k] < N, "checked-in rank %u", ev->ranks[k]);
        checked_in[i][ev->ranks[k]]++;
      }
      break;
    case LIFELINE_EVENT_READY:
      ready[i]++;
      ready_epoch[i] = ev->epoch;
      ready_members[i] = ev->count;
      CHECK(ev->ranks_len == 0 && ev->ranks == NULL, "rank %u: READY with ranks", i);
      break;
    case LIFELINE_EVENT_STARTUP_INCOMPLETE:
      incomplete[i]++;
      break;
    case LIFELINE_EVENT_FAILURE_CONFIRMED:
      CHECK(0, "rank %u: a removal during a complete start-up", i);
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
    must(lifeline_node_handle_frame(nodes[m.to], now, m.from, m.data, m.len), "handle_frame");
    free(m.data);
  }
  for (uint32_t i = 0; i < N; i++) {
    uint64_t at = lifeline_node_poll_timeout(nodes[i]);
    if (at != LIFELINE_NEVER && at <= now) must(lifeline_node_handle_timeout(nodes[i], now), "timeout");
  }
  for (uint32_t i = 0; i < N; i++) drain(i);
}

static int all_ready(void) {
  for (uint32_t i = 0; i < N; i++)
    if (!ready[i]) return 0;
  return 1;
}

int main(void) {
  CHECK(lifeline_abi_version() == LIFELINE_ABI_VERSION, "ABI version mismatch");
  lifeline_config *cfg = lifeline_config_new(N, 2);
  CHECK(cfg != NULL, "config_new");
  uint64_t v = 1;
  must(lifeline_config_get(cfg, "membership_check_in", &v), "get membership_check_in");
  CHECK(v == 0, "check-ins are off by default (%llu)", (unsigned long long)v);
  must(lifeline_config_set(cfg, "membership_check_in", 1), "set membership_check_in");
  must(lifeline_config_set(cfg, "membership_check_in_batch_ns", 5 * MS), "set batch");
  must(lifeline_config_set(cfg, "membership_check_in_resend_ns", 50 * MS), "set resend");
  must(lifeline_config_set(cfg, "membership_startup_timeout_ns", 2000 * MS), "set timeout");
  CHECK(lifeline_config_set(cfg, "membership_check_in", 2) == LIFELINE_ERR_INVALID_CONFIG,
        "membership_check_in takes 0 or 1");
  for (uint32_t i = 0; i < N; i++) must(lifeline_node_new(cfg, i, 100 + i, now, &nodes[i]), "node_new");
  lifeline_config_free(cfg); /* nodes copied it */
  txcap = lifeline_node_max_frame(nodes[0]);
  txbuf = malloc(txcap);
  CHECK(txbuf != NULL, "malloc");
  for (uint32_t i = 0; i < N; i++) drain(i);
  for (uint32_t i = 0; i < N; i++)
    for (uint32_t j = 0; j < N; j++)
      if (i != j) must(lifeline_node_handle_link_up(nodes[i], now, j), "link_up");
  for (uint32_t i = 0; i < N; i++) drain(i);

  for (int s = 0; s < 1000 && !all_ready(); s++) step();
  CHECK(all_ready(), "not every rank was READY within 1000 ms");
  for (int s = 0; s < 200; s++) step(); /* let duplicates show up if any */

  for (uint32_t i = 0; i < N; i++) {
    CHECK(ready[i] == 1, "rank %u: READY %d times", i, ready[i]);
    CHECK(incomplete[i] == 0, "rank %u: STARTUP_INCOMPLETE", i);
    CHECK(ready_epoch[i] == ready_epoch[0], "rank %u: READY at epoch %llu, rank 0 at %llu", i,
          (unsigned long long)ready_epoch[i], (unsigned long long)ready_epoch[0]);
    CHECK(ready_members[i] == N, "rank %u: %llu members at READY", i,
          (unsigned long long)ready_members[i]);
    for (uint32_t r = 0; r < N; r++)
      CHECK(checked_in[i][r] == 1, "rank %u saw rank %u check in %d times", i, r, checked_in[i][r]);
    uint64_t epoch = 0;
    uint32_t members = 0;
    must(lifeline_node_view(nodes[i], &epoch, &members), "view");
    CHECK(epoch == ready_epoch[i] && members == N, "rank %u view: epoch %llu members %u", i,
          (unsigned long long)epoch, members);
    lifeline_stats st;
    must(lifeline_node_stats(nodes[i], &st, sizeof st), "stats");
    CHECK(st.startup_check_ins_out >= 1 && st.startup_check_in_notices >= 1,
          "rank %u: start-up counters", i);
    CHECK(st.startup_never_joined_removed == 0, "rank %u: never-joined removals", i);
  }
  lifeline_stats st0;
  must(lifeline_node_stats(nodes[0], &st0, sizeof st0), "stats");
  CHECK(st0.startup_check_ins_in >= N - 1 && st0.startup_check_in_views >= 1,
        "the coordinator's start-up counters");

  for (uint32_t i = 0; i < N; i++) lifeline_node_free(nodes[i]);
  net_clear();
  free(txbuf);
  printf("startup: ok\n");
  return 0;
}
