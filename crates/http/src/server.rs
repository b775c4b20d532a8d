//! One way to serve an HTTP/1.1 connection, for the simulator's OpenAI API and the scaler's
//! metrics API alike: request heads of 64 KiB at most, [`HEADER_READ_TIMEOUT`] to send them
//! (and as long for an idle keep-alive connection), and a graceful close when the server
//! stops.

use std::error::Error;
use std::future::Future;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;

/// How long a client may take to send a request's headers, and how long an idle keep-alive
/// connection is kept (uvicorn, which vLLM serves through, closes idle connections after
/// 5 s): a connection that stalls in its headers does not hold a task for ever.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The most a request's head may take in the connection's buffer.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Serves `svc` on `stream` until the client closes it or `stop` completes; then requests in
/// progress finish and the connection closes.
pub async fn serve_connection<S, B>(stream: TcpStream, svc: S, stop: impl Future<Output = ()>)
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = stop => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
