//! Lifeline for Python: the extension module `lifeline._lifeline` behind the pure-Python package
//! `lifeline` (`python/lifeline/`), built by maturin (`pyproject.toml`, feature `python`).
//!
//! Two levels, as in Rust:
//! - `lifeline.Node`: the sans-IO core ([`lifeline_core::Node`]) for runtimes that own their
//!   sockets and loop, one-to-one with the driving contract (`handle_*`, `poll_*`, commands);
//! - `lifeline.start(...)`: a node running over the TCP (or QUIC) driver on its own runtime
//!   ([`running::Running`]), configured like `lifeline node`.
//!
//! Without the feature `python` this crate is the pure-Rust layer under the binding (the
//! running node's blocking API, the events as plain values, the config keys), built and tested
//! by `cargo test --workspace` with no Python at all; the pyo3 glue (module `py`) is built with the feature only.

pub mod config;
pub mod events;
pub mod running;
pub mod shrink;

#[cfg(feature = "python")]
mod py;
