/* A shrink campaign that cannot complete within its bound, through the C API: six nodes
 * (radix 2) over an in-memory FIFO network in virtual time (1 ms steps), no failure detector
 * (the core's default). Rank 2 (not the coordinator) shrinks rank 3 with
 * membership_shrink_timeout_ns = 300 ms; the coordinator (rank 0) receives the request, then
 * freezes 10 ms later, before its batch window (membership_shrink_batch_ns = 50 ms) sequences
 * the order: it handles no frame and no timer and sends nothing (frames to it wait in the
 * network, as in a stopped process's socket buffers), until 400 ms after the request.
 *
 * Checked: the requester gets exactly one LIFELINE_EVENT_CAMPAIGN_FAILED, with its campaign id
 * (`seq`, `rank` = the requester) and reason LIFELINE_CAMPAIGN_TIMED_OUT, at the bound (300 ms
 * after the request), and no LIFELINE_EVENT_CAMPAIGN_COMPLETED, ever: once the coordinator
 * thaws it carries out the order it held (as the header says it may), the target gets
 * LIFELINE_EVENT_LEFT and every survivor one LIFELINE_EVENT_DEPARTED naming the target and the
 * campaign, but the requester reports nothing more. Counters: shrink_campaigns_failed = 1,
 * shrink_campaigns_completed = 0 at the requester. Nobody sees a failure verdict. Exits non-zero
 * with a message on any violation. */

#define N 6
#define QCAP 8192
#define LCAP 256
#define MS 1000000ull
#define REQUESTER 2u
#define TARGET 3u
#define COORD 0u
#define BOUND_MS 300u
#define FREEZE_AFTER_MS 10u
#define THAW_AFTER_MS 400u
#define TEST_NAME "shrink_failed"
#include "harness.h"
#include "links_net.h"


static uint64_t campaign, requested_at, failed_at;
static int completed, failed, failures, departed[N], left[N];
static uint32_t failed_reason;


static void on_event(uint32_t i, const lifeline_event *ev) {
  switch (ev->kind) {
  case LIFELINE_EVENT_CAMPAIGN_FAILED:
    CHECK(i == REQUESTER, "rank %u: a failure of a campaign it did not ask for", i);
    failed++;
    failed_at = now;
    failed_reason = ev->reason;
    CHECK(ev->seq == campaign && ev->rank == REQUESTER, "failure of campaign %llx (rank %u)",
          (unsigned long long)ev->seq, ev->rank);
    break;
  case LIFELINE_EVENT_CAMPAIGN_COMPLETED:
    completed++;
    break;
  case LIFELINE_EVENT_DEPARTED:
    if (i == TARGET) break; /* a target may see its own exclusion; it leaves right after */
    departed[i]++;
    CHECK(ev->ranks_len == 1 && ev->ranks[0] == TARGET && ev->causes[0] == LIFELINE_CAUSE_LEFT,
          "rank %u: the departure's ranks", i);
    CHECK(ev->campaigns_len == 1 && ev->campaigns[0] == campaign, "rank %u: the departure's campaigns",
          i);
    for (size_t k = 0; k < ev->ranks_len; k++) close_link(i, ev->ranks[k]);
    break;
  case LIFELINE_EVENT_LEFT:
    CHECK(i == TARGET, "rank %u left but is no target", i);
    left[i]++;
    exited[i] = 1;
    for (uint32_t p = 0; p < N; p++) close_link(i, p);
    break;
  case LIFELINE_EVENT_FAILURE_CONFIRMED:
  case LIFELINE_EVENT_EVICTED:
    failures++;
    break;
  default:
    break;
  }
}

static void after_drain(uint32_t i) { (void)i; }

int main(void) {
  lifeline_config *cfg = lifeline_config_new(N, 2);
  CHECK(cfg != NULL, "config_new");
  must(lifeline_config_set(cfg, "membership_shrink_batch_ns", 50 * MS), "set shrink_batch");
  must(lifeline_config_set(cfg, "membership_shrink_timeout_ns", BOUND_MS * MS), "set shrink_timeout");
  for (uint32_t i = 0; i < N; i++) must(lifeline_node_new(cfg, i, 100 + i, now, &nodes[i]), "node_new");
  lifeline_config_free(cfg);
  open_all_links();
  for (int s = 0; s < 20; s++) step();

  uint32_t target = TARGET;
  requested_at = now;
  must(lifeline_node_shrink(nodes[REQUESTER], now, &target, 1, &campaign), "shrink");
  CHECK(campaign >> 32 == REQUESTER && (campaign & 0xffffffffu) == 1, "campaign id %llx",
        (unsigned long long)campaign);
  drain(REQUESTER);
  for (unsigned s = 0; s < FREEZE_AFTER_MS; s++) step();
  lifeline_stats st;
  must(lifeline_node_stats(nodes[COORD], &st, sizeof st), "stats");
  CHECK(st.shrink_orders == 0, "the coordinator ordered before its batch window");
  frozen[COORD] = 1;
  while (now - requested_at < (uint64_t)THAW_AFTER_MS * MS) step();
  CHECK(failed == 1, "the campaign failed %d times while its coordinator was frozen", failed);
  CHECK(failed_reason == LIFELINE_CAMPAIGN_TIMED_OUT, "reason %u, want LIFELINE_CAMPAIGN_TIMED_OUT",
        failed_reason);
  CHECK(failed_at - requested_at == (uint64_t)BOUND_MS * MS, "failed %llu ms after the request",
        (unsigned long long)((failed_at - requested_at) / MS));
  CHECK(left[TARGET] == 0 && completed == 0, "the campaign moved while its coordinator was frozen");

  /* The coordinator thaws: it reads what waited and carries out the order it held. */
  frozen[COORD] = 0;
  drain(COORD);
  for (int s = 0; s < 2000 && !left[TARGET]; s++) step();
  CHECK(left[TARGET] == 1, "the target did not leave after the coordinator thawed");
  for (int s = 0; s < 500; s++) step();
  CHECK(completed == 0, "a failed campaign completed too (%d)", completed);
  CHECK(failed == 1, "the campaign failed %d times", failed);
  CHECK(failures == 0, "%d failure verdicts", failures);
  for (uint32_t i = 0; i < N; i++)
    if (i != TARGET) CHECK(departed[i] == 1, "survivor %u saw %d departures", i, departed[i]);
  must(lifeline_node_stats(nodes[REQUESTER], &st, sizeof st), "stats");
  CHECK(st.shrink_campaigns_requested == 1 && st.shrink_campaigns_failed == 1 &&
            st.shrink_campaigns_completed == 0,
        "requester's counters: requested %llu, failed %llu, completed %llu",
        (unsigned long long)st.shrink_campaigns_requested,
        (unsigned long long)st.shrink_campaigns_failed,
        (unsigned long long)st.shrink_campaigns_completed);

  for (uint32_t i = 0; i < N; i++) lifeline_node_free(nodes[i]);
  net_clear();
  free(txbuf);
  printf("shrink_failed: ok (timed out %llu ms after the request; bound %u ms)\n",
         (unsigned long long)((failed_at - requested_at) / MS), BOUND_MS);
  return 0;
}
