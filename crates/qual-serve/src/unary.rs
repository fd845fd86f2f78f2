//! One non-streamed JSON request to a server (`POST` with a JSON body, whole response body
//! read under a byte bound and a deadline). Used by the numerical oracle to read a server's
//! next-token distributions (llama.cpp's `/completion` with `n_probs`); the streaming load
//! generator lives in `client`.

use crate::io::{FullBody, TokioIo};
use hyper::body::{Body, Bytes};
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

/// Sends `POST path` with a JSON body on a fresh connection and reads the whole response.
/// Returns the status and body; refuses a body larger than `max_bytes`, and anything not done
/// within `timeout`.
pub async fn post_json(
    addr: SocketAddr,
    path: &str,
    body: Vec<u8>,
    timeout: Duration,
    max_bytes: usize,
) -> Result<(u16, Vec<u8>), String> {
    let work = async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let task = tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = hyper::Request::post(path)
            .header(hyper::header::HOST, addr.to_string())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(FullBody::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status().as_u16();
        let mut b = resp.into_body();
        let mut out = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut b).poll_frame(cx)).await {
            let frame = frame.map_err(|e| format!("read body: {e}"))?;
            if let Ok(d) = frame.into_data() {
                if out.len() + d.len() > max_bytes {
                    return Err(format!("response body exceeds {max_bytes} bytes"));
                }
                out.extend_from_slice(&d);
            }
        }
        task.abort();
        Ok((status, out))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("no complete response within {} s", timeout.as_secs_f64()))?
}
