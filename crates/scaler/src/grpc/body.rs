//! A gRPC response body: the messages as HTTP/2 data frames, then the status as trailers.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

use super::{Code, Status, encode_message, frame};

/// The status as headers (trailers, or the headers of a trailers-only response).
pub(super) fn status_headers(status: Option<&Status>) -> HeaderMap {
    let mut h = HeaderMap::new();
    let code = status.map_or(Code::Ok, |s| s.code) as u32;
    h.insert("grpc-status", HeaderValue::from(code));
    if let Some(s) = status
        && let Ok(v) = HeaderValue::from_str(&encode_message(&s.message))
    {
        h.insert("grpc-message", v);
    }
    h
}

/// What the server sends after its response headers.
#[derive(Debug)]
pub(super) enum GrpcBody {
    /// Nothing: a trailers-only response or an HTTP-level refusal.
    Empty,
    /// One message, then OK.
    One {
        message: Option<Bytes>,
        trailers: Option<HeaderMap>,
    },
    /// Messages as they come, then the status.
    Stream {
        messages: mpsc::Receiver<Result<Vec<u8>, Status>>,
        done: bool,
    },
}

impl GrpcBody {
    pub(super) fn one(message: &[u8]) -> GrpcBody {
        GrpcBody::One {
            message: Some(frame(message)),
            trailers: Some(status_headers(None)),
        }
    }
}

impl Body for GrpcBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            GrpcBody::Empty => Poll::Ready(None),
            GrpcBody::One { message, trailers } => {
                if let Some(m) = message.take() {
                    Poll::Ready(Some(Ok(Frame::data(m))))
                } else {
                    Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(t))))
                }
            }
            GrpcBody::Stream { messages, done } => {
                if *done {
                    return Poll::Ready(None);
                }
                match messages.poll_recv(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(Some(Ok(m))) => Poll::Ready(Some(Ok(Frame::data(frame(&m))))),
                    Poll::Ready(Some(Err(s))) => {
                        *done = true;
                        Poll::Ready(Some(Ok(Frame::trailers(status_headers(Some(&s))))))
                    }
                    Poll::Ready(None) => {
                        *done = true;
                        Poll::Ready(Some(Ok(Frame::trailers(status_headers(None)))))
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            GrpcBody::Empty => true,
            GrpcBody::One { message, trailers } => message.is_none() && trailers.is_none(),
            GrpcBody::Stream { done, .. } => *done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            GrpcBody::Empty => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
