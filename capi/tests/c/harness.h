/* What the C tests share: CHECK / EXPECT / must, which exit non-zero with a message naming the
 * test, file and line, and (when QCAP is defined) an in-memory FIFO network of frames between
 * ranks, each frame a malloc'd copy owned by the queue until popped.
 *
 * Define TEST_NAME (a string literal) before including; define QCAP (the queue's capacity in
 * frames) to get the network. */
#ifndef LIFELINE_TEST_HARNESS_H
#define LIFELINE_TEST_HARNESS_H

#include "lifeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TEST_NAME
#error "define TEST_NAME before including harness.h"
#endif

#define CHECK(c, ...)                                                   \
  do {                                                                  \
    if (!(c)) {                                                         \
      fprintf(stderr, TEST_NAME ": %s:%d: ", __FILE__, __LINE__);       \
      fprintf(stderr, __VA_ARGS__);                                     \
      fputc('\n', stderr);                                              \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

#define EXPECT(call, want)                                                            \
  do {                                                                                \
    lifeline_result r_ = (call);                                                      \
    CHECK(r_ == (want), "%s: got %d (%s), want %s", #call, (int)r_, lifeline_strerror(r_), #want); \
  } while (0)

static inline void must(lifeline_result r, const char *what) {
  CHECK(r == LIFELINE_OK, "%s: %s (%d)", what, lifeline_strerror(r), (int)r);
}

#ifdef QCAP
/* One frame in flight from `from` to `to`. */
typedef struct { uint32_t from, to; size_t len; uint8_t *data; } msg;
static msg queue[QCAP];
static size_t q_head, q_len;

/* Queues a copy of `len` bytes at `data` from `from` to `to`. */
static inline void net_push(uint32_t from, uint32_t to, const uint8_t *data, size_t len) {
  CHECK(q_len < QCAP, "network queue full");
  msg *m = &queue[(q_head + q_len++) % QCAP];
  m->from = from;
  m->to = to;
  m->len = len;
  m->data = malloc(len);
  CHECK(m->data != NULL, "malloc");
  memcpy(m->data, data, len);
}

/* Takes the oldest frame in flight; the caller frees `data`. */
static inline msg net_pop(void) {
  CHECK(q_len > 0, "network queue empty");
  msg m = queue[q_head];
  q_head = (q_head + 1) % QCAP;
  q_len--;
  return m;
}

/* Puts a popped frame back at the end of the queue (it stays owned by the queue). */
static inline void net_requeue(msg m) {
  CHECK(q_len < QCAP, "network queue full");
  queue[(q_head + q_len++) % QCAP] = m;
}

/* Frees every frame still in flight. */
static inline void net_clear(void) {
  while (q_len) free(net_pop().data);
}
/* Queues every frame `node` (rank `i` of `n`) has to send, through the caller's buffer. */
static inline void net_send_all(lifeline_node *node, uint32_t i, uint32_t n, uint8_t *buf,
                                size_t cap) {
  lifeline_transmit t;
  lifeline_result r;
  while ((r = lifeline_node_poll_transmit(node, buf, cap, &t)) == LIFELINE_OK) {
    CHECK(t.to < n && t.to != i, "transmit from %u to bad rank %u", i, t.to);
    net_push(i, t.to, buf, t.len);
  }
  CHECK(r == LIFELINE_DONE, "poll_transmit: %s", lifeline_strerror(r));
}

/* Hands every event `node` (rank `i`) has to `on_event`. */
static inline void drain_events(lifeline_node *node, uint32_t i,
                                void (*on_event)(uint32_t, const lifeline_event *)) {
  const lifeline_event *ev;
  lifeline_result r;
  while ((r = lifeline_node_poll_event(node, &ev)) == LIFELINE_OK) on_event(i, ev);
  CHECK(r == LIFELINE_DONE, "poll_event: %s", lifeline_strerror(r));
}
#endif

#endif
