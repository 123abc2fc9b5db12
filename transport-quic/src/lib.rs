//! Lifeline's QUIC transport: **identity** and **links**. Every rank holds a certificate bound
//! to its rank, issued by a CA made for the cluster (one job), and every QUIC connection between
//! ranks is mutually authenticated with it. A [`QuicEndpoint`] per node dials and accepts
//! [`QuicLink`]s, each one connection carrying the core's frames on a control and a data
//! stream. [`spawn`] runs a `lifeline_core::Node` over them with the driver every adapter
//! shares ([`lifeline_transport_common`]; [`QuicConnector`] is its QUIC side) and returns the
//! same [`RunningNode`](lifeline_transport_common::RunningNode) as the TCP adapter. This crate
//! has no protocol logic.
//!
//! # Names
//!
//! Rank `R` of cluster `ID` is `rR.ID.lifeline` ([`ClusterId::rank_name`]): the only name
//! (DNS SAN) in its certificate. Both ends check it:
//!
//! - the **dialer** connects with [`server_name`]`(peer, cluster)` as the server name, so the
//!   TLS handshake fails unless the certificate at that address is exactly that rank's;
//! - the **acceptor** requires a client certificate chaining to the cluster CA (a client with
//!   none, or with one from another CA, fails the handshake), then checks the rank the peer
//!   *claims* against it with [`verify_claimed_rank`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use lifeline_core::tree::Rank;
//! use lifeline_transport_quic::{
//!     client_config, server_config, server_name, verify_claimed_rank, ClusterId, QuicConfig,
//!     RankIdentity,
//! };
//!
//! let cluster = ClusterId::new("job-42")?;
//! // DIR/ca.pem and DIR/rank-3/{cert,key}.pem, as `lifeline certs` writes them.
//! let me = RankIdentity::load("/etc/lifeline/certs", Rank(3), &cluster)?;
//! let cfg = QuicConfig::default();
//! let mut endpoint =
//!     quinn::Endpoint::server(server_config(&me, &cfg)?, "10.0.0.3:7000".parse()?)?;
//! endpoint.set_default_client_config(client_config(&me, &cfg)?);
//!
//! // Dialing rank 0: the handshake proves the peer is rank 0.
//! let root = server_name(Rank(0), &cluster);
//! let _to_root = endpoint.connect("10.0.0.1:7000".parse()?, &root)?.await?;
//!
//! // Accepting: the handshake proves the peer is *a* rank; its claim says which.
//! if let Some(incoming) = endpoint.accept().await {
//!     let conn = incoming.await?;
//!     let claimed = Rank(7); // from the peer's first message
//!     verify_claimed_rank(&conn, claimed, &cluster)?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Certificates
//!
//! The launcher makes the CA with [`ClusterCa::generate`] and one certificate per rank with
//! [`ClusterCa::issue`] (`lifeline certs` does both), written in the layout of [`CertDir`]:
//! `DIR/ca.pem`, `DIR/ca.key`, `DIR/rank-R/cert.pem`, `DIR/rank-R/key.pem` (key files `0600`).
//! Each node gets `ca.pem` and its own `rank-R/` only, and loads them with
//! [`RankIdentity::load`], which checks that the certificate names this rank, chains to the CA
//! and matches the key, naming the file at fault otherwise. The CA key stays with the launcher.
//! Certificates live for one job and ranks are never reused, so there is no revocation.
//!
//! # Connections
//!
//! [`server_config`] and [`client_config`] give quinn configurations: TLS 1.3 with the *ring*
//! provider, ALPN [`ALPN`], no session resumption, no connection migration, at most 4
//! bidirectional and no unidirectional streams per peer, and liveness from
//! [`QuicConfig::link_timeout`] (`max_idle_timeout = link_timeout`,
//! `keep_alive_interval = link_timeout / 6`).
//!
//! # Links
//!
//! - **One endpoint per node** ([`QuicEndpoint::bind`]): one UDP socket with `SO_RCVBUF` and
//!   `SO_SNDBUF` from [`QuicConfig`], one quinn endpoint that dials and accepts. Dials leave
//!   from the listening address, so an [`AddressBook`] can require the exact address.
//! - **A link** is one connection with two bidirectional streams opened by the dialer, control
//!   (QUIC priority 1) and data (0), each starting with a 6-byte [`Hello`] (version, claimed
//!   rank, class). The acceptor refuses strangers before TLS (address book), then checks the
//!   claim against the certificate ([`verify_claimed_rank`]) and the address, and counts every
//!   refusal ([`QuicStats`]); the caller then accepts ([`Inbound::accept`], which answers
//!   [`ACCEPTED`]) or rejects ([`Inbound::reject`]) the link.
//! - **Frames** are the core's envelopes, delimited by their own header
//!   ([`lifeline_core::wire::frame_len`]) and bounded by [`QuicConfig::max_frame`]; they are
//!   handed to quinn as the core's `Bytes` (`write_all_chunks`, no copy). Each stream has its
//!   own flow control, so a peer that stops reading data never delays control.
//! - **Down reasons** ([`DownReason`]) come from quinn's `ConnectionError` and the close codes
//!   ([`CloseCode`]), and map to the core's [`LinkCause`](lifeline_core::LinkCause): an idle
//!   timeout is soft evidence, a close is not a timeout.
//! - **Simultaneous dials**: the connection dialed by the lower rank wins ([`keeps`]); the loser
//!   is closed with [`CloseCode::Duplicate`] and its dial fails with
//!   [`DialError::outcome`]` == Duplicate`.
//! - **No "refused"**: a dial to a port nobody listens on is never answered; it fails after
//!   [`QuicConfig::connect_timeout`].
//!
//! # The adapter
//!
//! [`spawn`] drives a node over a bound [`QuicEndpoint`]. A link to a peer is **one
//! connection**, the link policy's single slot, carrying both classes (control and data
//! streams, each with its own send queue in the driver and its own flow control on the wire):
//! it is up when the connection is, and down when it ends, with the evidence
//! [`DownReason::cause`] gives ([`ended`]). Simultaneous dials are settled by the link
//! policy's tie-break (the lower rank's dial wins, [`keeps`]); an inbound connection from a rank
//! the core knows dead is closed with [`CloseCode::Refused`], or [`CloseCode::Removed`] with
//! the epoch when the coordinator removed it (the dialer's core is told,
//! [`DialError::Removed`]). Dials to a dead rank time out (`connect_timeout`) instead of being
//! refused, so such a rank is given up after `dial_attempts` timeouts with back-off.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod book;
mod ca;
mod claim;
mod config;
mod down;
mod driver;
mod endpoint;
mod error;
mod files;
mod frames;
mod hello;
mod link;
mod name;
mod probe;
mod rank;
mod stats;
mod tls;

pub use book::{AddressBook, BookError};
pub use down::{CloseCode, DownReason};
pub use driver::{ended, spawn, QuicConn, QuicConnector};
pub use endpoint::{DialError, EndpointError, Inbound, QuicEndpoint};
pub use frames::{FrameSink, FrameSource, SendError};
pub use hello::{Hello, HelloError, ACCEPTED, HELLO_LEN, HELLO_VERSION};
pub use link::{keeps, LinkParts, LinkWatch, QuicLink, Side, Stream};
pub use stats::{QuicCounters, QuicStats};

pub use ca::{ClusterCa, IssuedRank};
pub use claim::verify_claimed_rank;
pub use config::{
    ConfigError, QuicConfig, MAX_BIDI_STREAMS, MAX_LINK_TIMEOUT, MIN_LINK_TIMEOUT, MIN_MAX_FRAME,
};
pub use error::IdentityError;
pub use files::{CertDir, CA_CERT_FILE, CA_KEY_FILE, RANK_CERT_FILE, RANK_KEY_FILE};
pub use name::{server_name, ClusterId, NAME_SUFFIX};
pub use probe::{probe, probe_endpoint, ProbeOutcome};
pub use rank::RankIdentity;
pub use tls::{client_config, server_config, TlsError, ALPN};
