/* Misuse of the C API: NULL everywhere, short buffers, reserved tags, unknown config keys,
 * ranks out of range. Every one is answered with its error code, never a crash. */
#define TEST_NAME "misuse"
#include "harness.h"


int main(void) {
  uint8_t buf[64];
  uint64_t u64 = 0;
  uint32_t u32 = 0;
  size_t n = 0;
  bool alive = false;
  lifeline_transmit t;
  const lifeline_event *ev = NULL;
  lifeline_stats st;

  /* Versions and strings. */
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", LIFELINE_VERSION_MAJOR, LIFELINE_VERSION_MINOR,
           LIFELINE_VERSION_PATCH);
  CHECK(strcmp(lifeline_version(), want) == 0, "version %s != %s", lifeline_version(), want);
  CHECK(lifeline_abi_version() == LIFELINE_ABI_VERSION, "abi");
  for (int code = -120; code <= 3; code++) CHECK(lifeline_strerror(code) != NULL, "strerror(%d)", code);
  CHECK(strcmp(lifeline_strerror(12345), "unknown lifeline_result") == 0, "unknown code text");

  /* Config. */
  lifeline_config *cfg = lifeline_config_new(2, 2);
  CHECK(cfg != NULL, "config_new");
  EXPECT(lifeline_config_set(NULL, "max_frame", 4096), LIFELINE_ERR_NULL);
  EXPECT(lifeline_config_set(cfg, NULL, 1), LIFELINE_ERR_NULL);
  EXPECT(lifeline_config_set(cfg, "no_such_key", 1), LIFELINE_ERR_UNKNOWN_KEY);
  EXPECT(lifeline_config_set(cfg, "", 1), LIFELINE_ERR_UNKNOWN_KEY);
  EXPECT(lifeline_config_set(cfg, "detect_enabled", 2), LIFELINE_ERR_INVALID_CONFIG);
  EXPECT(lifeline_config_set(cfg, "max_frame", UINT64_MAX), LIFELINE_ERR_INVALID_CONFIG);
  EXPECT(lifeline_config_get(cfg, "max_frame", NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_config_get(cfg, "nope", &u64), LIFELINE_ERR_UNKNOWN_KEY);
  EXPECT(lifeline_config_add_dead(NULL, 0), LIFELINE_ERR_NULL);
  EXPECT(lifeline_config_add_dead(cfg, 2), LIFELINE_ERR_RANK_OUT_OF_RANGE);
  lifeline_config_free(NULL);

  /* Node construction. */
  lifeline_node *a = (lifeline_node *)1, *b = NULL;
  EXPECT(lifeline_node_new(NULL, 0, 1, 0, &a), LIFELINE_ERR_NULL);
  CHECK(a == NULL, "out not cleared on error");
  EXPECT(lifeline_node_new(cfg, 0, 1, 0, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_new(cfg, 2, 1, 0, &a), LIFELINE_ERR_RANK_OUT_OF_RANGE);
  EXPECT(lifeline_config_set(cfg, "max_frame", 10), LIFELINE_OK);
  EXPECT(lifeline_node_new(cfg, 0, 1, 0, &a), LIFELINE_ERR_INVALID_CONFIG);
  EXPECT(lifeline_config_get(cfg, "max_frame", &u64), LIFELINE_OK);
  CHECK(u64 == 10, "get max_frame %llu", (unsigned long long)u64);
  EXPECT(lifeline_config_set(cfg, "max_frame", 4096), LIFELINE_OK);
  lifeline_config *bad = lifeline_config_new(2, 1); /* radix 1 */
  EXPECT(lifeline_node_new(bad, 0, 1, 0, &a), LIFELINE_ERR_INVALID_CONFIG);
  lifeline_config_free(bad);
  EXPECT(lifeline_node_new(cfg, 0, 1, 0, &a), LIFELINE_OK);
  EXPECT(lifeline_node_new(cfg, 1, 2, 0, &b), LIFELINE_OK);
  lifeline_config_free(cfg);

  /* NULL node: every entry point. */
  EXPECT(lifeline_node_handle_frame(NULL, 0, 1, buf, 6), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_link_up(NULL, 0, 1), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_link_down(NULL, 0, 1, LIFELINE_LINK_CLOSED), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_link_down(NULL, 0, 1, 99), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_timeout(NULL, 0), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_dead(NULL, 0, &u32, 1), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_grow(NULL, 0, 3), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_fenced(NULL, 0, 1, 1), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_fence_verdict(NULL, 0, 1, &u64), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_xcast(NULL, 0, 16, buf, 1, &u64), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_relm_send(NULL, 0, 1, 16, buf, 1, &u32), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_flood(NULL, 0, buf, 1, &u64), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_shrink(NULL, 0, &u32, 1, &u64), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_transmit(NULL, buf, sizeof buf, &t), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_event(NULL, &ev), LIFELINE_ERR_NULL);
  CHECK(lifeline_node_poll_timeout(NULL) == LIFELINE_NEVER, "poll_timeout(NULL)");
  CHECK(lifeline_node_max_frame(NULL) == 0, "max_frame(NULL)");
  EXPECT(lifeline_node_frame_len(NULL, buf, 6, &n), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_parent(NULL, &u32), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_children(NULL, &u32, 1, &n), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_is_alive(NULL, 0, &alive), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_view(NULL, &u64, &u32), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_view_removed(NULL, &u32, 1, &n), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_stats(NULL, &st, sizeof st), LIFELINE_ERR_NULL);
  lifeline_node_free(NULL);

  /* NULL arguments on a live node. */
  EXPECT(lifeline_node_handle_frame(a, 0, 1, NULL, 6), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_dead(a, 0, NULL, 1), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_fence_verdict(a, 0, 1, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_xcast(a, 0, 16, NULL, 3, &u64), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_xcast(a, 0, 16, buf, 3, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_relm_send(a, 0, 1, 16, buf, 1, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_flood(a, 0, buf, 1, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_shrink(a, 0, NULL, 1, &u64), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_shrink(a, 0, &u32, 1, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_transmit(a, buf, sizeof buf, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_transmit(a, NULL, 5, &t), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_event(a, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_frame_len(a, NULL, 6, &n), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_frame_len(a, buf, 6, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_parent(a, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_children(a, NULL, 1, &n), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_is_alive(a, 0, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_view(a, NULL, &u32), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_stats(a, NULL, sizeof st), LIFELINE_ERR_NULL);

  /* Bad values. */
  EXPECT(lifeline_node_handle_link_down(a, 0, 1, 99), LIFELINE_ERR_INVALID_ARGUMENT);
  EXPECT(lifeline_node_xcast(a, 0, 5, buf, 1, &u64), LIFELINE_ERR_RESERVED_TAG);
  EXPECT(lifeline_node_xcast(a, 0, 0, buf, 1, &u64), LIFELINE_ERR_RESERVED_TAG);
  uint8_t *big = calloc(8192, 1);
  CHECK(big != NULL, "calloc");
  EXPECT(lifeline_node_xcast(a, 0, 16, big, 8192, &u64), LIFELINE_ERR_TOO_LARGE);
  EXPECT(lifeline_node_relm_send(a, 0, 1, 16, big, 8192, &u32), LIFELINE_ERR_TOO_LARGE);
  free(big);
  EXPECT(lifeline_node_relm_send(a, 0, 7, 16, buf, 1, &u32), LIFELINE_ERR_PEER_DEAD);
  u32 = 9;
  EXPECT(lifeline_node_handle_dead(a, 0, &u32, 1), LIFELINE_ERR_RANK_OUT_OF_RANGE);
  EXPECT(lifeline_node_handle_grow(a, 0, 1), LIFELINE_ERR_SPAN_SHRINK);
  EXPECT(lifeline_node_is_alive(a, 2, &alive), LIFELINE_ERR_RANK_OUT_OF_RANGE);
  EXPECT(lifeline_node_is_alive(a, 1, &alive), LIFELINE_OK);
  CHECK(alive, "rank 1 alive");
  EXPECT(lifeline_node_fence_verdict(a, 0, 1, &u64), LIFELINE_DONE);
  EXPECT(lifeline_node_parent(a, &u32), LIFELINE_OK);
  CHECK(u32 == LIFELINE_NO_RANK, "root's parent %u", u32);
  EXPECT(lifeline_node_children(a, NULL, 0, &n), LIFELINE_ERR_BUFFER_TOO_SHORT);
  CHECK(n == 1, "children %zu", n);

  /* Shrink requests with bad targets or lengths: typed errors, nothing started, the id out
   * untouched. A length over max_list is refused before the array is read. */
  {
    uint32_t tg[2] = {1, 1};
    uint64_t id = 77;
    EXPECT(lifeline_node_shrink(a, 0, NULL, 0, &id), LIFELINE_ERR_NO_TARGETS);
    EXPECT(lifeline_node_shrink(a, 0, tg, 2, &id), LIFELINE_ERR_DUPLICATE_TARGET);
    EXPECT(lifeline_node_shrink(a, 0, tg, SIZE_MAX, &id), LIFELINE_ERR_TOO_MANY_TARGETS);
    tg[1] = 2;
    EXPECT(lifeline_node_shrink(a, 0, tg, 2, &id), LIFELINE_ERR_RANK_OUT_OF_RANGE);
    /* b is not the coordinator: it cannot name itself (the coordinator may: a hand-over). */
    tg[0] = 1;
    EXPECT(lifeline_node_shrink(b, 0, tg, 1, &id), LIFELINE_ERR_TARGET_SELF);
    CHECK(id == 77, "a refused shrink wrote its id");
    EXPECT(lifeline_node_stats(a, &st, sizeof st), LIFELINE_OK);
    CHECK(st.shrink_campaigns_requested == 0, "a refused shrink was counted");
    /* -23 (a target was the coordinator) is no longer produced. */
    for (int code = LIFELINE_ERR_LEAVING; code >= LIFELINE_ERR_SHRINK_BUSY; code--)
      if (code != -23) CHECK(strcmp(lifeline_strerror(code), "unknown lifeline_result") != 0, "strerror(%d)", code);
  }

  /* Stream framing: too few bytes, then a garbage header. */
  EXPECT(lifeline_node_frame_len(a, buf, 3, &n), LIFELINE_DONE);
  memset(buf, 0xff, sizeof buf);
  EXPECT(lifeline_node_frame_len(a, buf, 6, &n), LIFELINE_ERR_MALFORMED);

  /* A garbage frame is dropped and counted, not an error. */
  EXPECT(lifeline_node_handle_frame(a, 0, 1, buf, sizeof buf), LIFELINE_OK);
  EXPECT(lifeline_node_handle_frame(a, 0, 1, NULL, 0), LIFELINE_OK);
  EXPECT(lifeline_node_stats(a, &st, sizeof st), LIFELINE_OK);
  CHECK(st.frames_in == 0, "garbage accepted");
  CHECK(st.dropped_decode_error + st.dropped_unknown_kind > 0, "garbage not counted");
  /* A short stats struct gets only its own bytes. */
  memset(&st, 0xab, sizeof st);
  EXPECT(lifeline_node_stats(a, &st, sizeof(uint64_t)), LIFELINE_OK);
  CHECK(st.frames_in == 0, "frames_in not written");
  CHECK(st.frames_out == 0xababababababababull, "wrote past out_size");

  /* A short buffer: the frame stays queued and is then sent intact. */
  EXPECT(lifeline_node_handle_link_up(a, 0, 1), LIFELINE_OK);
  EXPECT(lifeline_node_handle_link_up(b, 0, 0), LIFELINE_OK);
  while ((ev = NULL, lifeline_node_poll_event(a, &ev)) == LIFELINE_OK) {}
  while (lifeline_node_poll_transmit(a, buf, sizeof buf, &t) == LIFELINE_OK) {}
  EXPECT(lifeline_node_xcast(a, 1, 16, (const uint8_t *)"intact payload", 14, &u64), LIFELINE_OK);
  uint64_t seq = u64;
  size_t cap = lifeline_node_max_frame(a);
  uint8_t *frame = malloc(cap);
  CHECK(frame != NULL, "malloc");
  int short_seen = 0, delivered = 0;
  uint64_t now = 1;
  for (int round = 0; round < 200 && !delivered; round++, now += 1000000) {
    lifeline_node *from = round % 2 ? b : a, *to = round % 2 ? a : b;
    uint32_t from_rank = round % 2 ? 1 : 0;
    for (;;) {
      lifeline_result r = lifeline_node_poll_transmit(from, frame, 1, &t);
      if (r == LIFELINE_DONE) break;
      CHECK(r == LIFELINE_ERR_BUFFER_TOO_SHORT, "1-byte buffer: %s", lifeline_strerror(r));
      size_t needed = t.len;
      CHECK(needed > 1 && needed <= cap, "needed %zu", needed);
      EXPECT(lifeline_node_poll_transmit(from, NULL, 0, &t), LIFELINE_ERR_BUFFER_TOO_SHORT);
      CHECK(t.len == needed, "size query changed: %zu != %zu", t.len, needed);
      short_seen++;
      EXPECT(lifeline_node_poll_transmit(from, frame, needed, &t), LIFELINE_OK);
      CHECK(t.len == needed, "sent %zu, announced %zu", t.len, needed);
      EXPECT(lifeline_node_handle_frame(to, now, from_rank, frame, t.len), LIFELINE_OK);
    }
    EXPECT(lifeline_node_handle_timeout(from, now), LIFELINE_OK);
    while (lifeline_node_poll_event(b, &ev) == LIFELINE_OK) {
      if (ev->kind == LIFELINE_EVENT_XCAST_DELIVERED) {
        CHECK(ev->rank == 0 && ev->seq == seq, "delivered origin %u seq %llu", ev->rank,
              (unsigned long long)ev->seq);
        CHECK(ev->payload_len == 14 && memcmp(ev->payload, "intact payload", 14) == 0,
              "payload damaged");
        delivered++;
      }
    }
  }
  CHECK(short_seen > 0, "never saw BUFFER_TOO_SHORT");
  CHECK(delivered == 1, "delivered %d times at rank 1", delivered);
  EXPECT(lifeline_node_stats(b, &st, sizeof st), LIFELINE_OK);
  CHECK(st.dropped_decode_error == 0 && st.frames_in > 0, "frames damaged in transit");
  free(frame);

  /* Joins: NULLs, bad arguments, malformed bytes, short buffers, calls out of order. */
  lifeline_joiner *j = (lifeline_joiner *)1;
  lifeline_node *jn = (lifeline_node *)1;
  lifeline_join_transmit jt;
  lifeline_joiner_config jc;
  const lifeline_joiner_event *jev = NULL;
  lifeline_joiner_counters jcount;
  uint64_t conn = 0;
  EXPECT(lifeline_node_handle_join_request(NULL, now, 1, buf, 4), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_join_request(a, now, 1, NULL, 4), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_handle_join_conn_closed(NULL, now, 1), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_join_reply(NULL, &conn, buf, sizeof buf, &n), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_join_reply(a, NULL, buf, sizeof buf, &n), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_join_reply(a, &conn, buf, sizeof buf, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_join_reply(a, &conn, NULL, 4, &n), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_poll_join_reply(a, &conn, NULL, 0, &n), LIFELINE_DONE);
  EXPECT(lifeline_node_handle_join_request(a, now, 1, buf, sizeof buf), LIFELINE_ERR_MALFORMED);
  EXPECT(lifeline_node_handle_join_request(a, now, 1, NULL, 0), LIFELINE_ERR_MALFORMED);
  EXPECT(lifeline_node_handle_join_conn_closed(a, now, 12345), LIFELINE_OK);
  EXPECT(lifeline_node_stats(a, &st, sizeof st), LIFELINE_OK);
  CHECK(st.join_requests_malformed == 2 && st.join_requests_in == 0, "malformed joins counted %llu",
        (unsigned long long)st.join_requests_malformed);
  EXPECT(lifeline_joiner_config_default(NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_config_default(&jc), LIFELINE_OK);
  EXPECT(lifeline_joiner_new(1, buf, 1, NULL, 1, now, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_new(1, NULL, 1, NULL, 1, now, &j), LIFELINE_ERR_NULL);
  CHECK(j == NULL, "joiner out not cleared on error");
  EXPECT(lifeline_joiner_new(0, buf, 1, NULL, 1, now, &j), LIFELINE_ERR_INVALID_ARGUMENT);
  EXPECT(lifeline_joiner_new(1, buf, LIFELINE_MAX_JOIN_ADDR + 1, NULL, 1, now, &j),
         LIFELINE_ERR_INVALID_ARGUMENT);
  jc.retry_min_ns = 0;
  EXPECT(lifeline_joiner_new(1, buf, 1, &jc, 1, now, &j), LIFELINE_ERR_INVALID_CONFIG);
  EXPECT(lifeline_joiner_new(1, (const uint8_t *)"me:1", 4, NULL, 1, now, &j), LIFELINE_OK);
  EXPECT(lifeline_joiner_poll_transmit(NULL, buf, sizeof buf, &jt), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_poll_transmit(j, buf, sizeof buf, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_poll_transmit(j, NULL, 4, &jt), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_poll_transmit(j, buf, 1, &jt), LIFELINE_ERR_BUFFER_TOO_SHORT);
  size_t req_len = jt.len;
  CHECK(req_len > 1 && req_len <= sizeof buf, "request length %zu", req_len);
  EXPECT(lifeline_joiner_poll_transmit(j, buf, sizeof buf, &jt), LIFELINE_OK);
  CHECK(jt.len == req_len && jt.contact == 0 && jt.seq == 1, "request %zu to %u seq %u", jt.len,
        jt.contact, jt.seq);
  EXPECT(lifeline_joiner_poll_transmit(j, buf, sizeof buf, &jt), LIFELINE_DONE);
  EXPECT(lifeline_joiner_handle_reply(NULL, now, 0, buf, 4), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_handle_reply(j, now, 0, NULL, 4), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_handle_reply(j, now, 0, buf, req_len), LIFELINE_ERR_MALFORMED); /* a request */
  EXPECT(lifeline_joiner_handle_contact_failed(NULL, now, 0, 1, 1), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_handle_timeout(NULL, now), LIFELINE_ERR_NULL);
  CHECK(lifeline_joiner_poll_timeout(NULL) == LIFELINE_NEVER, "joiner_poll_timeout(NULL)");
  CHECK(lifeline_joiner_poll_timeout(j) != LIFELINE_NEVER, "a joiner waits for its answer");
  EXPECT(lifeline_joiner_poll_event(NULL, &jev), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_poll_event(j, NULL), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_poll_event(j, &jev), LIFELINE_DONE);
  CHECK(jev == NULL, "no event, but not NULL");
  EXPECT(lifeline_joiner_stats(NULL, &jcount, sizeof jcount), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_stats(j, NULL, sizeof jcount), LIFELINE_ERR_NULL);
  EXPECT(lifeline_joiner_stats(j, &jcount, sizeof jcount), LIFELINE_OK);
  CHECK(jcount.tries == 1 && jcount.malformed_replies == 1, "joiner counters");
  /* Not admitted yet: no node from it. */
  cfg = lifeline_config_new(2, 2);
  EXPECT(lifeline_node_new_from_admission(cfg, j, 1, now, &jn), LIFELINE_ERR_INVALID_ARGUMENT);
  CHECK(jn == NULL, "node out not cleared on error");
  EXPECT(lifeline_node_new_from_admission(NULL, j, 1, now, &jn), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_new_from_admission(cfg, NULL, 1, now, &jn), LIFELINE_ERR_NULL);
  EXPECT(lifeline_node_new_from_admission(cfg, j, 1, now, NULL), LIFELINE_ERR_NULL);
  /* The request reaches rank 1 (not the coordinator): it waits, forwarded; its connection
   * closes, so it is forgotten and never answered. */
  EXPECT(lifeline_node_handle_join_request(b, now, 7, buf, req_len), LIFELINE_OK);
  EXPECT(lifeline_node_handle_join_conn_closed(b, now, 7), LIFELINE_OK);
  EXPECT(lifeline_node_poll_join_reply(b, &conn, buf, sizeof buf, &n), LIFELINE_DONE);
  EXPECT(lifeline_joiner_handle_contact_failed(j, now, 0, jt.nonce, jt.seq), LIFELINE_OK);
  EXPECT(lifeline_joiner_poll_event(j, &jev), LIFELINE_OK);
  CHECK(jev->kind == LIFELINE_JOINER_EVENT_RETRYING && jev->reason == LIFELINE_JOIN_RETRY_CONTACT_FAILED &&
            jev->rank == LIFELINE_NO_RANK && jev->after_ns > 0,
        "retrying event");
  lifeline_config_free(cfg);
  lifeline_joiner_free(j);
  lifeline_joiner_free(NULL);

  lifeline_node_free(a);
  lifeline_node_free(b);
  printf("misuse: ok\n");
  return 0;
}
