//! Lifeline's sans-IO protocol core.
//!
//! Pure, poll-driven state machines for a fault-tolerant control overlay: a radix routing tree
//! with batched repair ([`tree`]), and the protocol machines that ride on it. The core owns no
//! sockets, threads, clocks or OS randomness: time and a seed are parameters, and adapters
//! (TCP, QUIC, RDMA) or the simulator drive it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod tree;
