//! Unit tests of `links.rs`.

use super::*;
use crate::config::{lifeline_config_free, lifeline_config_new};
use crate::node::{lifeline_node_free, lifeline_node_new};
use std::ptr::{null, null_mut};

fn node(span: u32, me: u32) -> *mut Node {
    let c = lifeline_config_new(span, 2);
    let mut n = null_mut();
    // SAFETY: a live config and a writable out-pointer.
    unsafe {
        assert_eq!(lifeline_node_new(c, me, 1, 0, &mut n), LIFELINE_OK);
        lifeline_config_free(c);
    }
    n
}

fn actions(l: *mut Links) -> Vec<LinkAction> {
    let mut v = Vec::new();
    let mut a = LinkAction::default();
    // SAFETY: a live handle and a writable action.
    while unsafe { lifeline_links_poll_action(l, &mut a) } == LIFELINE_OK {
        v.push(a);
    }
    v
}

#[test]
fn dial_connect_accept_and_link_up() {
    let n = node(4, 1);
    let mut l = null_mut();
    let mut run = false;
    let mut verdict = 9;
    // SAFETY: live handles and writable outputs throughout.
    unsafe {
        assert_eq!(lifeline_links_new(1, 2, null(), 0, &mut l), LIFELINE_OK);
        assert_eq!(lifeline_links_want(l, 1, 0, 0, n), LIFELINE_OK);
        let a = actions(l);
        assert_eq!(a.len(), 1);
        assert_eq!(
            (a[0].kind, a[0].peer, a[0].slot, a[0].failures),
            (LIFELINE_LINK_ACTION_DIAL, 0, 0, 0)
        );
        // An attempt id never issued is stale.
        assert_eq!(
            lifeline_links_handle_dial_result(
                l,
                2,
                0,
                0,
                777,
                LIFELINE_DIAL_CONNECTED,
                n,
                &mut run
            ),
            LIFELINE_OK
        );
        assert!(!run);
        assert_eq!(
            lifeline_links_handle_dial_result(l, 2, 0, 0, a[0].attempt, 42, n, &mut run),
            LIFELINE_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            lifeline_links_handle_dial_result(
                l,
                2,
                0,
                0,
                a[0].attempt,
                LIFELINE_DIAL_CONNECTED,
                n,
                &mut run
            ),
            LIFELINE_OK
        );
        assert!(run);
        // Rank 0 (lower) dials slot 1 to us: accepted, and the link is up.
        assert_eq!(
            lifeline_links_handle_accepted(l, 3, 0, 1, n, &mut verdict),
            LIFELINE_OK
        );
        assert_eq!(verdict, LIFELINE_ACCEPT);
        let a = actions(l);
        assert_eq!(
            (a.len(), a[0].kind, a[0].peer),
            (1, LIFELINE_LINK_ACTION_UP, 0)
        );
        let mut up = false;
        assert_eq!(lifeline_links_is_up(l, 0, &mut up), LIFELINE_OK);
        assert!(up);
        // Itself and out-of-span ranks are refused.
        assert_eq!(
            lifeline_links_handle_accepted(l, 3, 1, 0, n, &mut verdict),
            LIFELINE_OK
        );
        assert_eq!(verdict, LIFELINE_ACCEPT_REFUSE);
        assert_eq!(
            lifeline_links_handle_accepted(l, 3, 9, 0, n, &mut verdict),
            LIFELINE_OK
        );
        assert_eq!(verdict, LIFELINE_ACCEPT_REFUSE);
        let mut down = false;
        assert_eq!(
            lifeline_links_handle_closed(l, 4, 0, 0, &mut down),
            LIFELINE_OK
        );
        assert!(down);
        assert_eq!(lifeline_links_poll_timeout(l), LIFELINE_NEVER);
        lifeline_links_free(l);
        lifeline_node_free(n);
    }
}

#[test]
fn failures_back_off_then_give_up() {
    let n = node(4, 1);
    let mut l = null_mut();
    let mut cfg = LinksConfig::default();
    let mut run = true;
    // SAFETY: live handles and writable outputs throughout.
    unsafe {
        assert_eq!(lifeline_links_config_default(&mut cfg), LIFELINE_OK);
        assert_eq!(cfg.dial_attempts, 8);
        cfg.dial_attempts = 2;
        assert_eq!(lifeline_links_new(1, 2, &cfg, 0, &mut l), LIFELINE_OK);
        lifeline_links_want(l, 0, 3, 1, n);
        let a = actions(l)[0];
        lifeline_links_handle_dial_result(
            l,
            10,
            3,
            1,
            a.attempt,
            LIFELINE_DIAL_FAILED,
            n,
            &mut run,
        );
        assert!(!run);
        assert_eq!(lifeline_links_poll_timeout(l), 10 + cfg.backoff_initial_ns);
        assert!(actions(l).is_empty());
        lifeline_links_handle_timeout(l, 10 + cfg.backoff_initial_ns, n);
        let a = actions(l)[0];
        assert_eq!((a.kind, a.failures), (LIFELINE_LINK_ACTION_DIAL, 1));
        lifeline_links_handle_dial_result(
            l,
            99_000_000,
            3,
            1,
            a.attempt,
            LIFELINE_DIAL_REFUSED,
            n,
            &mut run,
        );
        let a = actions(l);
        assert_eq!(
            (a[0].kind, a[0].peer, a[0].reason),
            (LIFELINE_LINK_ACTION_DOWN, 3, LIFELINE_LINK_DOWN_UNREACHABLE)
        );
        lifeline_links_free(l);
        lifeline_node_free(n);
    }
}

#[test]
fn bad_input_is_an_error_code() {
    let n = node(4, 1);
    let mut l = null_mut();
    let mut cfg = LinksConfig::default();
    let mut b = false;
    // SAFETY: live handles or NULL on purpose.
    unsafe {
        assert_eq!(
            lifeline_links_new(1, 2, &cfg, 0, &mut l),
            LIFELINE_ERR_INVALID_CONFIG
        );
        assert!(l.is_null());
        lifeline_links_config_default(&mut cfg);
        assert_eq!(
            lifeline_links_new(1, 0, &cfg, 0, &mut l),
            LIFELINE_ERR_INVALID_CONFIG
        );
        assert_eq!(
            lifeline_links_new(1, 2, &cfg, 0, null_mut()),
            LIFELINE_ERR_NULL
        );
        assert_eq!(
            lifeline_links_want(null_mut(), 0, 0, 0, n),
            LIFELINE_ERR_NULL
        );
        assert_eq!(lifeline_links_new(1, 2, &cfg, 0, &mut l), LIFELINE_OK);
        assert_eq!(lifeline_links_want(l, 0, 0, 0, null()), LIFELINE_ERR_NULL);
        assert_eq!(lifeline_links_want(l, 0, 0, 5, n), LIFELINE_OK); // slot out of range
        assert!(actions(l).is_empty());
        assert_eq!(
            lifeline_links_handle_closed(l, 0, 0, 0, null_mut()),
            LIFELINE_ERR_NULL
        );
        assert_eq!(lifeline_links_forget(l, 0, &mut b), LIFELINE_OK);
        assert!(!b);
        assert_eq!(lifeline_links_poll_action(l, null_mut()), LIFELINE_ERR_NULL);
        assert_eq!(lifeline_links_poll_timeout(null()), LIFELINE_NEVER);
        assert_eq!(lifeline_links_retain_alive(l, n), LIFELINE_OK);
        lifeline_links_free(l);
        lifeline_links_free(null_mut());
        lifeline_node_free(n);
    }
}
