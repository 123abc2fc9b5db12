/* What the shrink tests share on top of harness.h's network: N nodes in virtual time (1 ms
 * steps) whose connections can close. A closure is delivered one step later as
 * LIFELINE_LINK_CLOSED to the peer (unless it exited); an exited rank handles nothing; a frozen
 * rank handles no frame and no timer and sends nothing (frames to it wait in the network, as in
 * a stopped process's socket buffers) until it thaws.
 *
 * Define N, LCAP (closures per step), MS (one millisecond in ns) and include harness.h with
 * QCAP first. The test defines on_event (each polled event) and after_drain (run after each
 * rank's drain). */
#ifndef LIFELINE_TEST_LINKS_NET_H
#define LIFELINE_TEST_LINKS_NET_H

/* Link closures to deliver at the next step: `rank` sees its link to `peer` closed. */
typedef struct { uint32_t rank, peer; } closure;
static closure closures[LCAP];
static size_t n_closures;
static int link_open[N][N];

static lifeline_node *nodes[N];
static int exited[N], frozen[N];
static uint64_t now;
static uint8_t *txbuf;
static size_t txcap;

static void on_event(uint32_t i, const lifeline_event *ev);
static void after_drain(uint32_t i);

/* `rank`'s connections to `peer` close: `peer` sees it at the next step (unless it exited). */
static void close_link(uint32_t rank, uint32_t peer) {
  if (!link_open[rank][peer]) return;
  link_open[rank][peer] = link_open[peer][rank] = 0;
  CHECK(n_closures < LCAP, "closure queue full");
  closures[n_closures++] = (closure){peer, rank};
}

static void drain(uint32_t i) {
  if (exited[i] || frozen[i]) return;
  net_send_all(nodes[i], i, N, txbuf, txcap);
  drain_events(nodes[i], i, on_event);
  after_drain(i);
}

/* One millisecond: deliver frames (a frozen rank's wait, in order), then link closures, fire
 * due timers (none at a frozen rank), drain. */
static void step(void) {
  now += MS;
  size_t n = q_len;
  for (size_t k = 0; k < n; k++) {
    msg m = net_pop();
    if (frozen[m.to]) {
      net_requeue(m);
      continue;
    }
    if (!exited[m.to])
      must(lifeline_node_handle_frame(nodes[m.to], now, m.from, m.data, m.len), "handle_frame");
    free(m.data);
  }
  size_t nc = n_closures;
  closure in[LCAP];
  memcpy(in, closures, nc * sizeof *closures);
  n_closures = 0;
  for (size_t k = 0; k < nc; k++)
    if (!exited[in[k].rank])
      must(lifeline_node_handle_link_down(nodes[in[k].rank], now, in[k].peer, LIFELINE_LINK_CLOSED),
           "link_down");
  for (uint32_t i = 0; i < N; i++) {
    if (exited[i] || frozen[i]) continue;
    uint64_t at = lifeline_node_poll_timeout(nodes[i]);
    if (at != LIFELINE_NEVER && at <= now) must(lifeline_node_handle_timeout(nodes[i], now), "timeout");
  }
  for (uint32_t i = 0; i < N; i++) drain(i);
}

/* After the nodes are made: the frame buffer, every pair linked, every node drained. */
static void open_all_links(void) {
  txcap = lifeline_node_max_frame(nodes[0]);
  txbuf = malloc(txcap);
  CHECK(txbuf != NULL, "malloc");
  for (uint32_t i = 0; i < N; i++) drain(i);
  for (uint32_t i = 0; i < N; i++)
    for (uint32_t j = 0; j < N; j++)
      if (i != j) {
        link_open[i][j] = 1;
        must(lifeline_node_handle_link_up(nodes[i], now, j), "link_up");
      }
  for (uint32_t i = 0; i < N; i++) drain(i);
}

#endif
