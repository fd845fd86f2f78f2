//! qual-serve: serving qualification.
//!
//! A serving case owns one server process group (launch recipe: argv, env, cwd, port), waits
//! for `/v1/models` readiness within a deadline, checks who owns the listener, replays a
//! seeded request corpus with a built-in streaming load generator, records per-request event
//! timings, shuts the server down (TERM, grace; KILL is a failure signal), proves that no
//! process or listener is left, and writes a `qualification-case-result-v1` document plus a
//! sidecar evidence file. The zero-compute [`mock`] server is the test target and the
//! client-headroom roofline.
//!
//! Modules: [`sse`] (incremental SSE parser), [`corpus`] (strict JSONL corpus, seeded order),
//! [`recipe`] (strict launch recipe), [`kiln_launch`] (Kiln's launch schema, the base URL,
//! reading either schema), [`record`] (per-request records),
//! [`client`] (one request, streamed or not, over HTTP or HTTPS → one record), [`rxclock`] (kernel receive timestamps
//! on the client socket), [`threadstat`] (the load thread's run-queue wait and preemptions),
//! [`load`] (the one load engine of `serve` and `bench`: plans, closed and open loop,
//! ramp-up, duration, early stop, trace replay), [`metrics`] (definitions and percentiles),
//! [`lifecycle`] (owned process group, readiness, listener ownership, shutdown, residue),
//! [`case`] (the whole case), [`scaffold`] (`kiln-qual init`), [`mock`], [`pacer`] and
//! [`io`] (plumbing).

pub mod case;
pub mod client;
pub mod corpus;
pub mod io;
pub mod kiln_launch;
pub mod lifecycle;
pub mod load;
pub mod metrics;
pub mod mock;
pub mod pacer;
pub mod recipe;
pub mod record;
pub mod rxclock;
pub mod scaffold;
pub mod sse;
pub mod threadstat;
pub mod unary;
