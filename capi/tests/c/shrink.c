/* A shrink campaign through the C API: eight nodes (radix 2: 0 -> 1,2; 1 -> 3,4; 2 -> 5,6;
 * 3 -> 7) over an in-memory FIFO network in virtual time (1 ms steps). Rank 5 (not the
 * coordinator, so its request is forwarded) shrinks ranks 3 and 6 (3 has a child, 7, which the
 * repair moves). Checked: the requester gets exactly one LIFELINE_EVENT_CAMPAIGN_COMPLETED
 * with its id and both targets; every survivor exactly one LIFELINE_EVENT_DEPARTED naming
 * both, cause LIFELINE_CAUSE_LEFT, the campaign id, at the same epoch; each target exactly one
 * LIFELINE_EVENT_LEFT; nobody a failure; a target's commands return LIFELINE_ERR_LEAVING while
 * it leaves and LIFELINE_ERR_DEAD once it left; bad shrink requests return their typed errors
 * (a second campaign past membership_shrink_max_pending = 1 is LIFELINE_ERR_SHRINK_BUSY); the
 * shrink counters moved; afterwards an xcast reaches the six survivors exactly once.
 *
 * The network plays the adapter: a survivor that polls DEPARTED closes its connections to the
 * departed ranks (they see LIFELINE_LINK_CLOSED one step later: their lifeline is gone), and a
 * target that polls LEFT exits (frames to it are dropped, its peers see their links close).
 * Exits non-zero with a message on any violation of the contract. */

#define N 8
#define QCAP 8192
#define LCAP 256
#define MS 1000000ull
#define REQUESTER 5u
#define TEST_NAME "shrink"
#include "harness.h"
#include "links_net.h"

static const uint32_t targets[2] = {3, 6};


/* What each rank saw. */
static uint64_t campaign;
static int completed, failed, failures;
static uint64_t completed_epoch, requested_at, completed_at, left_at[N];
static int departed[N], left[N], leaving_checked[N];
static uint64_t departed_epoch[N];
static uint32_t xorigin = LIFELINE_NO_RANK;
static uint64_t xseq;
static int xdelivered[N], xcompleted;

static int is_target(uint32_t r) { return r == targets[0] || r == targets[1]; }


static void on_event(uint32_t i, const lifeline_event *ev) {
  switch (ev->kind) {
  case LIFELINE_EVENT_DEPARTED:
    if (is_target(i)) break; /* a target may see its own exclusion; it leaves right after */
    departed[i]++;
    departed_epoch[i] = ev->epoch;
    CHECK(ev->ranks_len == 2 && ev->ranks != NULL && ev->causes != NULL,
          "rank %u: %zu departed ranks", i, ev->ranks_len);
    for (size_t k = 0; k < 2; k++) {
      CHECK(ev->ranks[k] == targets[k], "rank %u: departed[%zu] = %u", i, k, ev->ranks[k]);
      CHECK(ev->causes[k] == LIFELINE_CAUSE_LEFT, "rank %u: cause %u", i, ev->causes[k]);
    }
    CHECK(ev->campaigns_len == 1 && ev->campaigns != NULL && ev->campaigns[0] == campaign,
          "rank %u: the departure's campaigns", i);
    CHECK(ev->count == N - 2, "rank %u: %llu members after the departure", i,
          (unsigned long long)ev->count);
    for (size_t k = 0; k < ev->ranks_len; k++) close_link(i, ev->ranks[k]);
    break;
  case LIFELINE_EVENT_LEFT:
    CHECK(is_target(i), "rank %u left but is no target", i);
    left[i]++;
    left_at[i] = now;
    CHECK(ev->ranks == NULL && ev->ranks_len == 0, "rank %u: LEFT with ranks", i);
    exited[i] = 1; /* the process exits: its connections close */
    for (uint32_t p = 0; p < N; p++) close_link(i, p);
    break;
  case LIFELINE_EVENT_CAMPAIGN_COMPLETED:
    CHECK(i == REQUESTER, "rank %u: a completion for a campaign it did not ask for", i);
    completed++;
    completed_epoch = ev->epoch;
    completed_at = now;
    CHECK(ev->seq == campaign && ev->rank == REQUESTER, "completion of campaign %llx (rank %u)",
          (unsigned long long)ev->seq, ev->rank);
    CHECK(ev->ranks_len == 2 && ev->ranks[0] == targets[0] && ev->ranks[1] == targets[1] &&
              ev->causes == NULL,
          "the completion's targets");
    break;
  case LIFELINE_EVENT_CAMPAIGN_FAILED:
    failed++;
    break;
  case LIFELINE_EVENT_FAILURE_CONFIRMED:
  case LIFELINE_EVENT_EVICTED:
    failures++;
    break;
  case LIFELINE_EVENT_XCAST_DELIVERED:
    if (ev->rank == xorigin && ev->seq == xseq) xdelivered[i]++;
    break;
  case LIFELINE_EVENT_XCAST_COMPLETED:
    if (i == xorigin && ev->seq == xseq) xcompleted++;
    break;
  default:
    break; /* other and unknown kinds are ignorable */
  }
}

/* A target in leaving mode refuses commands with LIFELINE_ERR_LEAVING (checked once each). */
static void check_leaving(uint32_t i) {
  if (!is_target(i) || exited[i] || leaving_checked[i]) return;
  lifeline_stats st;
  must(lifeline_node_stats(nodes[i], &st, sizeof st), "stats");
  if (st.shrink_leaving_entered == 0) return;
  leaving_checked[i] = 1;
  uint64_t seq = 0, id = 0;
  uint32_t uid = 0, other = 1;
  EXPECT(lifeline_node_xcast(nodes[i], now, LIFELINE_FIRST_APP_TAG, (const uint8_t *)"x", 1, &seq),
         LIFELINE_ERR_LEAVING);
  EXPECT(lifeline_node_relm_send(nodes[i], now, 0, LIFELINE_FIRST_APP_TAG, (const uint8_t *)"r", 1,
                                 &uid),
         LIFELINE_ERR_LEAVING);
  EXPECT(lifeline_node_shrink(nodes[i], now, &other, 1, &id), LIFELINE_ERR_LEAVING);
}

static void after_drain(uint32_t i) { check_leaving(i); }

static int done(void) { return completed && left[targets[0]] && left[targets[1]]; }

int main(void) {
  CHECK(lifeline_abi_version() == LIFELINE_ABI_VERSION, "ABI version mismatch");
  lifeline_config *cfg = lifeline_config_new(N, 2);
  CHECK(cfg != NULL, "config_new");
  uint64_t v = 0;
  must(lifeline_config_get(cfg, "membership_shrink_max_pending", &v), "get shrink_max_pending");
  CHECK(v >= 1, "shrink_max_pending %llu", (unsigned long long)v);
  must(lifeline_config_set(cfg, "membership_shrink_max_pending", 1), "set shrink_max_pending");
  must(lifeline_config_set(cfg, "membership_shrink_batch_ns", 3 * MS), "set shrink_batch");
  must(lifeline_config_set(cfg, "membership_shrink_timeout_ns", 5000 * MS), "set shrink_timeout");
  EXPECT(lifeline_config_set(cfg, "membership_shrink_max_pending", (uint64_t)UINT32_MAX + 1),
         LIFELINE_ERR_INVALID_CONFIG);
  for (uint32_t i = 0; i < N; i++) must(lifeline_node_new(cfg, i, 100 + i, now, &nodes[i]), "node_new");
  lifeline_config_free(cfg); /* nodes copied it */
  open_all_links();
  for (int s = 0; s < 20; s++) step();

  /* Bad requests: typed errors, nothing started. */
  lifeline_node *rq = nodes[REQUESTER];
  uint64_t id = 0xdead;
  uint32_t bad[3];
  EXPECT(lifeline_node_shrink(rq, now, targets, 0, &id), LIFELINE_ERR_NO_TARGETS);
  EXPECT(lifeline_node_shrink(rq, now, NULL, 0, &id), LIFELINE_ERR_NO_TARGETS);
  EXPECT(lifeline_node_shrink(rq, now, NULL, 2, &id), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_shrink(rq, now, targets, 2, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_shrink(NULL, now, targets, 2, &id), LIFELINE_ERR_NULL);
  bad[0] = 3, bad[1] = 4, bad[2] = 3;
  EXPECT(lifeline_node_shrink(rq, now, bad, 3, &id), LIFELINE_ERR_DUPLICATE_TARGET);
  bad[0] = 4, bad[1] = N;
  EXPECT(lifeline_node_shrink(rq, now, bad, 2, &id), LIFELINE_ERR_RANK_OUT_OF_RANGE);
  bad[0] = REQUESTER;
  EXPECT(lifeline_node_shrink(rq, now, bad, 1, &id), LIFELINE_ERR_TARGET_SELF);
  EXPECT(lifeline_node_shrink(rq, now, targets, (size_t)1 << 40, &id), LIFELINE_ERR_TOO_MANY_TARGETS);
  CHECK(id == 0xdead, "a refused shrink wrote its id");
  lifeline_stats st;
  must(lifeline_node_stats(rq, &st, sizeof st), "stats");
  CHECK(st.shrink_campaigns_requested == 0, "a refused shrink was counted as requested");

  /* The campaign. */
  requested_at = now;
  must(lifeline_node_shrink(rq, now, targets, 2, &campaign), "shrink");
  CHECK(campaign >> 32 == REQUESTER && (campaign & 0xffffffffu) == 1, "campaign id %llx",
        (unsigned long long)campaign);
  bad[0] = 4;
  EXPECT(lifeline_node_shrink(rq, now, bad, 1, &id), LIFELINE_ERR_SHRINK_BUSY);
  drain(REQUESTER);
  for (int s = 0; s < 5000 && !done(); s++) step();
  CHECK(done(), "campaign not done within 5 s: completed %d, left %d %d", completed,
        left[targets[0]], left[targets[1]]);
  for (int s = 0; s < 200; s++) step(); /* let duplicates show up if any */

  CHECK(completed == 1 && failed == 0, "completed %d times, failed %d times", completed, failed);
  CHECK(failures == 0, "%d failure verdicts in a shrink without faults", failures);
  for (uint32_t i = 0; i < N; i++) {
    if (is_target(i)) {
      CHECK(left[i] == 1, "target %u left %d times", i, left[i]);
      CHECK(leaving_checked[i], "target %u was never seen leaving", i);
      uint64_t seq = 0;
      EXPECT(lifeline_node_xcast(nodes[i], now, LIFELINE_FIRST_APP_TAG, (const uint8_t *)"x", 1, &seq),
             LIFELINE_ERR_DEAD);
      EXPECT(lifeline_node_shrink(nodes[i], now, &targets[0], 1, &id), LIFELINE_ERR_DEAD);
      must(lifeline_node_stats(nodes[i], &st, sizeof st), "stats");
      CHECK(st.shrink_leaving_entered == 1, "target %u entered leaving %llu times", i,
            (unsigned long long)st.shrink_leaving_entered);
      continue;
    }
    CHECK(left[i] == 0, "survivor %u left", i);
    CHECK(departed[i] == 1, "survivor %u saw %d departures", i, departed[i]);
    CHECK(departed_epoch[i] == completed_epoch, "survivor %u departed at epoch %llu, completion at %llu",
          i, (unsigned long long)departed_epoch[i], (unsigned long long)completed_epoch);
    uint64_t epoch = 0;
    uint32_t members = 0;
    must(lifeline_node_view(nodes[i], &epoch, &members), "view");
    CHECK(members == N - 2 && epoch >= completed_epoch, "survivor %u view: epoch %llu, %u members", i,
          (unsigned long long)epoch, members);
    bool alive = true;
    must(lifeline_node_is_alive(nodes[i], targets[0], &alive), "is_alive");
    CHECK(!alive, "survivor %u still thinks rank %u alive", i, targets[0]);
    must(lifeline_node_stats(nodes[i], &st, sizeof st), "stats");
    CHECK(st.shrink_departed == 2, "survivor %u: shrink_departed %llu", i,
          (unsigned long long)st.shrink_departed);
    CHECK(st.membership_removed_on_evidence == 0, "survivor %u removed a rank on evidence", i);
  }
  must(lifeline_node_stats(rq, &st, sizeof st), "stats");
  CHECK(st.shrink_campaigns_requested == 1 && st.shrink_campaigns_completed == 1 &&
            st.shrink_campaigns_failed == 0,
        "requester's campaign counters");
  must(lifeline_node_stats(nodes[0], &st, sizeof st), "stats");
  CHECK(st.shrink_orders >= 1 && st.shrink_left_views == 1, "coordinator: %llu orders, %llu views",
        (unsigned long long)st.shrink_orders, (unsigned long long)st.shrink_left_views);

  /* The campaign is over: the requester may shrink again (not done here), and an xcast from the
   * moved rank 7 reaches every survivor exactly once. */
  xorigin = 7;
  must(lifeline_node_xcast(nodes[7], now, LIFELINE_FIRST_APP_TAG, (const uint8_t *)"after", 5, &xseq),
       "xcast after the shrink");
  drain(7);
  for (int s = 0; s < 1000 && !xcompleted; s++) step();
  for (int s = 0; s < 100; s++) step();
  CHECK(xcompleted == 1, "xcast completed %d times", xcompleted);
  for (uint32_t i = 0; i < N; i++)
    CHECK(xdelivered[i] == (is_target(i) ? 0 : 1), "rank %u: xcast delivered %d times", i, xdelivered[i]);

  for (uint32_t i = 0; i < N; i++) lifeline_node_free(nodes[i]);
  net_clear();
  free(txbuf);
  printf("shrink: ok (virtual ms from request: completed %llu, rank %u left %llu, rank %u left "
         "%llu; epoch %llu)\n",
         (unsigned long long)((completed_at - requested_at) / MS), targets[0],
         (unsigned long long)((left_at[targets[0]] - requested_at) / MS), targets[1],
         (unsigned long long)((left_at[targets[1]] - requested_at) / MS),
         (unsigned long long)completed_epoch);
  return 0;
}
