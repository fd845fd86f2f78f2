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
//! [`claims`] (how far a server's token claim is believed; api-key redaction),
//! [`client`] (one request, streamed or not, over HTTP or HTTPS → one record), [`rxclock`] (kernel receive timestamps
//! on the client socket), [`threadstat`] (the load thread's run-queue wait and preemptions),
//! [`load`] (the one load engine of `serve` and `bench`: plans, closed and open loop,
//! ramp-up, duration, early stop, trace replay), [`metrics`] (definitions and percentiles),
//! [`lifecycle`] (owned process group, readiness, listener ownership, shutdown, residue),
//! [`case`] (the whole case), [`scaffold`] (`kiln-qual init`), [`mock`], [`pacer`] and
//! [`io`] (plumbing).

pub mod case;
pub mod claims;
pub mod client;
pub mod corpus;
// `unsafe`: reads land in the receive buffer's spare capacity without zeroing it first.
#[allow(unsafe_code)]
pub mod io;
pub mod kiln_launch;
pub mod lifecycle;
// `unsafe`: the realtime reader asks for SCHED_FIFO and pins itself to a CPU through libc.
#[allow(unsafe_code)]
pub mod load;
pub mod metrics;
// `unsafe`: the mock server's pre-exec hook, its CPU pinning and its own rusage.
#[allow(unsafe_code)]
pub mod mock;
pub mod pacer;
pub mod recipe;
pub mod record;
// `unsafe`: receive timestamps come from recvmsg control messages and clock_gettime.
#[allow(unsafe_code)]
pub mod rxclock;
pub mod scaffold;
pub mod sse;
// `unsafe`: per-thread context switches come from getrusage; its tests pin a thread to a CPU.
#[allow(unsafe_code)]
pub mod threadstat;
